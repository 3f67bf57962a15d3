/**
 * Turns an actor's reply into the HTTP answer: its status, its headers, its body. The JSON bytes
 * pass through untouched (no parse and re-serialize on the edge): the actor built them from its
 * schema-checked result. The route's response schema documents the shape in OpenAPI.
 */
import { BoundedCache } from "../platform/bounded-cache.ts";
import type { BusReply } from "../platform/transport/index.ts";

export type SetLike = { status?: number | string; headers: Record<string, string | number> };

/**
 * The media type to answer with, of those a route `offers` (the first is the default), by `Accept` (RFC 9110
 * §12.5.1: the most specific range gives a type its q; the highest q wins, ties go to the earlier offer).
 * Nothing acceptable → the default, not a 406, as the notifications API's own servers do.
 */
export function negotiate(accept: string | null, offers: readonly [string, ...string[]]): string {
  if (!accept) return offers[0];
  const ranges = accept.split(",").flatMap((part) => {
    const [range, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    if (!range || !/^[^\s/]+\/[^\s/]+$/.test(range)) return [];
    const qParam = params.find((p) => p.startsWith("q="));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    return Number.isFinite(q) ? [{ range, q }] : [];
  });
  let best = offers[0];
  let bestQ = 0;
  for (const offer of offers) {
    const [type] = offer.split("/");
    const exact = ranges.find((r) => r.range === offer);
    const match = exact ?? ranges.find((r) => r.range === `${type}/*`) ?? ranges.find((r) => r.range === "*/*");
    if (match && match.q > bestQ) {
      best = offer;
      bestQ = match.q;
    }
  }
  return best;
}

/** Answers by header value: a client sends the same Accept-Encoding with every request. Bounded: anyone may send any. */
const gzipTaken = new BoundedCache<string, boolean>({ max: 256 });
const MEMO_MAX_CHARS = 200;

/** Whether an `Accept-Encoding` takes gzip (RFC 9110 §12.5.3): `gzip;q=0` refuses it, `*` stands for codings not named. */
export function acceptsGzip(header: string | null): boolean {
  if (!header) return false;
  // Clients send short values (`gzip, deflate, br, zstd`); a long one is parsed, not kept.
  if (header.length > MEMO_MAX_CHARS) return takesGzip(header);
  let taken = gzipTaken.get(header);
  if (taken === undefined) gzipTaken.set(header, (taken = takesGzip(header)));
  return taken;
}

function takesGzip(header: string): boolean {
  let star: number | undefined;
  for (const part of header.split(",")) {
    const [coding, ...params] = part
      .trim()
      .toLowerCase()
      .split(";")
      .map((t) => t.trim());
    const q = Number(params.find((p) => p.startsWith("q="))?.slice(2) ?? 1);
    if (coding === "gzip" || coding === "x-gzip") return q > 0;
    if (coding === "*") star = q;
  }
  return star !== undefined && star > 0;
}

export function forward(set: SetLike, reply: BusReply<unknown>, contentType = "application/json"): Response {
  // A plain record: Bun builds the response headers from it directly (cheaper than a Headers object).
  const headers: Record<string, string> = {};
  for (const name in set.headers) headers[name] = String(set.headers[name]);
  Object.assign(headers, lowerCased(reply.headers));
  // The Response carries everything `set` held. Left in `set`, Elysia would build the response a second time
  // to merge them in (docs/edge.md#round-trip-benchmark-history). Metrics read the status from the Response (app.ts).
  set.headers = {};
  set.status = 200;
  if (reply.status === 204 || reply.raw.length === 0) return new Response(null, { status: reply.status, headers });
  // A success body goes out in the negotiated type (one route offers several); anything else as before.
  headers["content-type"] = reply.status < 300 ? contentType : "application/json";
  return new Response(reply.raw, { status: reply.status, headers });
}

/** Reply headers with lower-case names, as the edge writes its own: made once per shared (frozen) object the Bus hands out. */
const lowered = new WeakMap<object, Readonly<Record<string, string>>>();

function lowerCased(headers: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  const lower = lowered.get(headers);
  if (lower) return lower;
  const made: Record<string, string> = {};
  for (const name in headers) made[name.toLowerCase()] = headers[name]!;
  // A header object not shared (a test's, a caller's own) may still change: only frozen ones are remembered.
  if (Object.isFrozen(headers)) lowered.set(headers, made);
  return made;
}
