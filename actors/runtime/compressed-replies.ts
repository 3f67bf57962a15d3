/**
 * Held replies (EncodedJson marked `held`: bytes a cache keeps, answered again) go gzip-compressed to callers that take it
 * from their second answer on, compressed once per held value and kept beside it for as long as it lives (a WeakMap on its
 * bytes): a read then costs no compression and carries about a third of the bytes through NATS and HTTP. The first answer
 * goes plain: most search replies are kept yet never asked again; a large one (LARGE_REPLY_BYTES) goes compressed from
 * its first answer on, held or not (docs/edge.md#compressed-replies).
 */
import { gzipSync } from "node:zlib";
import type { EncodedJson } from "../../subjects/index.ts";
import { headerNamed } from "../../platform/transport/header-names.ts";

/** Below this a reply goes as it is: the bytes saved do not pay for a second form held in memory. */
export const MIN_COMPRESSED_BYTES = 1024;

/** Per held bytes object: null once answered, then its compressed form. */
const compressed = new WeakMap<Uint8Array, Uint8Array | null>();

/**
 * From this size a reply goes gzip-compressed to a caller that takes it on every answer, held or not, at a fast level:
 * past a socket's 64 KiB read a message takes two reads at each hop (the edge's from nats-server, the client's from the
 * edge), each a wake-up on a busy machine, which costs more than a fast gzip (docs/edge.md#compressed-replies).
 */
export const LARGE_REPLY_BYTES = 48 * 1024;
/** gzip level of large replies compressed on their first answer: ~0.15 ms for a 75 KB search page on the 2-core VM. */
const FAST_LEVEL = 1;

/** The body to send and the HTTP headers it adds, for a caller that does (`gzip`) or does not take gzip. */
export function codedBody(
  body: EncodedJson<unknown>,
  headers: Record<string, string> | undefined,
  acceptEncoding: "gzip" | undefined,
): { bytes: Uint8Array; headers: Record<string, string> | undefined } {
  const large = body.bytes.length >= LARGE_REPLY_BYTES;
  // An ETag names one representation (RFC 9110 §8.8.3): a tagged reply keeps the one it names.
  if (!(body.varies || large) || body.bytes.length < MIN_COMPRESSED_BYTES || (headers && headerNamed(headers, "etag") !== undefined)) {
    return { bytes: body.bytes, headers };
  }
  // Either form may be answered for this resource, so a shared cache must key on the request's Accept-Encoding.
  const vary = withVary(headers);
  const plain = { bytes: body.bytes, headers: vary };
  // Smaller bytes no cache keeps are compressed for nobody: gzip costs more than the bytes it saves on one answer.
  if (!body.held) return large && acceptEncoding === "gzip" ? gzipped(fastGzip(body.bytes), vary) : plain;
  let packed = compressed.get(body.bytes);
  // Nor are smaller held bytes on their first answer, which may be their only one (a search no one repeats).
  if (packed === undefined && !large) {
    compressed.set(body.bytes, null);
    return plain;
  }
  if (acceptEncoding !== "gzip") return plain;
  if (!packed) compressed.set(body.bytes, (packed = large ? fastGzip(body.bytes) : gzipSync(body.bytes)));
  return gzipped(packed, vary);
}

/** Bun's own gzip: about half the time of node:zlib's at the same level here. */
const fastGzip = (bytes: Uint8Array): Uint8Array => Bun.gzipSync(bytes as Uint8Array<ArrayBuffer>, { level: FAST_LEVEL });

const gzipped = (bytes: Uint8Array, vary: Record<string, string>) => ({ bytes, headers: { ...vary, "Content-Encoding": "gzip" } });

/** `headers` with Accept-Encoding added to the Vary a handler may have set already (RFC 9110 §12.5.5: a list). */
function withVary(headers: Record<string, string> | undefined): Record<string, string> {
  const name = headers && headerNamed(headers, "vary");
  if (!headers || !name) return { ...headers, Vary: "Accept-Encoding" };
  const listed = headers[name]!.split(",").map((field) => field.trim().toLowerCase());
  if (listed.includes("accept-encoding") || listed.includes("*")) return headers;
  return { ...headers, [name]: `${headers[name]}, Accept-Encoding` };
}
