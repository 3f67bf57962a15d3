/**
 * Twin-properties logic: validate a whole PUT before touching storage, then write it through the
 * commit protocol of platform/twin-commit.ts (claim the group, write the keys, commit), so a device never
 * sees half of one PUT. No NATS imports: storage comes in as a TwinStores.
 */
import {
  conflict,
  contentTooLarge,
  gatewayTimeout,
  invalidField,
  preconditionFailed,
  reply,
  type EncodedJson,
  type Reply,
} from "../../subjects/index.ts";
import {
  TWIN_REQUEST_MAX_BYTES,
  TWIN_VALUE_MAX_BYTES,
  checkTwinName,
  formatTwinEtag,
  twinBucket,
  twinCommitKey,
  twinKey,
  type TwinAddress,
  type TwinCommit,
  type TwinDeleteRequest,
  type TwinEnsureReply,
  type TwinEnsureRequest,
  type TwinGetReply,
  type TwinGetRequest,
  type TwinPutReply,
  type TwinPutRequest,
} from "../../subjects/twins.ts";
import { parseTwinCommit, type TwinEntry } from "../../platform/twin-commit.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import { requireGroup, type RequestContext } from "../runtime/context.ts";
import type { TwinBucketStore, TwinStores } from "./store.ts";

/** This process as a writer of commit claims, and how it tells whether another writer is gone. */
export type TwinWriter = {
  id: string;
  /** True only when certainly gone (nobody answers for it); false while alive or unknown. */
  isGone(id: string): Promise<boolean>;
};

export type TwinsDeps = {
  stores: TwinStores;
  /** A pending commit older than this is taken over (its writer is presumed dead). */
  leaseMs?: number;
  /** Attempts to claim a group before answering 409. */
  attempts?: number;
  /** Without one, a claim left pending is taken over only after the lease. */
  writer?: TwinWriter;
  /** Pause between attempts to finish this process's own abandoned claim (tests shorten it). */
  repairEveryMs?: number;
  /** The NATS server's largest message (its max_payload): a PUT whose commit record would not fit is 413. */
  maxPayload?: number;
};

export const WRITERS = "twins.writers";
export const READERS = "twins.readers";

const encoder = new TextEncoder();
const byteLength = (value: string) => encoder.encode(value).length;
const DEFAULT_LEASE_MS = 30_000;
/** A claim younger than this is simply waited for: its owner is almost always just busy writing. */
const LIVENESS_CHECK_AFTER_MS = 250;
const DEFAULT_REPAIR_EVERY_MS = 500;

/** Checks a whole PUT: names, duplicates, sizes. Throws the first problem; writes nothing. */
export function validatePut(input: Pick<TwinPutRequest, "group" | "twins">): void {
  checkTwinName(input.group, "/body/group");
  if (input.twins.length === 0) throw invalidField("/body/twins", "must hold at least one property");
  const seen = new Set<string>();
  let total = 0;
  input.twins.forEach((twin, i) => {
    checkTwinName(twin.name, `/body/twins/${i}/name`);
    if (seen.has(twin.name)) throw invalidField(`/body/twins/${i}/name`, `"${twin.name}" appears more than once`);
    seen.add(twin.name);
    const size = byteLength(twin.value);
    if (size > TWIN_VALUE_MAX_BYTES) {
      const pointer = `/body/twins/${i}/value`;
      throw contentTooLarge(`${pointer} is ${size} bytes; a value may hold at most ${TWIN_VALUE_MAX_BYTES}`, [
        { pointer, message: `is ${size} bytes of UTF-8; at most ${TWIN_VALUE_MAX_BYTES}` },
      ]);
    }
    total += size;
  });
  if (total > TWIN_REQUEST_MAX_BYTES)
    throw contentTooLarge(`the values add up to ${total} bytes; one request may hold at most ${TWIN_REQUEST_MAX_BYTES}`);
}

/** The claim a PUT writes before its values: it holds them all, so a recovering writer can finish it. */
function pendingRecord(values: Array<[string, string | null]>, owner: string | undefined, version: number): TwinCommit {
  return {
    state: "pending",
    names: values.map(([n]) => n),
    values: Object.fromEntries(values),
    owner,
    version,
    at: new Date().toISOString(),
  };
}

/** Room for the headers of a compare-and-swap write (expected sequence, message id) beside the record. */
const RECORD_HEADROOM_BYTES = 1024;

/**
 * Checks that the PUT's pending commit record (names and values again, JSON-escaped) fits in one
 * NATS message: the values' limits alone do not ensure it (1000 names of 128 bytes, written twice,
 * beside 1 MiB of values, is over an external server's default 1 MB max_payload) → 413 on /body.
 */
export function checkClaimSize(input: Pick<TwinPutRequest, "twins">, maxPayload: number | undefined, owner?: string): void {
  if (maxPayload === undefined) return;
  const record = pendingRecord(
    input.twins.map((t) => [t.name, t.value]),
    owner,
    Number.MAX_SAFE_INTEGER,
  );
  const size = byteLength(JSON.stringify(record)) + RECORD_HEADROOM_BYTES;
  if (size > maxPayload) {
    throw contentTooLarge(
      `/body: this PUT's commit record (names and values, JSON-escaped) would take ${size} bytes; the NATS server takes at most ${maxPayload} per message (max_payload): send fewer or smaller properties per PUT`,
    );
  }
}

/** The group's commit record; an invalid one (a device may write it) reads as none: see parseTwinCommit. */
function readCommit(entry: TwinEntry | undefined): TwinCommit | undefined {
  return entry?.operation === "PUT" ? parseTwinCommit(entry.value) : undefined;
}

/**
 * What the writers of one TwinsDeps (one writer id) share, all bounded: group locks serializing them (the commit record's
 * CAS covers other processes), and two guesses that save a read, each desired key's last revision (group lock + name) and
 * each group's last commit record (group lock): a stale one's compare-and-swap fails and is retried from a fresh read.
 */
type KnownCommit = { revision: number; commit: TwinCommit };
type WriterState = {
  locks: Map<string, Promise<unknown>>;
  known: BoundedCache<string, number>;
  commits: BoundedCache<string, KnownCommit>;
};
const writerStates = new WeakMap<TwinsDeps, WriterState>();
const REVISION_CACHE_MAX = 100_000;
function writerState(deps: TwinsDeps): WriterState {
  let state = writerStates.get(deps);
  if (!state) {
    const max = REVISION_CACHE_MAX;
    writerStates.set(deps, (state = { locks: new Map(), known: new BoundedCache({ max }), commits: new BoundedCache({ max }) }));
  }
  return state;
}

/** The lock of one group of one twin. */
const groupLock = (twin: TwinAddress, group: string) => `${twin.organization}/${twin.environment}/${twin.twinId}/${group}`;

async function withLock<T>(deps: TwinsDeps, key: string, work: () => Promise<T>): Promise<T> {
  const { locks } = writerState(deps);
  const previous = locks.get(key) ?? Promise.resolve();
  const run = previous.then(work, work);
  const tail = run.catch(() => undefined);
  locks.set(key, tail);
  try {
    return await run;
  } finally {
    if (locks.get(key) === tail) locks.delete(key);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Writes `values` (null = delete) to one group's desired side as one commit; returns each name's revision and the group's
 * version (`ifMatch` → 412 when it moved). Runs under the group's process lock (withLock), so a pending claim of this very
 * process found here is certainly abandoned.
 */
async function commitDesired(
  bucket: TwinBucketStore,
  lock: string,
  group: string,
  values: Array<[string, string | null]>,
  ifMatch: number | undefined,
  deps: TwinsDeps,
  deadline: number | undefined,
): Promise<{ revisions: Map<string, number>; version: number }> {
  const commitKey = twinCommitKey(group);
  const attempts = deps.attempts ?? 50;
  const { commits } = writerState(deps);
  // Owners that answered once: not asked again while this request waits for them.
  const alive = new Set<string>();
  for (let attempt = 0; attempt < attempts; attempt++) {
    // Nobody waits for the answer any more: stop queueing behind the group (the lock is held).
    if (deadline !== undefined && Date.now() > deadline)
      throw gatewayTimeout(`group ${group} stayed claimed by another writer past the request's deadline`);
    // The record this process's last commit left, if any (always committed); else read it.
    const known = commits.get(lock);
    commits.delete(lock);
    const entry = known ? undefined : await bucket.get(commitKey);
    const current = known ? known.commit : readCommit(entry);
    const currentRevision = known ? known.revision : (entry?.revision ?? 0);
    if (current?.state === "pending") {
      if (await isAbandoned(current, deps, alive)) await rollForward(bucket, group, current, currentRevision);
      else await sleep(Math.min(200, 5 * 2 ** Math.min(attempt, 6)));
      continue;
    }
    const before = current?.version ?? 0;
    if (ifMatch !== undefined && ifMatch !== before) {
      // Only what was read is the truth: a remembered version may be stale.
      if (known) continue;
      throw preconditionFailed(`group ${group} is at version ${before}, not ${ifMatch}`);
    }
    const pending = pendingRecord(values, deps.writer?.id, before);
    const claimed = await bucket.swap(commitKey, JSON.stringify(pending), currentRevision);
    if (claimed === "conflict") continue;
    try {
      const written = await writeValues(bucket, lock, group, values, claimed, deps);
      if (written === "conflict") {
        throw conflict(`this write to group ${group} stalled and was finished by another writer; it is safe to repeat`);
      }
      const version = Math.max(before, ...written.values());
      const committed: TwinCommit = { state: "committed", names: pending.names, version, at: new Date().toISOString() };
      // A conflict here: a taker-over already committed these very values.
      const revision = await bucket.swap(commitKey, JSON.stringify(committed), claimed);
      if (revision !== "conflict") commits.set(lock, { revision, commit: committed });
      return { revisions: written, version };
    } catch (error) {
      // Say, NATS went away mid-commit: finish the claim as soon as it can be, so the group is not
      // blocked for the whole lease in the other processes.
      repairLater(bucket, lock, group, deps);
      throw error;
    }
  }
  throw conflict(`group ${group} is being written by another request; try again`);
}

/** A pending claim whose owner will not finish it: this process's own (see commitDesired), a gone one, or one past the lease. */
async function isAbandoned(claim: TwinCommit, deps: TwinsDeps, alive: Set<string>): Promise<boolean> {
  const age = Date.now() - Date.parse(claim.at);
  if (!(age < (deps.leaseMs ?? DEFAULT_LEASE_MS))) return true;
  if (claim.owner === undefined || deps.writer === undefined) return false;
  if (claim.owner === deps.writer.id) return true;
  if (age < LIVENESS_CHECK_AFTER_MS || alive.has(claim.owner)) return false;
  if (await deps.writer.isGone(claim.owner)) return true;
  alive.add(claim.owner);
  return false;
}

/** Finishes this process's abandoned claim on a group in the background, until done or the lease runs out. */
function repairLater(bucket: TwinBucketStore, lock: string, group: string, deps: TwinsDeps): void {
  if (deps.writer === undefined) return;
  const every = deps.repairEveryMs ?? DEFAULT_REPAIR_EVERY_MS;
  const tries = Math.ceil((deps.leaseMs ?? DEFAULT_LEASE_MS) / every);
  void (async () => {
    for (let i = 0; i < tries; i++) {
      await sleep(every);
      const done = await withLock(deps, lock, async () => {
        const entry = await bucket.get(twinCommitKey(group));
        const claim = readCommit(entry);
        if (claim?.state !== "pending" || claim.owner !== deps.writer!.id) return true;
        await rollForward(bucket, group, claim, entry!.revision);
        return true;
      }).catch(() => false);
      if (done) return;
    }
  })();
}

/**
 * The owner's writes of its claim (at revision `claim`), each a compare-and-swap from the key's revision before the claim,
 * so a stalled owner's write after a roll-forward fails rather than overwrite a later commit. That revision is guessed,
 * re-read on a miss; a key newer than the claim means it was taken over: "conflict" (docs/twins.md).
 */
async function writeValues(
  bucket: TwinBucketStore,
  lock: string,
  group: string,
  values: Array<[string, string | null]>,
  claim: number,
  deps: TwinsDeps,
): Promise<Map<string, number> | "conflict"> {
  const { known } = writerState(deps);
  const write = async (name: string, value: string | null): Promise<number | "conflict"> => {
    const key = twinKey(group, "desired", name);
    let cached = known.get(`${lock}/${name}`);
    let expected = cached ?? (await bucket.get(key))?.revision ?? 0;
    for (;;) {
      if (expected > claim) {
        // A remembered revision above the claim is stale: the bucket was deleted and made again,
        // and its revisions started over. Only a read tells.
        if (cached !== undefined) {
          cached = undefined;
          expected = (await bucket.get(key))?.revision ?? 0;
          continue;
        }
        // Read newer than the claim: written for it by somebody else (after a takeover).
        return "conflict";
      }
      const written = await bucket.swap(key, value, expected);
      if (written !== "conflict") return written;
      cached = undefined;
      expected = (await bucket.get(key))?.revision ?? 0;
    }
  };
  const written = await Promise.all(values.map(async ([name, value]) => [name, await write(name, value)] as const));
  if (written.some(([, revision]) => revision === "conflict")) return "conflict";
  for (const [name, revision] of written) known.set(`${lock}/${name}`, revision as number);
  return new Map(written as Array<readonly [string, number]>);
}

/**
 * Writes a claim's values and commits it. Only the claim's writers touch its keys while it is
 * pending, so a key with a revision above the claim's was already written for it (by its owner) and
 * is kept; the others are written by compare-and-swap, so a racing owner and this never both write.
 */
async function rollForward(bucket: TwinBucketStore, group: string, claim: TwinCommit, revision: number): Promise<void> {
  const writeOnce = async (key: string, value: string | null): Promise<number> => {
    const current = (await bucket.get(key))?.revision ?? 0;
    if (current > revision) return current;
    const written = await bucket.swap(key, value, current);
    return written === "conflict" ? writeOnce(key, value) : written;
  };
  const revisions = await Promise.all(
    Object.entries(claim.values ?? {}).map(([name, value]) => writeOnce(twinKey(group, "desired", name), value)),
  );
  const committed: TwinCommit = {
    state: "committed",
    names: claim.names,
    version: Math.max(claim.version, ...revisions),
    at: new Date().toISOString(),
  };
  await bucket.swap(twinCommitKey(group), JSON.stringify(committed), revision);
}

export async function putTwins(input: TwinPutRequest, ctx: RequestContext, deps: TwinsDeps): Promise<Reply<TwinPutReply>> {
  requireGroup(ctx, WRITERS);
  validatePut(input);
  checkClaimSize(input, deps.maxPayload, deps.writer?.id);
  // A twin never written is at version 0: a PUT expecting another version is 412 before any bucket is made.
  const bucket = await deps.stores.open(input, !input.ifMatch);
  if (!bucket) throw preconditionFailed(`group ${input.group} is at version 0, not ${input.ifMatch}`);
  const lock = groupLock(input, input.group);
  const { revisions, version } = await withLock(deps, lock, () =>
    commitDesired(
      bucket,
      lock,
      input.group,
      input.twins.map((t) => [t.name, t.value]),
      input.ifMatch,
      deps,
      ctx.deadline,
    ),
  );
  const body: TwinPutReply = {
    group: input.group,
    twins: input.twins.map((t) => ({ name: t.name, value: t.value, version: revisions.get(t.name)! })),
  };
  return reply(body, 200, { ETag: formatTwinEtag(version) });
}

export async function getTwins(
  input: TwinGetRequest,
  ctx: RequestContext,
  deps: TwinsDeps,
): Promise<Reply<TwinGetReply | EncodedJson<TwinGetReply>>> {
  requireGroup(ctx, READERS, WRITERS);
  if (input.group !== undefined) checkTwinName(input.group, "/query/group");
  let state = deps.stores.peekState(input);
  if (!state) {
    const bucket = await deps.stores.open(input, false);
    if (!bucket) return reply({ desired: {}, reported: {} }, 200, input.group !== undefined ? { ETag: formatTwinEtag(0) } : {});
    state = await bucket.state();
  }
  const { body, headers } = state.answer(input.group);
  return reply(body, 200, headers);
}

/**
 * Makes the twin's bucket if missing, with the deployment's configuration (size cap, replicas, 507 past DERRICK_TWINS_MAX),
 * for the device SDK before it would make it itself. No principal: only clients allowed on derrick's subjects reach it
 * (device users are not), and they may create streams anyway.
 */
export async function ensureTwin(input: TwinEnsureRequest, _ctx: RequestContext, deps: TwinsDeps): Promise<TwinEnsureReply> {
  await deps.stores.open(input, true);
  return { bucket: twinBucket(input) };
}

/** Deletes one property (desired through a commit, reported directly); idempotent → 204. */
export async function deleteTwin(input: TwinDeleteRequest, ctx: RequestContext, deps: TwinsDeps): Promise<Reply<undefined>> {
  requireGroup(ctx, WRITERS);
  checkTwinName(input.group, "/params/group");
  checkTwinName(input.name, "/params/name");
  const bucket = await deps.stores.open(input, false);
  if (!bucket) return reply(undefined, 204);
  const desired = await bucket.get(twinKey(input.group, "desired", input.name));
  if (desired?.operation === "PUT") {
    const lock = groupLock(input, input.group);
    await withLock(deps, lock, () => commitDesired(bucket, lock, input.group, [[input.name, null]], undefined, deps, ctx.deadline));
  }
  const reported = await bucket.get(twinKey(input.group, "reported", input.name));
  if (reported?.operation === "PUT") await bucket.remove(twinKey(input.group, "reported", input.name));
  return reply(undefined, 204);
}
