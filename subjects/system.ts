/** Messages of the built-in `system` actor: liveness, build information and an echo for benches. */
import { Type, type Static } from "@sinclair/typebox";
import { NoRequest, operation } from "./operation.ts";

export const PingReply = Type.Object({ actor: Type.String(), version: Type.String(), instance: Type.String(), time: Type.String() });
export type PingReply = Static<typeof PingReply>;

export const BuildInfo = Type.Object({
  name: Type.String(),
  version: Type.String(),
  commit: Type.Optional(Type.String()),
  runtime: Type.String(),
  startedAt: Type.String(),
});
export type BuildInfo = Static<typeof BuildInfo>;

/**
 * The echo takes and returns any small JSON object: it needs no credentials (smoke tests, benches), so
 * it must not carry bulk through NATS for anyone who can reach the edge.
 */
export const ECHO_MAX_BYTES = 4096;
export const EchoBody = Type.Record(Type.String(), Type.Unknown());
export type EchoBody = Static<typeof EchoBody>;

export const systemPing = operation("system", "ping", { request: NoRequest, reply: PingReply });
export const systemInfo = operation("system", "info", { request: NoRequest, reply: BuildInfo });
export const systemEcho = operation("system", "echo", { request: EchoBody, reply: EchoBody });
