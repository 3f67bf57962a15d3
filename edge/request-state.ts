/** Per-request facts the plugins share, keyed by the Request object (no globals, no leaks). */
import { nuid } from "@nats-io/nats-core";
import type { Principal, RequestMeta } from "../subjects/index.ts";
import { childContext, parseTraceparent, traceHeaders, type TraceContext } from "../platform/trace-context.ts";
import type { Span, Tracer } from "../platform/tracing.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const states = new WeakMap<Request, { id: string; start: number; trace?: TraceContext; span?: Span }>();

/** The caller's `x-request-id` when it is sane, else a fresh one. */
export function assignRequestId(request: Request): string {
  const given = request.headers.get("x-request-id");
  const id = given && REQUEST_ID.test(given) ? given : nuid.next();
  states.set(request, { id, start: performance.now() });
  return id;
}

export const requestIdOf = (request: Request) => states.get(request)?.id ?? assignRequestId(request);

/** The edge's span of the request: under the caller's trace (traceparent), else in a new trace. Made once per request. */
export function traceOf(request: Request): TraceContext {
  requestIdOf(request);
  const state = states.get(request)!;
  return (state.trace ??= childContext(callerTrace(request)));
}

/** Records the request's span (an exporting tracer): its context is then the edge's span of the request. */
export function beginSpan(request: Request, tracer: Tracer): void {
  requestIdOf(request);
  const state = states.get(request)!;
  state.span ??= tracer.httpServer(callerTrace(request), request.method, state.start);
  state.trace = state.span.context;
}

/** The request's recorded span, if beginSpan made one. */
export const spanOf = (request: Request) => states.get(request)?.span;

const callerTrace = (request: Request) => parseTraceparent(request.headers.get("traceparent"), request.headers.get("tracestate"));

/** The trace id of a request, if one was made for it (for its log lines). */
export const traceIdOf = (request: Request) => states.get(request)?.trace?.traceId;
export const startOf = (request: Request) => states.get(request)?.start ?? performance.now();

/** What travels to the actor with a request: who, which partition, which request id. */
export function requestMeta(request: Request, principal?: Principal, partition?: string): RequestMeta {
  return {
    requestId: requestIdOf(request),
    ...(principal ? { principal } : {}),
    ...(partition ? { partition } : {}),
    ...traceHeaders(traceOf(request)),
  };
}
