/**
 * Replies of `/query` kept until the replica changes, as OpenSearch's shard request cache keeps a shard's
 * results until its next refresh: a dashboard or a poller asking the same query again costs a Map lookup
 * instead of a plan and SQLite's statements (docs/search.md#repeated-queries). Nothing is answered that an
 * uncached query would not answer: any applied change, reset or bulk load empties the cache first.
 */
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { EncodedJson } from "../../subjects/index.ts";
import type { Access } from "./backend.ts";

/** Bounds of the cache: most replies, most bytes in total; a reply larger than an eighth of that is not kept. */
export const REPLY_CACHE_ENTRIES = 1024;
export const REPLY_CACHE_BYTES = 8 * 1024 * 1024;

/**
 * The key of a query's reply: everything the answer depends on besides the index. `undefined` when the body
 * mentions `now` anywhere (a date-math range moves with the clock, not with writes), conservatively: a word
 * such as "snow" is not cached either. The body is the parsed JSON re-serialized, so escapes (`\u006eow`)
 * cannot hide the word.
 */
export function replyKey(partition: string, access: Access, body: unknown): string | undefined {
  const text = JSON.stringify(body);
  if (text === undefined || text.includes("now")) return undefined;
  const who = access.all ? "*" : [...access.groups].sort().join(",");
  return `${partition}\n${who}\n${text}`;
}

export class ReplyCache<T> {
  private readonly replies = new BoundedCache<string, EncodedJson<T>>({ max: REPLY_CACHE_ENTRIES, maxWeight: REPLY_CACHE_BYTES });
  private version: number | undefined;

  /** `versionOf`: changes whenever the index may answer differently; undefined while it may change unannounced. */
  constructor(private readonly versionOf: () => number | undefined) {}

  /** The reply kept for `key` at the index's current version. */
  get(key: string): EncodedJson<T> | undefined {
    const version = this.versionOf();
    if (version !== this.version || version === undefined) {
      this.replies.clear();
      this.version = version;
      return undefined;
    }
    return this.replies.get(key);
  }

  /** Keeps a reply computed at the version the last `get` saw (search is synchronous: nothing applied in between). */
  set(key: string, reply: EncodedJson<T>): void {
    const weight = reply.bytes.byteLength + key.length * 2;
    if (this.version === undefined || this.versionOf() !== this.version || weight > REPLY_CACHE_BYTES / 8) return;
    this.replies.set(key, reply, weight);
  }

  get size(): number {
    return this.replies.size;
  }
}
