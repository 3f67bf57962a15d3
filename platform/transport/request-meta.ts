/** Writes and reads the request metadata headers (subjects/headers.ts names them) of a NATS message. */
import { MsgHdrsImpl, type Msg, type MsgHdrs } from "@nats-io/nats-core";
import { Header, type Principal, type RequestMeta } from "../../subjects/index.ts";
import { parseTraceparent, traceHeaders, type TraceContext } from "../trace-context.ts";
import { BoundedCache } from "../bounded-cache.ts";

/**
 * Built straight into nats-core's header map (`MsgHdrsImpl.fromRecord`): `set()` re-validates, canonicalizes and
 * scans per key, on every edge request. The values are safe by construction (tokens, numbers, JSON, ids checked
 * at the edge); a free-text value with a line break is dropped rather than allowed to end the header block.
 */
export function encodeRequestMeta(meta: RequestMeta): MsgHdrs {
  const fields: Record<string, string[]> = {};
  if (meta.partition) fields[Header.partition] = [meta.partition];
  if (meta.principal) fields[Header.principal] = [principalJson(meta.principal)];
  if (meta.requestId && !LINE_BREAK.test(meta.requestId)) fields[Header.requestId] = [meta.requestId];
  if (meta.deadline) fields[Header.deadline] = [String(meta.deadline)];
  if (meta.traceparent && !LINE_BREAK.test(meta.traceparent)) fields[Header.traceparent] = [meta.traceparent];
  if (meta.tracestate && !LINE_BREAK.test(meta.tracestate)) fields[Header.tracestate] = [meta.tracestate];
  if (meta.acceptEncoding === "gzip") fields[Header.acceptEncoding] = ["gzip"];
  if (meta.haveBody && !LINE_BREAK.test(meta.haveBody)) fields[Header.haveBody] = [meta.haveBody];
  return MsgHdrsImpl.fromRecord(fields);
}

const LINE_BREAK = /[\r\n]/;

/** A caller's principal is one object per verified token at the edge: its JSON is written once. */
const principalJsons = new WeakMap<Principal, string>();

function principalJson(principal: Principal): string {
  let json = principalJsons.get(principal);
  if (json === undefined) principalJsons.set(principal, (json = JSON.stringify(principal)));
  return json;
}

/**
 * Principals as received, by their JSON: a caller sends the same one with every request. Each is frozen, being shared
 * by the requests that carry it; bounded by count (a principal's JSON is a few hundred bytes).
 */
const principalsByJson = new BoundedCache<string, Principal>({ max: 1024 });

function principalOf(json: string): Principal {
  let principal = principalsByJson.get(json);
  if (principal) return principal;
  principal = JSON.parse(json) as Principal;
  // Anyone in the account may publish a request: what is no object is handed on as before, for the checks to refuse.
  if (principal !== null && typeof principal === "object") {
    if (Array.isArray(principal.groups)) Object.freeze(principal.groups);
    principalsByJson.set(json, Object.freeze(principal));
  }
  return principal;
}

export function decodeRequestMeta(h: MsgHdrs | undefined): RequestMeta {
  if (!h) return {};
  return metaFrom((name) => h.get(name) || undefined);
}

/**
 * The request metadata of a received message, from its raw header block when the message exposes one (nats-core's
 * MsgImpl `_rdata`/`_msg.hdr`, maybe wrapped as `msg` by @nats-io/services), else through `msg.headers`, whose
 * decode costs a regex per line (docs/edge.md#the-transports-own-paths; test/platform/bus-headers.test.ts pins both).
 */
export function readRequestMeta(msg: Msg | { msg?: unknown; headers?: MsgHdrs }): RequestMeta {
  const block = rawHeaderBlock(msg);
  if (block === undefined) return decodeRequestMeta(msg.headers);
  if (block === null) return {};
  const fields = parseHeaderBlock(block);
  return metaFrom((name) => fields.get(name));
}

type RawMsg = { _rdata?: Uint8Array; _msg?: { hdr?: number } };

/** The raw `NATS/1.0…` block; null when the message has none; undefined when not reachable. */
export function rawHeaderBlock(msg: unknown): Uint8Array | null | undefined {
  const inner = ((msg as { msg?: unknown }).msg ?? msg) as RawMsg;
  const hdr = inner._msg?.hdr;
  if (typeof hdr !== "number" || !(inner._rdata instanceof Uint8Array)) return undefined;
  return hdr > 0 ? inner._rdata.subarray(0, hdr) : null;
}

const utf8 = new TextDecoder();

/**
 * `Key: value` lines of a header block, first value per key (as MsgHdrs.get answers). Keys are
 * matched exactly, as nats.js does by default; values are trimmed.
 */
export function parseHeaderBlock(block: Uint8Array): Map<string, string> {
  const fields = new Map<string, string>();
  const text = utf8.decode(block);
  let start = text.indexOf("\r\n");
  // Sliced from the block's text directly: no string per line (this runs on every request an actor receives).
  while (start !== -1) {
    const lineStart = start + 2;
    const end = text.indexOf("\r\n", lineStart);
    const lineEnd = end === -1 ? text.length : end;
    const colon = text.indexOf(":", lineStart);
    if (colon > lineStart && colon < lineEnd) {
      const key = text.slice(lineStart, colon);
      if (!fields.has(key)) fields.set(key, text.slice(colon + 1, lineEnd).trim());
    }
    start = end;
  }
  return fields;
}

function metaFrom(get: (name: string) => string | undefined): RequestMeta {
  const principal = get(Header.principal);
  const deadline = Number(get(Header.deadline));
  return {
    partition: get(Header.partition) || undefined,
    principal: principal ? principalOf(principal) : undefined,
    requestId: get(Header.requestId) || undefined,
    deadline: Number.isFinite(deadline) && deadline > 0 ? deadline : undefined,
    traceparent: get(Header.traceparent) || undefined,
    tracestate: get(Header.tracestate) || undefined,
    acceptEncoding: get(Header.acceptEncoding) === "gzip" ? "gzip" : undefined,
    haveBody: get(Header.haveBody) || undefined,
  };
}

/** Headers of a stored message (an event, a content task) that carry a request's trace to the work it left. */
export function traceMessageHeaders(trace: TraceContext): MsgHdrs {
  const fields = traceHeaders(trace);
  return MsgHdrsImpl.fromRecord({
    [Header.traceparent]: [fields.traceparent],
    ...(fields.tracestate && !LINE_BREAK.test(fields.tracestate) ? { [Header.tracestate]: [fields.tracestate] } : {}),
  });
}

/** The trace a received message's headers carry; undefined when none or an invalid one (anyone may publish on NATS). */
export function traceOfMessage(header: { get(key: string): string } | undefined): TraceContext | undefined {
  return parseTraceparent(header?.get(Header.traceparent) || undefined, header?.get(Header.tracestate) || undefined);
}
