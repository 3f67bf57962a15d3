/**
 * Twin-properties logic: validate a whole PUT before touching storage, then write it through the
 * commit protocol of subjects/twins.ts (claim the group, write the keys, commit), so a device never
 * sees half of one PUT. No NATS imports: storage comes in as a TwinStores.
 */
import { conflict, contentTooLarge, invalidField, preconditionFailed, reply, type Reply } from "../../subjects/index.ts";
import {
  TWIN_REQUEST_MAX_BYTES,
  TWIN_VALUE_MAX_BYTES,
  TwinCommitGate,
  checkTwinName,
  formatTwinEtag,
  parseTwinKey,
  twinCommitKey,
  twinKey,
  type TwinAddress,
  type TwinCommit,
  type TwinDeleteRequest,
  type TwinEntry,
  type TwinGetReply,
  type TwinGetRequest,
  type TwinPutReply,
  type TwinPutRequest,
  type TwinValue,
} from "../../subjects/twins.ts";
import { requireGroup, type RequestContext } from "../runtime/context.ts";

/** One twin's bucket. */
export interface TwinBucketStore {
  get(key: string): Promise<TwinEntry | undefined>;
  /** Every stored revision of every key, in revision order. */
  entries(): Promise<TwinEntry[]>;
  put(key: string, value: string): Promise<number>;
  /** Deletes (a marker); returns the marker's revision. */
  remove(key: string): Promise<number>;
  /** Compare-and-swap; expected 0 = the key must not exist (or be deleted). */
  swap(key: string, value: string, expectedRevision: number): Promise<number | "conflict">;
}

export interface TwinStores {
  /** The twin's bucket; created when `create`, else undefined when it does not exist. */
  open(address: TwinAddress, create: boolean): Promise<TwinBucketStore | undefined>;
}

export type TwinsDeps = {
  stores: TwinStores;
  /** A pending commit older than this is taken over (its writer is presumed dead). */
  leaseMs?: number;
  /** Attempts to claim a group before answering 409. */
  attempts?: number;
};

export const WRITERS = "twins.writers";
export const READERS = "twins.readers";

const encoder = new TextEncoder();
const byteLength = (value: string) => encoder.encode(value).length;
const DEFAULT_LEASE_MS = 30_000;

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
    if (size > TWIN_VALUE_MAX_BYTES) throw contentTooLarge(`/body/twins/${i}/value is ${size} bytes; a value may hold at most ${TWIN_VALUE_MAX_BYTES}`);
    total += size;
  });
  if (total > TWIN_REQUEST_MAX_BYTES) throw contentTooLarge(`the values add up to ${total} bytes; one request may hold at most ${TWIN_REQUEST_MAX_BYTES}`);
}

function readCommit(entry: TwinEntry | undefined): TwinCommit | undefined {
  if (!entry || entry.operation !== "PUT") return undefined;
  try {
    return JSON.parse(entry.value) as TwinCommit;
  } catch {
    return undefined;
  }
}

// Serializes writers of one group inside this process; the commit record's CAS covers the others.
const locks = new Map<string, Promise<unknown>>();
async function withLock<T>(key: string, work: () => Promise<T>): Promise<T> {
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
 * Writes `values` (null = delete) to the desired side of one group as one commit. Returns each
 * name's new revision and the group's new version. `ifMatch` → 412 when the version moved.
 */
async function commitDesired(
  bucket: TwinBucketStore,
  group: string,
  values: Array<[string, string | null]>,
  ifMatch: number | undefined,
  deps: TwinsDeps,
): Promise<{ revisions: Map<string, number>; version: number }> {
  const commitKey = twinCommitKey(group);
  const leaseMs = deps.leaseMs ?? DEFAULT_LEASE_MS;
  const attempts = deps.attempts ?? 50;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const entry = await bucket.get(commitKey);
    const current = readCommit(entry);
    if (current?.state === "pending") {
      if (Date.now() - Date.parse(current.at) < leaseMs) {
        await sleep(Math.min(200, 5 * 2 ** Math.min(attempt, 6)));
        continue;
      }
      // The writer died mid-commit: finish its work so its half-write never stays hidden or partial.
      await rollForward(bucket, group, current, entry!.revision);
      continue;
    }
    const before = current?.version ?? 0;
    if (ifMatch !== undefined && ifMatch !== before) {
      throw preconditionFailed(`group ${group} is at version ${before}, not ${ifMatch}`);
    }
    const pending: TwinCommit = { state: "pending", names: values.map(([n]) => n), values: Object.fromEntries(values), version: before, at: new Date().toISOString() };
    const claimed = await bucket.swap(commitKey, JSON.stringify(pending), entry?.revision ?? 0);
    if (claimed === "conflict") continue;
    const revisions = await writeValues(bucket, group, values);
    const version = Math.max(before, ...revisions.values());
    const committed: TwinCommit = { state: "committed", names: pending.names, version, at: new Date().toISOString() };
    await bucket.swap(commitKey, JSON.stringify(committed), claimed);
    return { revisions, version };
  }
  throw conflict(`group ${group} is being written by another request; try again`);
}

async function writeValues(bucket: TwinBucketStore, group: string, values: Array<[string, string | null]>): Promise<Map<string, number>> {
  const written = await Promise.all(
    values.map(async ([name, value]) => [name, value === null ? await bucket.remove(twinKey(group, "desired", name)) : await bucket.put(twinKey(group, "desired", name), value)] as const),
  );
  return new Map(written);
}

async function rollForward(bucket: TwinBucketStore, group: string, record: TwinCommit, revision: number): Promise<void> {
  const values = Object.entries(record.values ?? {});
  const revisions = await writeValues(bucket, group, values);
  const committed: TwinCommit = { state: "committed", names: record.names, version: Math.max(record.version, ...revisions.values()), at: new Date().toISOString() };
  await bucket.swap(twinCommitKey(group), JSON.stringify(committed), revision);
}

export async function putTwins(input: TwinPutRequest, ctx: RequestContext, deps: TwinsDeps): Promise<Reply<TwinPutReply>> {
  requireGroup(ctx, WRITERS);
  validatePut(input);
  const bucket = (await deps.stores.open(input, true))!;
  const { revisions, version } = await withLock(`${input.organization}/${input.environment}/${input.twinId}/${input.group}`, () =>
    commitDesired(
      bucket,
      input.group,
      input.twins.map((t) => [t.name, t.value]),
      input.ifMatch,
      deps,
    ),
  );
  const body: TwinPutReply = { group: input.group, twins: input.twins.map((t) => ({ name: t.name, value: t.value, version: revisions.get(t.name)! })) };
  return reply(body, 200, { ETag: formatTwinEtag(version) });
}

/** The visible state of a twin: commit protocol applied, deletes dropped, versions and times kept. */
export function visibleState(entries: TwinEntry[], group?: string): TwinGetReply {
  const gate = new TwinCommitGate();
  const latest = new Map<string, TwinEntry>();
  for (const entry of entries.sort((a, b) => a.revision - b.revision)) {
    for (const visible of gate.feed(entry)) latest.set(visible.key, visible);
  }
  const out: TwinGetReply = { desired: {}, reported: {} };
  for (const entry of latest.values()) {
    const parsed = parseTwinKey(entry.key);
    if (parsed?.kind !== "property" || entry.operation !== "PUT") continue;
    if (group !== undefined && parsed.group !== group) continue;
    const side = (out[parsed.side][parsed.group] ??= {});
    const value: TwinValue = { value: entry.value, version: entry.revision, updated_at: entry.created.toISOString() };
    side[parsed.name] = value;
  }
  return out;
}

export async function getTwins(input: TwinGetRequest, ctx: RequestContext, deps: TwinsDeps): Promise<Reply<TwinGetReply>> {
  requireGroup(ctx, READERS, WRITERS);
  if (input.group !== undefined) checkTwinName(input.group, "/query/group");
  const bucket = await deps.stores.open(input, false);
  if (!bucket) return reply({ desired: {}, reported: {} }, 200, input.group !== undefined ? { ETag: formatTwinEtag(0) } : {});
  const entries = await bucket.entries();
  const state = visibleState(entries, input.group);
  if (input.group === undefined) return reply(state);
  const commit = readCommit(entries.filter((e) => e.key === twinCommitKey(input.group!)).at(-1));
  return reply(state, 200, { ETag: formatTwinEtag(commit?.version ?? 0) });
}

/** Deletes one property (desired through a commit, reported directly); idempotent → 204. */
export async function deleteTwin(input: TwinDeleteRequest, ctx: RequestContext, deps: TwinsDeps): Promise<Reply<undefined>> {
  requireGroup(ctx, WRITERS);
  checkTwinName(input.group, "/path/group");
  checkTwinName(input.name, "/path/name");
  const bucket = await deps.stores.open(input, false);
  if (!bucket) return reply(undefined, 204);
  const desired = await bucket.get(twinKey(input.group, "desired", input.name));
  if (desired?.operation === "PUT") {
    await withLock(`${input.organization}/${input.environment}/${input.twinId}/${input.group}`, () => commitDesired(bucket, input.group, [[input.name, null]], undefined, deps));
  }
  const reported = await bucket.get(twinKey(input.group, "reported", input.name));
  if (reported?.operation === "PUT") await bucket.remove(twinKey(input.group, "reported", input.name));
  return reply(undefined, 204);
}
