/** Messages of the built-in `system` actor: liveness, build information and an echo for benches. */
import { Type, type Static } from "@sinclair/typebox";
import { GROUPS } from "./groups.ts";
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

/** The group allowed to see the fleet's status. */
export const OPERATORS_GROUP = GROUPS.operators;

const Count = Type.Integer({ minimum: 0 });

/** One actor process as it answered `$SRV.STATS` (or, when it stopped answering, as last seen). */
export const ActorProcess = Type.Object({
  id: Type.String({ description: "The NATS service instance id" }),
  state: Type.Union([Type.Literal("up"), Type.Literal("gone")], { description: "gone: answered before, not now" }),
  host: Type.Optional(Type.String()),
  pid: Type.Optional(Type.Integer()),
  version: Type.String(),
  startedAt: Type.String({ description: "RFC 3339" }),
  uptimeSeconds: Type.Number(),
  requests: Count,
  errors: Count,
  averageProcessingMs: Type.Number(),
  inflight: Count,
  queued: Count,
  lastSeenAt: Type.String({ description: "RFC 3339: when it last answered" }),
  /** What the actor reports of its background work (a search replica's applied sequence, a deliverer's counters). */
  work: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type ActorProcess = Static<typeof ActorProcess>;

export const ConsumerStatus = Type.Object({ name: Type.String(), pending: Count, ackPending: Count, redelivered: Count, ackFloor: Count });
export type ConsumerStatus = Static<typeof ConsumerStatus>;

export const StreamStatus = Type.Object({
  name: Type.String(),
  messages: Count,
  bytes: Count,
  lastSeq: Count,
  consumers: Type.Array(ConsumerStatus),
});
export type StreamStatus = Static<typeof StreamStatus>;

export const FleetStatus = Type.Object({
  time: Type.String({ description: "RFC 3339: when this was gathered" }),
  actors: Type.Array(Type.Object({ name: Type.String(), processes: Type.Array(ActorProcess) })),
  streams: Type.Array(StreamStatus, { description: "Streams other than KV buckets, with their durable consumers" }),
  buckets: Type.Object({ count: Count, bytes: Count }, { description: "KV buckets (twins are one each), summed" }),
  search: Type.Object({
    replicas: Type.Array(Type.Object({ id: Type.String(), appliedSeq: Count, lagRecords: Count })),
  }),
  notifications: Type.Object({ deadLetters: Count, pausedSubscriptions: Count }),
  content: Type.Object({ tasksQueued: Count, tasksRunning: Count }),
});
export type FleetStatus = Static<typeof FleetStatus>;

export const systemStatus = operation("system", "status", { request: NoRequest, reply: FleetStatus });
