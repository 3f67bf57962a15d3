/**
 * Held replies (EncodedJson marked `held`: a cache's bytes, answered again) go gzip-compressed to callers that take it,
 * compressed once per held value and kept beside it for as long as it lives (a WeakMap on its bytes): a read then costs
 * no compression and carries about a third of the bytes through NATS and HTTP (docs/edge.md#compressed-replies).
 */
import { gzipSync } from "node:zlib";
import type { EncodedJson } from "../../subjects/index.ts";

/** Below this a reply goes as it is: the bytes saved do not pay for a second form held in memory. */
export const MIN_COMPRESSED_BYTES = 1024;

const compressed = new WeakMap<Uint8Array, Uint8Array>();

/** The body to send and the HTTP headers it adds, for a caller that does (`gzip`) or does not take gzip. */
export function codedBody(
  body: EncodedJson<unknown>,
  headers: Record<string, string> | undefined,
  acceptEncoding: "gzip" | undefined,
): { bytes: Uint8Array; headers: Record<string, string> | undefined } {
  // An ETag names one representation (RFC 9110 §8.8.3): a tagged reply keeps the one it names.
  if (!body.held || body.bytes.length < MIN_COMPRESSED_BYTES || (headers && hasHeader(headers, "etag"))) {
    return { bytes: body.bytes, headers };
  }
  // Either form may be answered for this resource, so a shared cache must key on the request's Accept-Encoding.
  const vary = { ...headers, Vary: "Accept-Encoding" };
  if (acceptEncoding !== "gzip") return { bytes: body.bytes, headers: vary };
  let packed = compressed.get(body.bytes);
  if (!packed) compressed.set(body.bytes, (packed = gzipSync(body.bytes)));
  return { bytes: packed, headers: { ...vary, "Content-Encoding": "gzip" } };
}

const hasHeader = (headers: Record<string, string>, lower: string) => Object.keys(headers).some((name) => name.toLowerCase() === lower);
