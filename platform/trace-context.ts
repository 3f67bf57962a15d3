/**
 * W3C Trace Context (traceparent, tracestate): read what a caller sent, or start a trace, and make the
 * header for the next hop. Each hop gets a span id of its own under the caller's trace id, so a request
 * can be followed across the edge, the actors and the webhooks it causes by its trace id.
 */
import { randomBytes } from "node:crypto";

export type TraceContext = { traceId: string; spanId: string; flags: string; state?: string };

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
/** A tracestate longer than this, or with characters outside its grammar, is dropped (the spec allows dropping it). */
const TRACESTATE_MAX = 512;
const TRACESTATE = /^[\x20-\x7e]*$/;

/**
 * The caller's trace context, or undefined when the header is absent or invalid (then a new trace starts).
 * Version ff and all-zero ids are invalid; a later version's extra fields are ignored, as the spec asks.
 */
export function parseTraceparent(traceparent: string | null | undefined, tracestate?: string | null): TraceContext | undefined {
  const m = traceparent ? TRACEPARENT.exec(traceparent.trim()) : null;
  if (!m) return undefined;
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  if (version === "ff" || traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  // Version 00 has exactly four fields.
  if (version === "00" && traceparent!.trim().length !== 55) return undefined;
  const state = tracestate && tracestate.length <= TRACESTATE_MAX && TRACESTATE.test(tracestate) ? tracestate : undefined;
  return { traceId, spanId, flags, ...(state ? { state } : {}) };
}

/** The next hop's context: the caller's trace (or a new one, sampled) with a new span id. */
export function childContext(parent: TraceContext | undefined): TraceContext {
  return {
    traceId: parent?.traceId ?? randomHex(16),
    spanId: randomHex(8),
    flags: parent?.flags ?? "01",
    ...(parent?.state ? { state: parent.state } : {}),
  };
}

export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.flags}`;
}

/** `{ traceId }` of a traceparent for a log line's fields; `{}` without a valid one. */
export function traceIdField(trace: { traceparent?: string } | undefined): { traceId?: string } {
  const traceId = parseTraceparent(trace?.traceparent)?.traceId;
  return traceId ? { traceId } : {};
}

/** A context as its two W3C headers (what NATS headers, stored work and webhook POSTs carry). */
export function traceHeaders(context: TraceContext): { traceparent: string; tracestate?: string } {
  return { traceparent: formatTraceparent(context), ...(context.state ? { tracestate: context.state } : {}) };
}

function randomHex(bytes: number): string {
  for (;;) {
    const hex = randomBytes(bytes).toString("hex");
    if (!/^0+$/.test(hex)) return hex;
  }
}
