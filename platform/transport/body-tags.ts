/**
 * The tag of a reply body (docs/edge.md#bodies-not-sent-twice): the first 22 characters (132 bits) of the base64url
 * SHA-256 of its bytes. It names content, not an object: replicas holding equal bytes give the same tag, and the Bus
 * checks a tag against the bytes that came before keeping them, so no responder can file other bytes under it.
 */
import { createHash } from "node:crypto";

const BODY_TAG_CHARS = 22;

export function bodyTagOf(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("base64url").slice(0, BODY_TAG_CHARS);
}
