/**
 * Subscriptions in JetStream KV (bucket `derrick_notifications`):
 *   sub.<subscription_id>                  → SubscriptionRecord
 *   idx.<partition>.<client_id>.<type>     → { subscription_id }   (the one-per-source rule)
 * The index key is created with KV create (compare-and-set), so concurrent first posts of the same
 * type converge on one subscription; records are rewritten with update(revision) loops.
 * SubscriptionCache keeps a watched in-memory copy for the dispatcher and the deliverer.
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import type { Subscription } from "../../subjects/notifications.ts";
import { casPut, encodeJson, isLive, readJson, readKv, readVersioned, type Versioned } from "../runtime/kv.ts";
import { followBucket, type FollowedBucket } from "../runtime/follow.ts";
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
    const options = bucketOptions(policy, { history: 1 });
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
 * A watched copy of every subscription, indexed by partition and type. `freshAsOf(t)` waits until the
 * copy holds every write made before time t (it reads the bucket's last sequence and waits for the
 * watch to pass it), so an event published right after a subscription's 200 still finds it.
 */
export class SubscriptionCache {
  private readonly byId = new Map<string, SubscriptionRecord>();
  private readonly byRoute = new Map<string, Map<string, SubscriptionRecord>>();
  private revision = 0;
  /** The creation time of the bucket the copy follows (a bucket made again has another). */
  private created: string | undefined;
  private waiters: Array<{ revision: number; wake: () => void }> = [];
  private syncedAt = 0;
  private syncing?: { startedAt: number; done: Promise<void> };
  private watch?: FollowedBucket;

  constructor(
    private readonly store: SubscriptionStore,
    private readonly log: Logger,
    /** How often the bucket's stream is checked for having been made again (followBucket's 30 s when absent). */
    private readonly options: { checkEveryMs?: number } = {},
  ) {}

  /**
   * Follows the bucket for as long as the process runs: a watch that ends (nats.js gives up a quiet
   * one, e.g. on a bucket empty at start, after two minutes without JetStream) is re-opened after
   * the last revision it delivered, so `revision` only moves forward and freshAsOf keeps working.
   */
  async start(): Promise<void> {
    // A bucket made again replays from revision 1: the copy starts over too, or subscriptions only
    // the old bucket held would stay, and freshAsOf would compare revisions of two buckets.
    const onRecreated = (created: string) => {
      this.byId.clear();
      this.byRoute.clear();
      this.revision = 0;
      this.created = created;
      this.syncedAt = 0;
    };
    this.created = (await this.store.kv.status()).streamInfo.created;
    this.watch = await followBucket(
      this.store.kv,
      { what: "subscriptions", onRecreated, nc: this.store.nc, ...this.options },
      (entry) => this.see(entry),
      this.log,
    );
    try {
      // The first replay of a large bucket may take a while.
      await this.freshAsOf(Date.now(), 60_000);
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    const stopping = this.watch?.stop();
    for (const w of this.waiters.splice(0)) w.wake();
    await stopping;
  }

  /** One entry of the watch; its revision counts as seen even when the entry cannot be applied (then it throws, to be logged). */
  private see(entry: KvEntry): void {
    try {
      if (entry.key.startsWith("sub.")) this.apply(entry);
    } finally {
      this.revision = Math.max(this.revision, entry.revision);
      if (this.waiters.length) {
        const ready = this.waiters.filter((w) => w.revision <= this.revision);
        this.waiters = this.waiters.filter((w) => w.revision > this.revision);
        for (const w of ready) w.wake();
      }
    }
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
    const key = route(record.partition, record.subscription_type);
    let group = this.byRoute.get(key);
    if (!group) this.byRoute.set(key, (group = new Map()));
    group.set(id, record);
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

  /** Waits until the watch has passed `revision`; rejects after `waitMs` (a watch that stopped must not hang its callers). */
  private reach(revision: number, waitMs: number): Promise<void> {
    // Already there (e.g. a barrier the watch delivered before its write was acknowledged).
    if (this.revision >= revision) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        revision,
        wake: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`the subscriptions watch did not reach revision ${revision} within ${waitMs} ms (at ${this.revision})`));
      }, waitMs);
      this.waiters.push(waiter);
    });
  }

  /** Waits until every write made before `time` (epoch ms, minus a clock margin) is in the copy. */
  async freshAsOf(time: number, waitMs = FRESH_WAIT_MS): Promise<void> {
    const margin = 250;
    if (this.syncedAt - margin >= time) return;
    if (this.syncing && this.syncing.startedAt - margin >= time) return this.syncing.done;
    if (this.syncing) await this.syncing.done.catch(() => undefined);
    if (this.syncedAt - margin >= time) return;
    const startedAt = Date.now();
    const done = (async () => {
      const status = await this.store.kv.status();
      // The copy still holds the old bucket's subscriptions: wait for the watch to start over, else a dispatch would route
      // to subscriptions gone. A missed advisory (nats-server does not always send one) is made up by looking now.
      const until = Date.now() + waitMs;
      if (this.created !== undefined && this.created !== status.streamInfo.created) void this.watch?.recheck();
      while (this.created !== undefined && this.created !== status.streamInfo.created) {
        if (Date.now() > until) throw new Error("the subscriptions bucket was made again and the copy has not started over yet");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const target = status.streamInfo.state.last_seq;
      if (this.revision < target) {
        try {
          await this.reach(target, Math.min(waitMs, BARRIER_AFTER_MS));
        } catch {
          // The bucket's last message may be one no watch delivers (removed from the stream), and
          // waiting for it would fail every round until someone writes. A write of our own is one
          // the watch must deliver, and it lies past the target.
          const barrier = await this.store.kv.put(SYNC_KEY, encodeJson({ at: new Date().toISOString() }));
          await this.reach(barrier, waitMs);
        }
      }
      this.syncedAt = Math.max(this.syncedAt, startedAt);
    })();
    this.syncing = { startedAt, done };
    try {
      await done;
    } finally {
      if (this.syncing?.done === done) this.syncing = undefined;
    }
  }
}

/** How long freshAsOf waits for the watch; a dispatch that fails here is retried (its events are nak'ed). */
const FRESH_WAIT_MS = 5_000;
/** After this long without the bucket's last revision, freshAsOf writes a barrier key and waits for that instead. */
const BARRIER_AFTER_MS = 1_000;
/** The barrier key: no subscription (`sub.…`) nor index (`idx.…`) key, so every reader skips it. */
const SYNC_KEY = "sync";

const route = (partition: string, type: string) => `${partition}\u0000${type}`;
