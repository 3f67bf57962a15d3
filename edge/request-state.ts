/** Per-request facts the plugins share, keyed by the Request object (no globals, no leaks). */
import { nuid } from "@nats-io/nats-core";
import type { Principal, RequestMeta } from "../subjects/index.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const states = new WeakMap<Request, { id: string; start: number }>();

/** The caller's `x-request-id` when it is sane, else a fresh one. */
export function assignRequestId(request: Request): string {
  const given = request.headers.get("x-request-id");
  const id = given && REQUEST_ID.test(given) ? given : nuid.next();
  states.set(request, { id, start: performance.now() });
  return id;
}

export const requestIdOf = (request: Request) => states.get(request)?.id ?? assignRequestId(request);
export const startOf = (request: Request) => states.get(request)?.start ?? performance.now();

/** What travels to the actor with a request: who, which partition, which request id. */
export function requestMeta(request: Request, principal?: Principal, partition?: string): RequestMeta {
  return {
    requestId: requestIdOf(request),
    ...(principal ? { principal } : {}),
    ...(partition ? { partition } : {}),
    traceparent: request.headers.get("traceparent") ?? undefined,
  };
}
