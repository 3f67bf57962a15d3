/**
 * The `d.<input key>` records of the cache bucket: which results were computed from an input, and
 * which writes of it are under way. Every change is a compare-and-set, so it holds across actor
 * processes (docs/reporting.md#why-writes-are-announced).
 */
import { nuid } from "@nats-io/nats-core";
import type { KV } from "@nats-io/kv";
import { encodeJson, isLive, isWrongRevision } from "../runtime/kv.ts";
import {
  announced,
  type Dependents,
  invalidated,
  isEmpty,
  lostRaceDelayMs,
  registered,
  registrationOpen,
  withdrawn,
} from "./store-rules.ts";

/** Compare-and-set tries on one key before giving up. */
export const CAS_ATTEMPTS = 20;

/**
 * Compare-and-set from exactly `revision` (0: no message under the key). Not KV `create`, which also
 * replaces a delete marker newer than the one read.
 */
export async function putAt(kv: KV, key: string, value: unknown, revision: number): Promise<boolean> {
  try {
    await kv.put(key, value instanceof Uint8Array ? value : encodeJson(value), { previousSeq: revision });
    return true;
  } catch (error) {
    if (isWrongRevision(error)) return false;
    throw error;
  }
}

/** Deletes a live key if it is still at `revision`. */
export async function deleteAt(kv: KV, key: string, revision: number): Promise<boolean> {
  try {
    await kv.delete(key, { previousSeq: revision });
    return true;
  } catch (error) {
    if (isWrongRevision(error)) return false;
    throw error;
  }
}

type Read = { value: Dependents; revision: number; live: boolean };

const dependentsKey = (inputKey: string) => `d.${inputKey}`;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class DependentsLedger {
  constructor(
    private readonly cache: KV,
    /** Where the inputs live (their revisions are read from it). */
    private readonly entities: KV,
    private readonly maxDependents: number,
    private readonly pause: (ms: number) => Promise<void> = sleep,
  ) {}

  /** An input's revision now (0: never written). */
  async inputRevision(inputKey: string): Promise<number> {
    return (await this.entities.get(inputKey))?.revision ?? 0;
  }

  /**
   * Writes an input so that, once this returns, no result computed from its older value is served:
   * announced (and its dependents deleted) first, written by `write` (a compare-and-set from
   * `revision`), withdrawn last. Returns what `write` returned.
   */
  async writeInput(inputKey: string, revision: number, write: () => Promise<boolean>): Promise<boolean> {
    const id = await this.announce(inputKey, revision);
    const written = await write();
    // Housekeeping only, so its failure is not the write's: the input has left `revision` (by this
    // write or another), so the next registration drops the announcement itself.
    await this.withdraw(inputKey, id).catch(() => undefined);
    return written;
  }

  /** Deletes every result listed under these inputs and drops announcements of writes that can no longer land (for repairs). */
  async invalidate(inputKeys: readonly string[]): Promise<void> {
    await Promise.all(
      inputKeys.map(async (inputKey) => {
        const read = await this.read(inputKey);
        if (!read.live) return;
        await this.deleteResults(read.value.keys);
        const revision = read.value.writing?.length ? await this.inputRevision(inputKey) : 0;
        // Forgotten only if nobody registered meanwhile (a newer result must stay findable).
        await this.save(inputKey, invalidated(read.value, revision), read);
      }),
    );
  }

  /**
   * Lists `member` under an input, as its newest registration. False while a write of the input that
   * may still land is announced, or when other registrations keep winning: the result is then not cached.
   */
  async register(inputKey: string, member: string): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await this.read(inputKey);
      if (read.value.writing?.length && !registrationOpen(read.value, await this.inputRevision(inputKey))) return false;
      // Written even when listed already: an eviction or invalidation racing it then loses its
      // compare-and-set, instead of dropping a member whose result is about to be stored.
      const { next, evicted } = registered(read.value, member, this.maxDependents);
      // Deleted while still listed: if the list write then fails, nothing is cached unlisted.
      await this.deleteResults(evicted);
      if (await this.save(inputKey, next, read)) return true;
      await this.afterLostRace(attempt);
    }
    return false;
  }

  /** Announces a write of the input from `revision` and deletes every result listed under it. */
  private async announce(inputKey: string, revision: number): Promise<string> {
    const id = nuid.next();
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await this.read(inputKey);
      if (!(await this.save(inputKey, announced(read.value, { id, revision }), read))) {
        await this.afterLostRace(attempt);
        continue;
      }
      // Deleted while still listed: if this fails, the next write of the input deletes them.
      await this.deleteResults(read.value.keys);
      return id;
    }
    throw new Error(`could not announce a write of ${inputKey}: too many concurrent writers`);
  }

  private async withdraw(inputKey: string, id: string): Promise<void> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
      const read = await this.read(inputKey);
      const next = withdrawn(read.value, id);
      if (next === undefined) return;
      if (await this.save(inputKey, next, read)) return;
      await this.afterLostRace(attempt);
    }
  }

  private async read(inputKey: string): Promise<Read> {
    const entry = await this.cache.get(dependentsKey(inputKey));
    const live = isLive(entry);
    return { value: live ? entry.json<Dependents>() : { keys: [] }, revision: entry?.revision ?? 0, live };
  }

  /** Replaces what `read` saw; false when the key changed since. An empty record is deleted. */
  private save(inputKey: string, value: Dependents, read: Read): Promise<boolean> {
    if (isEmpty(value)) return read.live ? deleteAt(this.cache, dependentsKey(inputKey), read.revision) : Promise.resolve(true);
    return putAt(this.cache, dependentsKey(inputKey), value, read.revision);
  }

  private async deleteResults(keys: readonly string[]): Promise<void> {
    await Promise.all(keys.map((key) => this.cache.delete(key)));
  }

  private afterLostRace(attempt: number): Promise<void> {
    return this.pause(lostRaceDelayMs(attempt));
  }
}
