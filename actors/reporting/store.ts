/**
 * Storage of the reporting capability, all in JetStream KV:
 *   KV derrick_assessments
 *     `e.<partition>.<collection>.<id>`        → Envelope {entity, version, createdAt, updatedAt}
 *     `x.<partition>.byprospect.<prospectId>`  → {ids}: prospect analyses of a prospect (license aggregation)
 *     `x.<partition>.byanalysis.<analysisId>`  → {ids}: full cycle analyses of a prospect analysis
 *   KV derrick_assessment_cache
 *     `r<format>.<partition>.<aggregation>.<id>[.<params>]` → a computed aggregation (JSON; RESULTS_FORMAT)
 *     `d.<key of an input>`                          → Dependents: the results computed from that
 *                                                      input, and the writes of it in progress
 *
 * Caching by input versions: a computation starts from a cache miss, which notes the result key's
 * revision (0, or the delete marker an invalidation left), and reads its inputs through a Tracker,
 * which records the KV revision of every key it read (0 for an absent one). The result is then
 * registered under each input's `d.` key, the input revisions are read again (any moved: the
 * result is dropped), and only then written, on the condition that the result key is still at the
 * revision the miss saw.
 *
 * Every write of an input (entity or index) is a compare-and-set from the revision it read, and is
 * bracketed in its `d.` key: first the write is announced there (with that revision) and every
 * result listed is deleted, then the input is written, then the announcement is withdrawn. While an
 * announcement stands, registration under the input is refused (the result is answered, not
 * cached). A registration before the announcement is listed, so its result is deleted (or its
 * conditional write fails on the delete marker); one after it was withdrawn re-reads the input's
 * revision, sees the write, and drops its result. So no read that starts after an acknowledged
 * write is answered from older inputs, a repeated GET costs one KV read, and an upsert invalidates
 * exactly the results that read it.
 *
 * Why announce before writing, rather than invalidate after: a writer that failed (KV timeout,
 * process killed) after its write and before invalidating left results from the old input cached
 * with nothing to delete them; a DELETE retried by its client answered 404 and never invalidated
 * (found in review). Here every result listed is gone before the input changes, and a writer that
 * dies after its write leaves an announcement that can no longer matter: the write it names expects
 * a revision the input has left, so it has landed or never will, and the next registration drops
 * it. One that dies before its write leaves its announcement standing until the input is written
 * again (its client's retry does that): the results that read the input are computed on every GET
 * meanwhile, never served stale. All of it is compare-and-set on shared KV keys, so it holds across
 * actor processes; and nothing is added to a hit, which stays one KV read.
 * Ids are tokens ([A-Za-z0-9_-]), so every key is a valid KV key.
 */
import { SINGLE_NODE, bucketOptions, streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import { nuid, type NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { encodeJson, isLive, isWrongRevision, readKv } from "../runtime/kv.ts";
import { guardedKv, recreateOnDeletion, recreatingBucket, unguarded, type Guard } from "../runtime/recreate.ts";
import type { Logger } from "../../platform/logger.ts";
import type { Collection } from "../../subjects/reporting.ts";

export const BUCKETS = { entities: "derrick_assessments", cache: "derrick_assessment_cache" } as const;
/** Earlier revisions of each entity kept by the bucket (KV history, at most 64). */
export const ENTITY_HISTORY = 16;
/**
 * Results listed under one input at most. The list is one KV value rewritten whole on each
 * registration: unbounded, it grew past the NATS payload limit (then every cold read of that input
 * failed) and made each write of the input delete without end. Beyond the bound the oldest
 * registrations are evicted and their results deleted. 1,000 keys of at most ~290 bytes (128-char
 * partition and id) stay under 300 KB, well inside the default 1 MB payload.
 */
export const MAX_DEPENDENTS = 1_000;
const CAS_ATTEMPTS = 20;

export type Envelope<T> = { entity: T; version: number; createdAt: string; updatedAt: string };
export type IndexKind = "byprospect" | "byanalysis";

export const entityKey = (partition: string, collection: Collection, id: string) => `e.${partition}.${collection}.${id}`;
export const indexKey = (partition: string, kind: IndexKind, id: string) => `x.${partition}.${kind}.${id}`;
/**
 * The version of the results' formulas and shape, in every result key: a release that changes
 * what an aggregation answers raises it, so results cached by the release before are not served
 * (their inputs did not change, nothing would invalidate them). 2: the 2026-11-24 reporting review
 * (success-case sampling, IRR of all-zero flows, folded outcome trees, …). Older entries stay
 * until their inputs' next write deletes them, or a purge of the cache bucket.
 */
export const RESULTS_FORMAT = 2;
export const resultKey = (partition: string, aggregation: string, id: string, params?: string) =>
  `r${RESULTS_FORMAT}.${partition}.${aggregation}.${id}${params ? `.${params}` : ""}`;
const dependentsKey = (inputKey: string) => `d.${inputKey}`;

/**
 * `d.<input key>`: the results computed from an input, oldest registration first (at most
 * MAX_DEPENDENTS), and the writes of the input in progress.
 */
type Dependents = { keys: string[]; writing?: Writing[] };
/** An announced write of an input: its compare-and-set expects the input at `revision`. */
type Writing = { id: string; revision: number };
type Read<T> = { value: T; revision: number; live: boolean };

/**
 * A short random pause after losing a compare-and-set on a `d.` key, growing with the attempt: every
 * write of an input goes through its `d.` key twice, so concurrent writers of one entity would
 * otherwise keep colliding there until they ran out of attempts.
 */
const afterLostRace = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(2 ** attempt, 50)));

/** A write announced from a revision the input has left has landed or never will. */
const stillPending = (writing: readonly Writing[], inputRevision: number) => writing.filter((w) => w.revision >= inputRevision);

/**
 * Compare-and-set from exactly `revision` (0: no message under the key). Not KV `create`, which also
 * replaces a delete marker newer than the one read.
 */
async function putAt(kv: KV, key: string, value: unknown, revision: number): Promise<boolean> {
  try {
    await kv.put(key, value instanceof Uint8Array ? value : encodeJson(value), { previousSeq: revision });
    return true;
  } catch (error) {
    if (isWrongRevision(error)) return false;
    throw error;
  }
}

/** Deletes a live key if it is still at `revision`. */
async function deleteAt(kv: KV, key: string, revision: number): Promise<boolean> {
  try {
    await kv.delete(key, { previousSeq: revision });
    return true;
  } catch (error) {
    if (isWrongRevision(error)) return false;
    throw error;
  }
}

/**
 * `guard`: what reads of `entities` outside its methods (readKv) run under, absent → unguarded;
 * `close`: stops making the buckets again on deletion advisories; `maxValueBytes`: the largest
 * value one KV put can carry (the server's max_payload less room for the headers), absent →
 * unchecked.
 */
export type Stores = { entities: KV; cache: KV; guard?: Guard; close?: () => void; maxValueBytes?: () => number | undefined };

/** Room left in a KV put for its headers (expected revision, message id). */
const KV_HEADER_ROOM = 4096;

/**
 * The two buckets, each made again when deleted at runtime (an operator, a tool, a lost store) as
 * every store of derrick is: at the deletion advisory, or on the next use when that was missed.
 * Entities deleted are gone (404s, then new writes land), with every result cached from them; a
 * deleted cache starts empty (results are computed again).
 */
export async function openStores(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE, log?: Logger): Promise<Stores> {
  const kvm = new Kvm(nc);
  const jsm = await jetstreamManager(nc);
  const options = { entities: bucketOptions(policy, { history: ENTITY_HISTORY }), cache: bucketOptions(policy, { history: 1 }) };
  // Results computed from entities that went with their bucket must not be served: the cache is
  // emptied before the entities bucket is made again, here too when it went while no actor ran.
  const emptyCache = () => jsm.streams.purge(`KV_${BUCKETS.cache}`).catch(() => undefined);
  if (!(await streamInfoIfAny(jsm, `KV_${BUCKETS.entities}`))) await emptyCache();
  const [entities, cache] = await Promise.all([kvm.create(BUCKETS.entities, options.entities), kvm.create(BUCKETS.cache, options.cache)]);
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

export type AssessmentStore = ReturnType<typeof assessmentStore>;

export type StoreOptions = {
  /** Results listed under one input at most (MAX_DEPENDENTS); smaller in tests. */
  maxDependents?: number;
};

export function assessmentStore(stores: Stores, options: StoreOptions = {}) {
  const { entities, cache } = stores;
  const maxDependents = options.maxDependents ?? MAX_DEPENDENTS;

  async function readEntry(key: string): Promise<{ value?: unknown; revision: number }> {
    const entry = await entities.get(key);
    return { value: isLive(entry) ? entry.json<unknown>() : undefined, revision: entry?.revision ?? 0 };
  }

  const inputRevision = async (inputKey: string) => (await entities.get(inputKey))?.revision ?? 0;

  async function readDependents(inputKey: string): Promise<Read<Dependents>> {
    const entry = await cache.get(dependentsKey(inputKey));
    const live = isLive(entry);
    return { value: live ? entry.json<Dependents>() : { keys: [] }, revision: entry?.revision ?? 0, live };
  }

  /** Replaces what `read` saw; false when the key changed since. An empty record is deleted. */
  function saveDependents(inputKey: string, value: Dependents, read: Read<Dependents>): Promise<boolean> {
    if (value.keys.length === 0 && !value.writing?.length)
      return read.live ? deleteAt(cache, dependentsKey(inputKey), read.revision) : Promise.resolve(true);
    return putAt(cache, dependentsKey(inputKey), value, read.revision);
  }

  /** Announces a write of the input from `revision` and deletes every result listed under it. */
  async function announceWrite(inputKey: string, revision: number): Promise<string> {
    const id = nuid.next();
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await readDependents(inputKey);
      const writing = [...stillPending(read.value.writing ?? [], revision), { id, revision }];
      if (!(await saveDependents(inputKey, { keys: read.value.keys, writing }, read))) {
        await afterLostRace(attempt);
        continue;
      }
      // Deleted while still listed: if this fails, the next write of the input deletes them.
      await Promise.all(read.value.keys.map((key) => cache.delete(key)));
      return id;
    }
    throw new Error(`could not announce a write of ${inputKey}: too many concurrent writers`);
  }

  /**
   * Withdraws an announcement after the write. Nothing was registered while it stood, so what is
   * listed is what the announcement deleted. If it is gone already, a reader dropped it (the input
   * had moved past it) and may have registered since: the list is left as it is.
   */
  async function withdrawWrite(inputKey: string, id: string): Promise<void> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await readDependents(inputKey);
      const writing = read.value.writing ?? [];
      if (!writing.some((w) => w.id === id)) return;
      const rest = writing.filter((w) => w.id !== id);
      if (await saveDependents(inputKey, { keys: [], ...(rest.length ? { writing: rest } : {}) }, read)) return;
      await afterLostRace(attempt);
    }
  }

  /**
   * Writes an input so that, once this returns, no result computed from its older value is served:
   * announced (and its dependents deleted) first, written by `write` (a compare-and-set from
   * `revision`), withdrawn last. Returns what `write` returned.
   */
  async function writeInput(inputKey: string, revision: number, write: () => Promise<boolean>): Promise<boolean> {
    const id = await announceWrite(inputKey, revision);
    const written = await write();
    // Housekeeping only, so its failure is not the write's: the write expected `revision`, which the
    // input has now left (by this write or another), so the next registration drops the
    // announcement itself. A write that threw leaves it standing (it may still land).
    await withdrawWrite(inputKey, id).catch(() => undefined);
    return written;
  }

  /**
   * Deletes every result listed under these inputs and drops announcements of writes that can no
   * longer land. Writes do this themselves before they write; this is for repairs (a DELETE that
   * finds the entity gone, results left by an older version).
   */
  async function invalidate(inputKeys: readonly string[]): Promise<void> {
    await Promise.all(
      inputKeys.map(async (inputKey) => {
        const read = await readDependents(inputKey);
        if (!read.live) return;
        await Promise.all(read.value.keys.map((key) => cache.delete(key)));
        let writing = read.value.writing ?? [];
        if (writing.length) writing = stillPending(writing, await inputRevision(inputKey));
        // Forgotten only if nobody registered meanwhile (a newer result must stay findable).
        await saveDependents(inputKey, { keys: [], ...(writing.length ? { writing } : {}) }, read);
      }),
    );
  }

  /**
   * Lists `member` under an input, as its newest registration. False while a write of the input is
   * announced that may still land, or when other registrations keep winning the race: the caller
   * then does not cache its result.
   *
   * Written even when the member is listed already: whoever replaces the list in between (an
   * eviction, an invalidation) then loses its compare-and-set and reads again, instead of dropping
   * a member whose result is about to be stored — which would leave it cached but unlisted, beyond
   * the reach of the input's next write.
   */
  async function register(inputKey: string, member: string): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await readDependents(inputKey);
      if (read.value.writing?.length && stillPending(read.value.writing, await inputRevision(inputKey)).length) return false;
      // Announcements left behind (their writes landed or never will) are dropped with this write.
      const keys = read.value.keys.filter((key) => key !== member);
      const evicted = keys.splice(0, Math.max(0, keys.length + 1 - maxDependents));
      // Deleted while still listed: if the list write then fails, nothing is cached unlisted.
      await Promise.all(evicted.map((key) => cache.delete(key)));
      if (await saveDependents(inputKey, { keys: [...keys, member] }, read)) return true;
      await afterLostRace(attempt);
    }
    return false;
  }

  return {
    tracker: () => new Tracker(entities),

    async get<T>(partition: string, collection: Collection, id: string): Promise<Envelope<T> | undefined> {
      return (await readEntry(entityKey(partition, collection, id))).value as Envelope<T> | undefined;
    },

    /**
     * Writes an entity: `build` gets the stored envelope (if any) and returns the new entity;
     * retried when another writer got there first. Returns the new envelope and the previous one.
     */
    async put<T>(
      partition: string,
      collection: Collection,
      id: string,
      build: (previous: Envelope<T> | undefined) => T,
      now: string,
    ): Promise<{ stored: Envelope<T>; previous?: Envelope<T> }> {
      const key = entityKey(partition, collection, id);
      for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        const { value, revision } = await readEntry(key);
        const previous = value as Envelope<T> | undefined;
        const stored: Envelope<T> = {
          entity: build(previous),
          version: (previous?.version ?? 0) + 1,
          createdAt: previous?.createdAt ?? now,
          updatedAt: now,
        };
        if (await writeInput(key, revision, () => putAt(entities, key, stored, revision)))
          return { stored, ...(previous ? { previous } : {}) };
      }
      throw new Error(`could not write ${key}: too many concurrent writers`);
    },

    /** An earlier (or the current) version of an entity, while the bucket's history still holds it. */
    async version<T>(partition: string, collection: Collection, id: string, version: number): Promise<Envelope<T> | undefined> {
      const history = await (stores.guard ?? unguarded)(() =>
        readKv(entities, { key: entityKey(partition, collection, id), history: true }),
      );
      let found: Envelope<T> | undefined;
      for (const entry of history) {
        if (!isLive(entry)) continue;
        const envelope = entry.json<Envelope<T>>();
        // After a delete and re-create, the newest envelope with that number wins.
        if (envelope.version === version) found = envelope;
      }
      return found;
    },

    async delete(partition: string, collection: Collection, id: string): Promise<boolean> {
      const key = entityKey(partition, collection, id);
      for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        const { value, revision } = await readEntry(key);
        if (value === undefined) return false;
        if (await writeInput(key, revision, () => deleteAt(entities, key, revision))) return true;
      }
      throw new Error(`could not delete ${key}: too many concurrent writers`);
    },

    /** Adds or removes an id in an index; returns the index key when it changed. */
    async updateIndex(partition: string, kind: IndexKind, id: string, member: string, present: boolean): Promise<string | undefined> {
      const key = indexKey(partition, kind, id);
      for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        const { value, revision } = await readEntry(key);
        const ids = new Set((value as { ids: string[] } | undefined)?.ids ?? []);
        if (ids.has(member) === present) return undefined;
        if (present) ids.add(member);
        else ids.delete(member);
        if (await writeInput(key, revision, () => putAt(entities, key, { ids: [...ids].sort() }, revision))) return key;
      }
      throw new Error(`could not update ${key}: too many concurrent writers`);
    },

    invalidate,

    /**
     * The stored result's JSON bytes, as they are (the actor replies with them unparsed), and the
     * key's revision: a miss passes it to `remember`.
     */
    async cached(key: string): Promise<{ value: Uint8Array | undefined; revision: number }> {
      const entry = await cache.get(key);
      return { value: isLive(entry) ? entry.value : undefined, revision: entry?.revision ?? 0 };
    },

    /**
     * Stores a result computed from the tracked inputs after a miss at `missRevision`, unless an
     * input changed, a write of one is under way, or the result key was touched (invalidated, or
     * stored by another reader) since. A result larger than one KV value can be is not stored (it
     * is answered, in chunks, and computed again on the next read): its put failed with
     * max_payload exceeded, and the GET with it (a 16-segment outcome tree is ~28 MB).
     */
    async remember(key: string, result: unknown, tracker: Tracker, missRevision: number): Promise<boolean> {
      const bytes = encodeJson(result);
      const limit = stores.maxValueBytes?.();
      if (limit !== undefined && bytes.length > limit) return false;
      const registered = await Promise.all([...tracker.revisions.keys()].map((inputKey) => register(inputKey, key)));
      if (!registered.every(Boolean)) return false;
      const now = await Promise.all(
        [...tracker.revisions].map(async ([inputKey, revision]) => (await inputRevision(inputKey)) === revision),
      );
      if (!now.every(Boolean)) return false;
      // Expected last revision 0 = no message at all under the key (nats.js' `create` would also
      // overwrite a delete marker, which is exactly the invalidation this must not overwrite).
      return putAt(cache, key, bytes, missRevision);
    },
  };
}
