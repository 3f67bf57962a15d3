/**
 * The reporting store's decisions as pure functions: what an entity's next envelope is, what an index
 * holds after a change, and how an input's `d.` record changes as writes are announced and results
 * registered (docs/reporting.md#why-writes-are-announced).
 */

export type Envelope<T> = { entity: T; version: number; createdAt: string; updatedAt: string };

/** An announced write of an input: its compare-and-set expects the input at `revision`. */
export type Writing = { id: string; revision: number };
/**
 * `d.<input key>`: the results computed from an input, oldest registration first (at most
 * MAX_DEPENDENTS), and the writes of the input in progress.
 */
export type Dependents = { keys: string[]; writing?: Writing[] };

/** The envelope written over `previous` (absent: the first version). */
export function nextEnvelope<T>(previous: Envelope<T> | undefined, entity: T, now: string): Envelope<T> {
  return { entity, version: (previous?.version ?? 0) + 1, createdAt: previous?.createdAt ?? now, updatedAt: now };
}

/** The index's ids, sorted, with `member` present or absent; undefined when it is so already (nothing to write). */
export function indexWith(ids: readonly string[] | undefined, member: string, present: boolean): string[] | undefined {
  const set = new Set(ids ?? []);
  if (set.has(member) === present) return undefined;
  if (present) set.add(member);
  else set.delete(member);
  return [...set].sort();
}

/** The envelope numbered `version` in an entity's history (oldest first); after a delete and re-create, the newest wins. */
export function envelopeOfVersion<T>(history: Iterable<Envelope<T>>, version: number): Envelope<T> | undefined {
  let found: Envelope<T> | undefined;
  for (const envelope of history) if (envelope.version === version) found = envelope;
  return found;
}

/** A write announced from a revision the input has left has landed or never will. */
export const stillPending = (writing: readonly Writing[], inputRevision: number): Writing[] =>
  writing.filter((w) => w.revision >= inputRevision);

/** A `d.` record with nothing listed: kept only for the writes in progress. */
const cleared = (writing: Writing[]): Dependents => ({ keys: [], ...(writing.length ? { writing } : {}) });

/** A record that holds nothing is deleted rather than written. */
export const isEmpty = (dependents: Dependents): boolean => dependents.keys.length === 0 && !dependents.writing?.length;

/** The record once `write` is announced: announcements left behind by writes from older revisions are dropped. */
export function announced(dependents: Dependents, write: Writing): Dependents {
  return { keys: dependents.keys, writing: [...stillPending(dependents.writing ?? [], write.revision), write] };
}

/**
 * The record once the announcement `id` is withdrawn: nothing could register while it stood, so what
 * is listed went with the announcement. Undefined when it is gone already (a reader dropped it and may
 * have registered since: the record is left as it is).
 */
export function withdrawn(dependents: Dependents, id: string): Dependents | undefined {
  const writing = dependents.writing ?? [];
  if (!writing.some((w) => w.id === id)) return undefined;
  return cleared(writing.filter((w) => w.id !== id));
}

/** The record after an invalidation: nothing listed, and only the writes that may still land (at `inputRevision`). */
export function invalidated(dependents: Dependents, inputRevision: number): Dependents {
  return cleared(stillPending(dependents.writing ?? [], inputRevision));
}

/** Whether a result computed now may be registered: not while a write that may still land is announced. */
export const registrationOpen = (dependents: Dependents, inputRevision: number): boolean =>
  stillPending(dependents.writing ?? [], inputRevision).length === 0;

/**
 * The record with `member` as its newest registration (moved there when listed already), bounded by
 * `max`: the oldest are evicted (their results are to be deleted). Announcements left behind go too.
 */
export function registered(dependents: Dependents, member: string, max: number): { next: Dependents; evicted: string[] } {
  const keys = dependents.keys.filter((key) => key !== member);
  const evicted = keys.splice(0, Math.max(0, keys.length + 1 - max));
  return { next: { keys: [...keys, member] }, evicted };
}

/**
 * The pause after losing a compare-and-set on a `d.` key, random and growing with the attempt: every
 * write of an input goes through its `d.` key twice, so concurrent writers would otherwise keep colliding.
 */
export const lostRaceDelayMs = (attempt: number, random: () => number = Math.random): number => random() * Math.min(2 ** attempt, 50);
