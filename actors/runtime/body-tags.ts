/**
 * Tags for held reply bodies (docs/edge.md#bodies-not-sent-twice): a caller that keeps a body offers its tag back, and
 * a reply whose body has that tag goes without the bytes. Held bytes never change once sent (EncodedJson's `held`), so a
 * tag is worked out once per bytes object and kept beside it (a WeakMap), from its second send or for a caller that
 * keeps bodies: bytes sent once (a query never asked again) cost no hash.
 */
import { bodyTagOf } from "../../platform/transport/index.ts";

/** Below this a body goes every time: the bytes saved do not pay for the caller's copy and the tag's headers. */
export const MIN_TAGGED_BYTES = 1024;

/** Per held bytes object: null once sent untagged, then its tag. */
const tags = new WeakMap<Uint8Array, string | null>();

/**
 * The tag of held bytes as they go out (the compressed form has its own); undefined for small bytes, and on a first send
 * unless the caller keeps bodies (it offered some: a replica's new bytes may be what it holds already).
 */
export function bodyTag(bytes: Uint8Array, callerKeeps = false): string | undefined {
  if (bytes.length < MIN_TAGGED_BYTES) return undefined;
  const tag = tags.get(bytes);
  if (tag) return tag;
  if (tag === undefined && !callerKeeps) return void tags.set(bytes, null);
  const made = bodyTagOf(bytes);
  tags.set(bytes, made);
  return made;
}

/** Whether a request's `Derrick-Have-Body` offers `tag` (it may offer a few, comma-separated). */
export function offers(haveBody: string | undefined, tag: string): boolean {
  if (haveBody === undefined) return false;
  if (haveBody === tag) return true;
  return haveBody.includes(tag) && haveBody.split(",").some((offered) => offered.trim() === tag);
}
