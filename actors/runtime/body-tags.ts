/**
 * Tags for held reply bodies (docs/edge.md#bodies-not-sent-twice): a caller that keeps a body under its tag offers the
 * tag back, and a reply whose body is those very bytes goes without them. A tag names one bytes object for as long as it
 * lives (a WeakMap on it), and no other: nuid is unique per process and never repeats, so a matching tag means the
 * caller's copy is byte for byte the body this reply would carry, whoever kept it and whoever asks now.
 */
import { nuid } from "@nats-io/nats-core";

/** Below this a body goes every time: the bytes saved do not pay for the caller's copy and the tag's headers. */
export const MIN_TAGGED_BYTES = 1024;

const tags = new WeakMap<Uint8Array, string>();

/** The tag of held bytes as they go out (the compressed form has its own); undefined for a body too small to tag. */
export function bodyTag(bytes: Uint8Array): string | undefined {
  if (bytes.length < MIN_TAGGED_BYTES) return undefined;
  let tag = tags.get(bytes);
  if (tag === undefined) tags.set(bytes, (tag = nuid.next()));
  return tag;
}
