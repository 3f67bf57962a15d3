/**
 * Storage of the reporting capability, all in JetStream KV:
 *   KV derrick_assessments
 *     `e.<partition>.<collection>.<id>`        → Envelope {entity, version, createdAt, updatedAt}
 *     `x.<partition>.byprospect.<prospectId>`  → {ids}: prospect analyses of a prospect (license aggregation)
 *     `x.<partition>.byanalysis.<analysisId>`  → {ids}: full cycle analyses of a prospect analysis
 *   KV derrick_assessment_cache
 *     `r.<partition>.<aggregation>.<id>[.<params>]` → a computed aggregation (JSON)
 *     `d.<key of an input>`                          → {keys}: the results computed from that input
 *
 * Caching by input versions: a computation starts from a cache miss, which notes the result key's
 * revision (0, or the delete marker an invalidation left), and reads its inputs through a Tracker,
 * which records the KV revision of every key it read (0 for an absent one). The result is then
 * registered under each input's `d.` key, the input revisions are read again (any moved: the
 * result is dropped), and only then written, on the condition that the result key is still at the
 * revision the miss saw. Every write of an input (entity or index) deletes the results listed
 * under its `d.` key before the write is acknowledged. A writer that lands before the registration
 * is caught by the re-read; one that lands after it deletes the key, so either the conditional
 * write fails or the delete removes what it wrote — before that writer's client hears back. So no
 * read that starts after an acknowledged write is answered from older inputs, a repeated GET costs
 * one KV read, and an upsert invalidates exactly the results that read it.
 * Ids are tokens ([A-Za-z0-9_-]), so every key is a valid KV key.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { casPut, encodeJson, isLive, isWrongRevision, readKv } from "../runtime/kv.ts";
import type { Collection } from "../../subjects/reporting.ts";

export const BUCKETS = { entities: "derrick_assessments", cache: "derrick_assessment_cache" } as const;
/** Earlier revisions of each entity kept by the bucket (KV history, at most 64). */
export const ENTITY_HISTORY = 16;
const CAS_ATTEMPTS = 20;


export type Envelope<T> = { entity: T; version: number; createdAt: string; updatedAt: string };
export type IndexKind = "byprospect" | "byanalysis";

export const entityKey = (partition: string, collection: Collection, id: string) => `e.${partition}.${collection}.${id}`;
export const indexKey = (partition: string, kind: IndexKind, id: string) => `x.${partition}.${kind}.${id}`;
export const resultKey = (partition: string, aggregation: string, id: string, params?: string) => `r.${partition}.${aggregation}.${id}${params ? `.${params}` : ""}`;
const dependentsKey = (inputKey: string) => `d.${inputKey}`;

export type Stores = { entities: KV; cache: KV };

export async function openStores(nc: NatsConnection): Promise<Stores> {
  const kvm = new Kvm(nc);
  const [entities, cache] = await Promise.all([kvm.create(BUCKETS.entities, { history: ENTITY_HISTORY }), kvm.create(BUCKETS.cache, { history: 1 })]);
  return { entities, cache };
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

export function assessmentStore(stores: Stores) {
  const { entities, cache } = stores;

  async function readEntry(key: string): Promise<{ value?: unknown; revision: number }> {
    const entry = await entities.get(key);
    return { value: isLive(entry) ? entry.json<unknown>() : undefined, revision: entry?.revision ?? 0 };
  }


  /** Deletes every result computed from these inputs. */
  async function invalidate(inputKeys: readonly string[]): Promise<void> {
    await Promise.all(
      inputKeys.map(async (inputKey) => {
        const entry = await cache.get(dependentsKey(inputKey));
        if (!isLive(entry)) return;
        const { keys } = entry.json<{ keys: string[] }>();
        await Promise.all(keys.map((key) => cache.delete(key)));
        // Forget them only if nobody registered meanwhile (a newer result must stay findable).
        await cache.delete(dependentsKey(inputKey), { previousSeq: entry.revision }).catch(() => undefined);
      }),
    );
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
    async put<T>(partition: string, collection: Collection, id: string, build: (previous: Envelope<T> | undefined) => T, now: string): Promise<{ stored: Envelope<T>; previous?: Envelope<T> }> {
      const key = entityKey(partition, collection, id);
      for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
        const { value, revision } = await readEntry(key);
        const previous = value as Envelope<T> | undefined;
        const stored: Envelope<T> = { entity: build(previous), version: (previous?.version ?? 0) + 1, createdAt: previous?.createdAt ?? now, updatedAt: now };
        if (await casPut(entities, key, stored, revision, previous !== undefined)) return { stored, ...(previous ? { previous } : {}) };
      }
      throw new Error(`could not write ${key}: too many concurrent writers`);
    },

    /** An earlier (or the current) version of an entity, while the bucket's history still holds it. */
    async version<T>(partition: string, collection: Collection, id: string, version: number): Promise<Envelope<T> | undefined> {
      const history = await readKv(entities, { key: entityKey(partition, collection, id), history: true });
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
      const { value } = await readEntry(key);
      if (value === undefined) return false;
      await entities.delete(key);
      return true;
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
        if (await casPut(entities, key, { ids: [...ids].sort() }, revision, value !== undefined)) return key;
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
     * input changed or the result key was touched (invalidated, or stored by another reader) since.
     */
    async remember(key: string, result: unknown, tracker: Tracker, missRevision: number): Promise<boolean> {
      await Promise.all([...tracker.revisions.keys()].map((inputKey) => register(cache, dependentsKey(inputKey), key)));
      const now = await Promise.all([...tracker.revisions].map(async ([inputKey, revision]) => ((await entities.get(inputKey))?.revision ?? 0) === revision));
      if (!now.every(Boolean)) return false;
      try {
        // Expected last revision 0 = no message at all under the key (nats.js' `create` would also
        // overwrite a delete marker, which is exactly the invalidation this must not overwrite).
        await cache.put(key, encodeJson(result), { previousSeq: missRevision });
        return true;
      } catch (error) {
        if (isWrongRevision(error)) return false;
        throw error;
      }
    },
  };

  async function register(kv: KV, key: string, member: string): Promise<void> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const entry = await kv.get(key);
      const keys = isLive(entry) ? entry.json<{ keys: string[] }>().keys : [];
      if (keys.includes(member)) return;
      if (await casPut(kv, key, { keys: [...keys, member] }, entry?.revision ?? 0, !!entry)) return;
    }
    throw new Error(`could not register ${member} under ${key}: too many concurrent writers`);
  }
}
