/**
 * Search's cursors in KV derrick_search_cursors: `<partition>.<cursor>` → CursorState (max age = the cursor TTL, restarted
 * by each use's rewrite) and an `issuers.<partition>.<principal hash>.<cursor>` mark, so a principal's cursors are counted
 * from key names without reading plans (docs/search.md#cursors). The records it indexes are storage's (actors/storage).
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import { recreateOnDeletion, recreatingBucket } from "../runtime/recreate.ts";
import type { Logger } from "../../platform/logger.ts";
import { createHash } from "node:crypto";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import type { SortValue } from "./backend.ts";
import { encodeJson, readJson, readKv } from "../runtime/kv.ts";
import type { SearchPlan } from "./validate.ts";

export const CURSOR_BUCKET = "derrick_search_cursors";

/** What a cursor remembers between pages. */
export type CursorState = {
  /** `<clientId>/<subject>` of the caller who opened it. */
  principal: string;
  plan: SearchPlan;
  /** Sort values then id of the last row returned. */
  after?: SortValue[];
  totalCount: number;
  /** The last page was short: the next call answers empty and closes the cursor. */
  exhausted: boolean;
};

export type CursorStore = {
  get(partition: string, cursor: string): Promise<CursorState | undefined>;
  /** Writes the state and its issuer's mark (both restart their time to live). */
  put(partition: string, cursor: string, state: CursorState): Promise<void>;
  /** Removes the state and the mark of `principal` (the state's issuer). */
  delete(partition: string, cursor: string, principal: string): Promise<void>;
  /** Cursors of the partition still alive (at most `max`). */
  count(partition: string, max: number): Promise<number>;
  /** Cursors of the partition still alive that `principal` opened (at most `max`). */
  countOwned(partition: string, principal: string, max: number): Promise<number>;
};

/** A principal (`<clientId>/<subject>`, any characters) as one KV key token. */
const issuerToken = (principal: string) => createHash("sha256").update(principal).digest("hex").slice(0, 32);

/** `close` stops making the bucket again on deletion advisories. */
export async function openCursorStore(
  nc: NatsConnection,
  ttlMs: number,
  policy: StoragePolicy = SINGLE_NODE,
  log?: Logger,
): Promise<CursorStore & { close(): void }> {
  const kvm = new Kvm(nc);
  const options = bucketOptions(policy, { history: 1, ttl: ttlMs });
  const kv: KV = await kvm.create(CURSOR_BUCKET, options);
  // Made again at the deletion advisory or on next use, its cursors gone (400, as expired): a continuation reads the
  // bucket first, and a read of a deleted bucket is not answered before the edge gives up (recreateOnDeletion).
  const recovery = recreatingBucket(await jetstreamManager(nc), kvm, CURSOR_BUCKET, options, log);
  const { guard } = recovery;
  const advisories = recreateOnDeletion(nc, { [CURSOR_BUCKET]: recovery }, log);
  const key = (partition: string, cursor: string) => `${partition}.${cursor}`;
  // Four tokens: never matched by a partition's `<partition>.*`, whatever the partition is called.
  const issuerKey = (partition: string, principal: string, cursor: string) => `issuers.${partition}.${issuerToken(principal)}.${cursor}`;
  const live = (pattern: string, max: number) =>
    guard(async () => Math.min((await readKv(kv, { key: pattern, headersOnly: true })).filter((e) => e.operation === "PUT").length, max));
  return {
    close: () => advisories.unsubscribe(),
    get: (partition, cursor) => guard(() => readJson<CursorState>(kv, key(partition, cursor))),
    put: (partition, cursor, state) =>
      // Written together, so they expire together; the mark holds the cursor id only.
      guard(
        async () =>
          void (await Promise.all([
            kv.put(issuerKey(partition, state.principal, cursor), cursor),
            kv.put(key(partition, cursor), encodeJson(state)),
          ])),
      ),
    delete: (partition, cursor, principal) =>
      // Purge, not delete: a delete marker would count as a key until the bucket's age removes it.
      guard(async () => void (await Promise.all([kv.purge(key(partition, cursor)), kv.purge(issuerKey(partition, principal, cursor))]))),
    count(partition, max) {
      return live(`${partition}.*`, max);
    },
    countOwned(partition, principal, max) {
      return live(`issuers.${partition}.${issuerToken(principal)}.*`, max);
    },
  };
}
