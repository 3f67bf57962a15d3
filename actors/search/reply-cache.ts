/**
 * Replies of `/query` kept until the replica changes, as OpenSearch's shard request cache keeps a shard's
 * results until its next refresh: a dashboard or a poller asking the same query again costs a Map lookup
 * instead of a plan and SQLite's statements (docs/search.md#repeated-queries). Nothing is answered that an
 * uncached query would not answer: any applied change, reset or bulk load empties the cache first.
 */
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { EncodedJson } from "../../subjects/index.ts";
import type { Access } from "./backend.ts";
import type { QueryNode } from "./query/ast.ts";

/** Bounds of the cache: most replies, most bytes in total; a reply larger than an eighth of that is not kept. */
export const REPLY_CACHE_ENTRIES = 1024;
export const REPLY_CACHE_BYTES = 8 * 1024 * 1024;

/**
 * The key of a query's reply: everything the answer depends on besides the index. The groups are a JSON list
 * (a group name may hold any character, a comma too); the body is the parsed JSON serialized again.
 */
export function replyKey(partition: string, access: Access, body: unknown): string | undefined {
  const text = JSON.stringify(body);
  if (text === undefined) return undefined;
  return `${partition}\n${accessKey(access)}\n${text}`;
}

/** The key's part for an access, made once per frozen access (a caller's is shared by its requests: handlers.ts). */
const accessKeys = new WeakMap<Access, string>();

function accessKey(access: Access): string {
  let who = accessKeys.get(access);
  if (who !== undefined) return who;
  who = access.all ? "*" : JSON.stringify([...access.groups].sort());
  if (Object.isFrozen(access) && (access.all || Object.isFrozen(access.groups))) accessKeys.set(access, who);
  return who;
}

/**
 * Whether a query's answer moves with the clock: a range bound anchored at `now` (date math), nested ones
 * included. Read on the parsed query, after escapes are gone (`n\\ow` is `now` to the parser). Such a reply
 * is not kept; nothing else in a query reads the clock.
 */
export function readsClock(node: QueryNode): boolean {
  switch (node.type) {
    case "range":
      return [node.lower, node.upper].some((bound) => bound !== undefined && /^\s*now/i.test(bound));
    case "bool":
      return [...node.must, ...node.should, ...node.mustNot].some(readsClock);
    case "nested":
      return readsClock(node.query);
    default:
      return false;
  }
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

  /**
   * Keeps a reply computed at the version the last `get` saw (search is synchronous: nothing applied in between), and
   * says whether it did: a reply refused is answered once, not again.
   */
  set(key: string, reply: EncodedJson<T>): boolean {
    const weight = reply.bytes.byteLength + key.length * 2;
    if (this.version === undefined || this.versionOf() !== this.version || weight > REPLY_CACHE_BYTES / 8) return false;
    this.replies.set(key, reply, weight);
    return true;
  }
}
