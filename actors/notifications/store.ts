/**
 * Subscriptions in JetStream KV (bucket `derrick_notifications`):
 *   sub.<subscription_id>                  → SubscriptionRecord
 *   idx.<partition>.<client_id>.<type>     → { subscription_id }   (the one-per-source rule)
 * The index key is created with KV create (compare-and-set), so concurrent first posts of the same
 * type converge on one subscription; records are rewritten with update(revision) loops.
 * SubscriptionCache keeps a watched in-memory copy for the API, the dispatcher and the deliverer.
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import type { Subscription } from "../../subjects/notifications.ts";
import { republishedWrites } from "../../subjects/index.ts";
import { casPut, encodeJson, isLive, readJson, readKv, readVersioned, type Versioned } from "../runtime/kv.ts";
import { BucketView, directLastMessage } from "../runtime/bucket-view.ts";
import { guardedKv, recreateOnDeletion, recreatingBucket, unguarded, type Guard } from "../runtime/recreate.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";

export const SUBSCRIPTIONS_BUCKET = "derrick_notifications";

/** What is stored: the full form plus owner, secrets and health. Never returned as is. */
export type SubscriptionRecord = Subscription & {
  partition: string;
  created_at: string;
  secret: string;
  /** The secret before the last rotation, still signing until `previous_secret_until` (epoch ms). */
  previous_secret?: string;
  previous_secret_until?: number;
  /** Set when deliveries are paused (410 from the receiver, or failing for too long). */
  paused_at?: string;
  paused_reason?: string;
  /** Epoch ms of the first failure since the last success. */
  failing_since?: number;
};

export const subKey = (id: string) => `sub.${id}`;
export const indexKey = (partition: string, clientId: string, type: string) => `idx.${partition}.${clientId}.${type}`;

export class SubscriptionStore {
  constructor(
    readonly kv: KV,
    private readonly guard: Guard = unguarded,
    /** Stops making the bucket again on deletion advisories. */
    readonly close: () => void = () => undefined,
    /** Where deletion advisories are heard (the cache's watch learns of a bucket made again at once). */
    readonly nc?: NatsConnection,
  ) {}

  /**
   * The bucket, made again when deleted at runtime (an operator, a tool, a lost store) at the server's
   * deletion advisory or on its next use, as every store of derrick is; its subscriptions went with it.
   */
  static async open(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE, log?: Logger): Promise<SubscriptionStore> {
    const kvm = new Kvm(nc);
    const options = bucketOptions(policy, { history: 1, republish: republishedWrites(SUBSCRIPTIONS_BUCKET) });
    const kv = await kvm.create(SUBSCRIPTIONS_BUCKET, options);
    const recovery = recreatingBucket(await jetstreamManager(nc), kvm, SUBSCRIPTIONS_BUCKET, options, log);
    const advisories = recreateOnDeletion(nc, { [SUBSCRIPTIONS_BUCKET]: recovery }, log);
    return new SubscriptionStore(guardedKv(kv, recovery.guard), recovery.guard, () => advisories.unsubscribe(), nc);
  }

  async get(id: string): Promise<Versioned<SubscriptionRecord> | undefined> {
    return readVersioned<SubscriptionRecord>(this.kv, subKey(id));
  }

  async indexOf(partition: string, clientId: string, type: string): Promise<string | undefined> {
    return (await readJson<{ subscription_id: string }>(this.kv, indexKey(partition, clientId, type)))?.subscription_id;
  }

  /** Creates the record, then claims the index; false (and nothing left behind) when another post claimed it first. */
  async create(record: SubscriptionRecord): Promise<boolean> {
    await this.kv.create(subKey(record.subscription_id), encodeJson(record));
    try {
      await this.kv.create(
        indexKey(record.partition, record.client_id, record.subscription_type),
        encodeJson({ subscription_id: record.subscription_id }),
      );
      return true;
    } catch (error) {
      await this.kv.purge(subKey(record.subscription_id)).catch(() => undefined);
      if (await this.indexOf(record.partition, record.client_id, record.subscription_type)) return false;
      throw error;
    }
  }

  /** Compare-and-set write; false when the record changed since `revision`. */
  replace(record: SubscriptionRecord, revision: number): Promise<boolean> {
    return casPut(this.kv, subKey(record.subscription_id), record, revision, true);
  }

  /** Applies `change` with compare-and-set until it sticks; undefined when the record is gone. */
  async modify(
    id: string,
    change: (record: SubscriptionRecord) => SubscriptionRecord | undefined,
  ): Promise<SubscriptionRecord | undefined> {
    for (let tries = 0; tries < 20; tries++) {
      const current = await this.get(id);
      if (!current) return undefined;
      const next = change(current.value);
      if (!next) return current.value;
      if (await this.replace(next, current.revision)) return next;
    }
    throw new Error(`subscription ${id} kept changing; gave up`);
  }

  async listOwn(partition: string, clientId: string): Promise<SubscriptionRecord[]> {
    const index = await this.guard(() => readKv(this.kv, { key: `idx.${partition}.${clientId}.*` }));
    const ids = index.filter(isLive).map((entry) => entry.json<{ subscription_id: string }>().subscription_id);
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is Versioned<SubscriptionRecord> => !!r).map((r) => r.value);
  }

  /** A client's subscriptions in every partition (by the index: one key per partition and type). */
  async listOfClient(clientId: string): Promise<SubscriptionRecord[]> {
    const index = await this.guard(() => readKv(this.kv, { key: `idx.*.${clientId}.*` }));
    const ids = index.filter(isLive).map((entry) => entry.json<{ subscription_id: string }>().subscription_id);
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is Versioned<SubscriptionRecord> => r?.value.client_id === clientId).map((r) => r.value);
  }

  async remove(record: SubscriptionRecord): Promise<void> {
    await this.kv.purge(indexKey(record.partition, record.client_id, record.subscription_type));
    await this.kv.purge(subKey(record.subscription_id));
  }
}

/**
 * A watched copy of every subscription, indexed by partition and type (the dispatcher's routing) and by
 * owner (the API's lists). `fresh()`/`freshAsOf(t)` wait until the copy holds every earlier write
 * (BucketView), so an event published or a list read right after a subscription's 200 still finds it.
 */
export class SubscriptionCache {
  private readonly byId = new Map<string, SubscriptionRecord>();
  private readonly byRoute = new Map<string, Map<string, SubscriptionRecord>>();
  /** `idx.<partition>.<client>` → index key → subscription id. */
  private readonly byOwner = new Map<string, Map<string, string>>();
  private readonly view: BucketView;

  constructor(
    private readonly store: SubscriptionStore,
    log: Logger,
    /** How often the bucket's stream is checked for having been made again (followBucket's 30 s when absent). */
    options: { checkEveryMs?: number } = {},
  ) {
    this.view = new BucketView(
      store.kv,
      {
        what: "subscriptions",
        nc: store.nc,
        checkEveryMs: options.checkEveryMs,
        lastMessage: store.nc ? directLastMessage(store.nc, store.kv) : undefined,
        apply: (entry) => {
          if (entry.key.startsWith("sub.")) this.apply(entry);
          else if (entry.key.startsWith("idx.")) this.applyIndex(entry);
        },
        reset: () => {
          this.byId.clear();
          this.byRoute.clear();
          this.byOwner.clear();
        },
        // The bucket's last message may be one no watch delivers (removed from the stream); a write of our own is one
        // the watch must deliver, and it lies past it.
        barrier: () => store.kv.put(SYNC_KEY, encodeJson({ at: new Date().toISOString() })),
      },
      log,
    );
  }

  start(): Promise<void> {
    return this.view.start();
  }

  stop(): Promise<void> {
    return this.view.stop();
  }

  /** Idempotent: the key's subscription becomes the entry's (none for a delete or an unreadable value). */
  private apply(entry: KvEntry): void {
    const id = entry.key.slice(4);
    const old = this.byId.get(id);
    if (old) this.byRoute.get(route(old.partition, old.subscription_type))?.delete(id);
    this.byId.delete(id);
    if (entry.operation !== "PUT" || entry.length === 0) return;
    const record = entry.json<SubscriptionRecord>();
    if (typeof record?.partition !== "string" || typeof record.subscription_type !== "string")
      throw new Error(`${entry.key} holds no subscription record`);
    this.byId.set(id, record);
    let group = this.byRoute.get(route(record.partition, record.subscription_type));
    if (!group) this.byRoute.set(route(record.partition, record.subscription_type), (group = new Map()));
    group.set(id, record);
  }

  /** An index key (`idx.<partition>.<client>.<type>`): lists go by the index, as the one-per-type rule does. */
  private applyIndex(entry: KvEntry): void {
    const ownerKey = entry.key.slice(0, entry.key.lastIndexOf("."));
    let owned = this.byOwner.get(ownerKey);
    if (entry.operation !== "PUT" || entry.length === 0) {
      owned?.delete(entry.key);
      if (owned?.size === 0) this.byOwner.delete(ownerKey);
      return;
    }
    const id = entry.json<{ subscription_id?: unknown }>()?.subscription_id;
    if (typeof id !== "string") throw new Error(`${entry.key} holds no subscription id`);
    if (!owned) this.byOwner.set(ownerKey, (owned = new Map()));
    owned.set(entry.key, id);
  }

  get(id: string): SubscriptionRecord | undefined {
    return this.byId.get(id);
  }

  /** The record from the cache, else straight from KV (a subscription created a moment ago). */
  async load(id: string): Promise<SubscriptionRecord | undefined> {
    return this.byId.get(id) ?? (await this.store.get(id))?.value;
  }

  subscribersOf(partition: string, type: string): Iterable<SubscriptionRecord> {
    return this.byRoute.get(route(partition, type))?.values() ?? [];
  }

  /** Subscriptions whose deliveries are paused, in every partition. */
  pausedCount(): number {
    let paused = 0;
    for (const record of this.byId.values()) if (record.paused_at) paused++;
    return paused;
  }

  /** A client's subscriptions in one partition; call after fresh() for read-your-writes. */
  ownedBy(partition: string, clientId: string): SubscriptionRecord[] {
    const ids = this.byOwner.get(`idx.${partition}.${clientId}`)?.values() ?? [];
    return [...ids].map((id) => this.byId.get(id)).filter((record): record is SubscriptionRecord => record !== undefined);
  }

  /** Waits until every write acknowledged before the call, in any process, is in the copy. */
  fresh(waitMs?: number): Promise<void> {
    return this.view.fresh(waitMs);
  }

  /** Waits until every write made before `time` (epoch ms, minus a clock margin) is in the copy. */
  freshAsOf(time: number, waitMs?: number): Promise<void> {
    return this.view.freshAsOf(time, waitMs);
  }
}

/** The barrier key: no subscription (`sub.…`) nor index (`idx.…`) key, so every reader skips it. */
const SYNC_KEY = "sync";

const route = (partition: string, type: string) => `${partition}\u0000${type}`;
