/**
 * Storage of the reporting capability in JetStream KV: the entities and their indexes, and the cached
 * aggregations, kept so that no read after an acknowledged write is answered from older inputs while a
 * hit stays one KV read (docs/reporting.md#why-writes-are-announced).
 */
import { PURGED_KEY } from "./result-memory.ts";
import { republishedWrites } from "../../subjects/index.ts";
import { SINGLE_NODE, bucketOptions, streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { encodeJson, isLive, readKv } from "../runtime/kv.ts";
import { guardedKv, recreateOnDeletion, recreatingBucket, unguarded, type Guard } from "../runtime/recreate.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Collection } from "../../subjects/reporting.ts";
import { CAS_ATTEMPTS, DependentsLedger, deleteAt, putAt, sleep } from "./dependents.ts";
import { type Envelope, envelopeOfVersion, indexWith, nextEnvelope } from "./store-rules.ts";
import type { CachedRead, ResultMemory } from "./result-memory.ts";

export type { Envelope };

export const BUCKETS = { entities: "derrick_assessments", cache: "derrick_assessment_cache" } as const;
/** Earlier revisions of each entity kept by the bucket (KV history, at most 64). */
export const ENTITY_HISTORY = 16;
/**
 * Results listed under one input at most: the list is one KV value rewritten whole, and must stay
 * inside the NATS payload limit (docs/reporting.md#dependents-per-input).
 */
export const MAX_DEPENDENTS = 1_000;

export type IndexKind = "byprospect" | "byanalysis";

export const entityKey = (partition: string, collection: Collection, id: string) => `e.${partition}.${collection}.${id}`;
export const indexKey = (partition: string, kind: IndexKind, id: string) => `x.${partition}.${kind}.${id}`;
/**
 * The version of the results' formulas and shape, in every result key: raised by a release that changes
 * what an aggregation answers, as nothing would invalidate the results cached before (docs/reporting.md#storage-layout).
 */
export const RESULTS_FORMAT = 2;
export const resultKey = (partition: string, aggregation: string, id: string, params?: string) =>
  `r${RESULTS_FORMAT}.${partition}.${aggregation}.${id}${params ? `.${params}` : ""}`;
/**
 * `guard`: what reads of `entities` outside its methods (readKv) run under (absent: unguarded); `close`: stops re-making
 * the buckets on deletion advisories; `maxValueBytes`: one KV put's largest value, max_payload less header room (absent: unchecked).
 */
export type Stores = { entities: KV; cache: KV; guard?: Guard; close?: () => void; maxValueBytes?: () => number | undefined };

/** Room left in a KV put for its headers (expected revision, message id). */
const KV_HEADER_ROOM = 4096;

/**
 * The two buckets, each made again when deleted at runtime, as every store of derrick is; the cache is
 * emptied before the entities' bucket is, so nothing computed from entities gone is served.
 */
export async function openStores(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE, log?: Logger): Promise<Stores> {
  const kvm = new Kvm(nc);
  const jsm = await jetstreamManager(nc);
  const options = {
    // Both republished for the result memories (result-memory.ts): the results' writes, and the entities' writes, after
    // which a memory looks at the results' bucket (a purge of it is no write, and takes the results' input lists with it).
    entities: bucketOptions(policy, { history: ENTITY_HISTORY, republish: republishedWrites(BUCKETS.entities) }),
    cache: bucketOptions(policy, { history: 1, republish: republishedWrites(BUCKETS.cache) }),
  };
  // Results computed from entities that went with their bucket must not be served: the cache is
  // emptied before the entities bucket is made again, here too when it went while no actor ran.
  // The purge is no write: a marker written after it tells every process's result memory to forget what it holds.
  const purgeCache = () => jsm.streams.purge(`KV_${BUCKETS.cache}`).catch(() => undefined);
  const markPurged = (kv: KV) => kv.put(PURGED_KEY, encodeJson({ at: new Date().toISOString() })).catch(() => undefined);
  const entitiesWentAway = !(await streamInfoIfAny(jsm, `KV_${BUCKETS.entities}`));
  if (entitiesWentAway) await purgeCache();
  const [entities, cache] = await Promise.all([kvm.create(BUCKETS.entities, options.entities), kvm.create(BUCKETS.cache, options.cache)]);
  if (entitiesWentAway) await markPurged(cache);
  const emptyCache = async () => {
    await purgeCache();
    await markPurged(cache);
  };
  const recovery = {
    entities: recreatingBucket(jsm, kvm, BUCKETS.entities, options.entities, log, { before: emptyCache }),
    cache: recreatingBucket(jsm, kvm, BUCKETS.cache, options.cache, log),
  };
  const advisories = recreateOnDeletion(nc, { [BUCKETS.entities]: recovery.entities, [BUCKETS.cache]: recovery.cache }, log);
  return {
    entities: guardedKv(entities, recovery.entities.guard),
    cache: guardedKv(cache, recovery.cache.guard),
    guard: recovery.entities.guard,
    close: () => advisories.unsubscribe(),
    maxValueBytes: () => (nc.info?.max_payload ? nc.info.max_payload - KV_HEADER_ROOM : undefined),
  };
}

/** Reads inputs and remembers the revision of each key read. */
export class Tracker {
  readonly revisions = new Map<string, number>();
  constructor(private readonly kv: KV) {}

  async get<T>(key: string): Promise<T | undefined> {
    const entry = await this.kv.get(key);
    // A delete leaves a marker with its own revision: a later re-creation still moves it.
    this.revisions.set(key, entry?.revision ?? 0);
    return isLive(entry) ? entry.json<T>() : undefined;
  }
}

/** The reporting capability's storage, as the handlers use it. */
export interface AssessmentStore {
  /** A reader of inputs that remembers their revisions, for remember(). */
  tracker(): Tracker;
  get<T>(partition: string, collection: Collection, id: string): Promise<Envelope<T> | undefined>;
  /**
   * Writes an entity: `build` gets the stored envelope (if any) and returns the new entity; retried
   * when another writer got there first. Returns the new envelope and the previous one.
   */
  put<T>(
    partition: string,
    collection: Collection,
    id: string,
    build: (previous: Envelope<T> | undefined) => T,
    now: string,
  ): Promise<{ stored: Envelope<T>; previous?: Envelope<T> }>;
  /** An earlier (or the current) version of an entity, while the bucket's history still holds it. */
  version<T>(partition: string, collection: Collection, id: string, version: number): Promise<Envelope<T> | undefined>;
  /** False when there was nothing to delete. */
  delete(partition: string, collection: Collection, id: string): Promise<boolean>;
  /** Adds or removes an id in an index; returns the index key when it changed. */
  updateIndex(partition: string, kind: IndexKind, id: string, member: string, present: boolean): Promise<string | undefined>;
  /** Deletes every result listed under these inputs (writes do it themselves; this is for repairs). */
  invalidate(inputKeys: readonly string[]): Promise<void>;
  /** The stored result's JSON bytes as they are (replied unparsed), and the key's revision: a miss passes it to remember(). */
  cached(key: string): Promise<CachedRead>;
  /**
   * How many entity writes this process has heard, when it can vouch that every write acknowledged so far is among them
   * (a result memory hearing the entities' republished writes); undefined otherwise. Unchanged between two moments: no
   * entity write was acknowledged in between.
   */
  entityWritesHeard(): number | undefined;
  /**
   * Stores a result (or its JSON bytes) computed from the tracked inputs after a miss at `missRevision`, unless an input
   * changed, a write of one is under way, the result key was touched since, or the result is larger
   * than one KV value (then it is answered but computed again on the next read). True when stored.
   */
  remember(key: string, result: unknown, tracker: Tracker, missRevision: number): Promise<boolean>;
}

export type StoreOptions = {
  /** Results listed under one input at most (MAX_DEPENDENTS); smaller in tests. */
  maxDependents?: number;
  /** The pause after a lost compare-and-set (a timer by default). */
  pause?: (ms: number) => Promise<void>;
  /** Results held in memory (a started ResultMemory over the same cache bucket); without it every hit reads KV. */
  results?: ResultMemory;
};

export function assessmentStore(stores: Stores, options: StoreOptions = {}): AssessmentStore {
  return new KvAssessmentStore(stores, options);
}

/** Entities are written through the ledger of their dependents; results are registered there before they are stored. */
export class KvAssessmentStore implements AssessmentStore {
  private readonly entities: KV;
  private readonly cache: KV;
  private readonly ledger: DependentsLedger;
  private readonly results: ResultMemory | undefined;

  constructor(
    private readonly stores: Stores,
    options: StoreOptions = {},
  ) {
    this.entities = stores.entities;
    this.cache = stores.cache;
    this.ledger = new DependentsLedger(stores.cache, stores.entities, options.maxDependents ?? MAX_DEPENDENTS, options.pause ?? sleep);
    this.results = options.results;
  }

  tracker(): Tracker {
    return new Tracker(this.entities);
  }

  async get<T>(partition: string, collection: Collection, id: string): Promise<Envelope<T> | undefined> {
    return (await this.readEntry(entityKey(partition, collection, id))).value as Envelope<T> | undefined;
  }

  async put<T>(
    partition: string,
    collection: Collection,
    id: string,
    build: (previous: Envelope<T> | undefined) => T,
    now: string,
  ): Promise<{ stored: Envelope<T>; previous?: Envelope<T> }> {
    const key = entityKey(partition, collection, id);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const { value, revision } = await this.readEntry(key);
      const previous = value as Envelope<T> | undefined;
      const stored = nextEnvelope(previous, build(previous), now);
      if (await this.ledger.writeInput(key, revision, () => putAt(this.entities, key, stored, revision)))
        return { stored, ...(previous ? { previous } : {}) };
    }
    throw new Error(`could not write ${key}: too many concurrent writers`);
  }

  async version<T>(partition: string, collection: Collection, id: string, version: number): Promise<Envelope<T> | undefined> {
    const history = await (this.stores.guard ?? unguarded)(() =>
      readKv(this.entities, { key: entityKey(partition, collection, id), history: true }),
    );
    return envelopeOfVersion(
      history.filter(isLive).map((entry) => entry.json<Envelope<T>>()),
      version,
    );
  }

  async delete(partition: string, collection: Collection, id: string): Promise<boolean> {
    const key = entityKey(partition, collection, id);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const { value, revision } = await this.readEntry(key);
      if (value === undefined) return false;
      if (await this.ledger.writeInput(key, revision, () => deleteAt(this.entities, key, revision))) return true;
    }
    throw new Error(`could not delete ${key}: too many concurrent writers`);
  }

  async updateIndex(partition: string, kind: IndexKind, id: string, member: string, present: boolean): Promise<string | undefined> {
    const key = indexKey(partition, kind, id);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const { value, revision } = await this.readEntry(key);
      const ids = indexWith((value as { ids: string[] } | undefined)?.ids, member, present);
      if (ids === undefined) return undefined;
      if (await this.ledger.writeInput(key, revision, () => putAt(this.entities, key, { ids }, revision))) return key;
    }
    throw new Error(`could not update ${key}: too many concurrent writers`);
  }

  invalidate(inputKeys: readonly string[]): Promise<void> {
    return this.ledger.invalidate(inputKeys);
  }

  cached(key: string): Promise<CachedRead> {
    return this.results ? this.results.read(key, () => this.readCached(key)) : this.readCached(key);
  }

  entityWritesHeard(): number | undefined {
    return this.results?.entityWritesHeard();
  }

  private async readCached(key: string): Promise<CachedRead> {
    const entry = await this.cache.get(key);
    return { value: isLive(entry) ? entry.value : undefined, revision: entry?.revision ?? 0 };
  }

  async remember(key: string, result: unknown, tracker: Tracker, missRevision: number): Promise<boolean> {
    const bytes = result instanceof Uint8Array ? result : encodeJson(result);
    // Its put would fail with max_payload exceeded, and the GET with it (a 16-segment outcome tree is ~28 MB).
    const limit = this.stores.maxValueBytes?.();
    if (limit !== undefined && bytes.length > limit) return false;
    const registered = await Promise.all([...tracker.revisions.keys()].map((inputKey) => this.ledger.register(inputKey, key)));
    if (!registered.every(Boolean)) return false;
    const unchanged = await Promise.all(
      [...tracker.revisions].map(async ([inputKey, revision]) => (await this.ledger.inputRevision(inputKey)) === revision),
    );
    if (!unchanged.every(Boolean)) return false;
    // Expected last revision 0 = no message at all under the key (nats.js' `create` would also
    // overwrite a delete marker, which is exactly the invalidation this must not overwrite).
    return putAt(this.cache, key, bytes, missRevision);
  }

  private async readEntry(key: string): Promise<{ value?: unknown; revision: number }> {
    const entry = await this.entities.get(key);
    return { value: isLive(entry) ? entry.json<unknown>() : undefined, revision: entry?.revision ?? 0 };
  }
}
