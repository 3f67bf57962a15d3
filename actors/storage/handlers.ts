/**
 * Handlers of the `storage` actor: an OSDU Storage-compatible record store whose only storage is the RECORDS stream.
 * PUT, GET, delete and purge keep OSDU's groups, owner checks, statuses and texts, since OSDU clients branch on them
 * (docs/search.md#records). Each write is conditioned on the sequence its owner check read: a check never approves
 * a write over a version it did not see.
 */
import { randomUUID } from "node:crypto";
import { DerrickError, check, conflict, invalidField, reply, type Reply, type SharedPrincipal } from "../../subjects/index.ts";
import {
  DATA_ROOT_GROUP,
  NOT_AUTHORIZED,
  PutRecordsBody,
  checkRecordDepth,
  missingGroupDetail,
  recordBodyOf,
  RECORD_ID_PATTERN,
  SEARCH_ROLES,
  STORAGE_PURGE_GROUP,
  STORAGE_WRITER_GROUP,
  type PutRecordsResponse,
  type RecordBody,
  type RecordsPutMessage,
  type RecordRef,
  type StorageHealth,
  type StoredRecord,
} from "../../subjects/search.ts";
import { caller, type RequestContext } from "../runtime/context.ts";
import { aclGroup, holdsGroup } from "../search/documents.ts";
import { RecordChanged, type RecordRead, type RecordStore } from "./store.ts";

export type StorageDeps = { records: Pick<RecordStore, "read" | "put" | "remove" | "purge" | "count">; now?: () => Date };

const ID = new RegExp(RECORD_ID_PATTERN);
/** Conditional writes that may find the record changed before the request gives up with 409. */
const WRITE_ATTEMPTS = 5;
let lastVersion = 0;

/** A caller without the role an operation needs: OSDU's 403 "Access denied", naming the groups that would allow it. */
const missingRole = (action: string, groups: readonly string[]) =>
  new DerrickError(403, missingGroupDetail(action, groups), { title: "Access denied", type: "access-denied" });
/**
 * OSDU's 403s of the owner and viewer checks, with what would allow the operation. They name the
 * record's ACL fields, never its groups (nor anything else of the record: content, legal, version).
 */
const notOwnerOnUpdate = () =>
  new DerrickError(
    403,
    "User is not authorized to update records. Replacing a record needs one of the groups in its acl.owners, or users.data.root.",
    { title: "User Unauthorized" },
  );
const accessDenied = (action: string, aclFields: string) =>
  new DerrickError(403, `${NOT_AUTHORIZED}: ${action} needs one of the groups in its ${aclFields}, or ${DATA_ROOT_GROUP}`, {
    title: "Access denied",
    type: "access-denied",
  });
const purgeDenied = () =>
  new DerrickError(
    403,
    `The user is not authorized to purge the record: purging a record needs one of the groups in its acl.owners, or ${DATA_ROOT_GROUP}`,
    { title: "Access denied", type: "access-denied" },
  );
/** OSDU's 404s for a record that is not there (never written, or deleted): getRecord's, deleteRecord's. */
const recordNotFound = (id: string) => new DerrickError(404, `The record '${id}' was not found`, { title: "Record not found" });
const deleteNotFound = (id: string) => new DerrickError(404, `Record with id '${id}' does not exist`, { title: "Record not found" });

/** Microseconds since the epoch, strictly increasing in this process. */
function nextVersion(now: Date): number {
  lastVersion = Math.max(lastVersion + 1, now.getTime() * 1000);
  return lastVersion;
}

/** OSDU's words for a request without a partition. */
const storageCaller = (ctx: RequestContext) => caller(ctx, "invalid or empty data partition provided");

function canSee(principal: SharedPrincipal, record: StoredRecord, asOwner: boolean): boolean {
  if (holdsGroup(principal.groups, DATA_ROOT_GROUP)) return true;
  const mine = new Set(principal.groups.map(aclGroup));
  const groups = asOwner ? record.acl.owners : [...record.acl.viewers, ...record.acl.owners];
  return groups.some((g) => mine.has(aclGroup(g)));
}

function checkId(id: string, partition: string, pointer: string): string {
  if (!ID.test(id) || id.length > 1024) throw invalidField(pointer, "must be <partition>:<type>:<id> (letters, digits, '_', '-', '.')");
  if (id.split(":")[0] !== partition) throw invalidField(pointer, `must start with the partition of the request (${partition}:)`);
  return id;
}

/**
 * Runs `attempt` on the version last read; when its conditional write finds that the record changed
 * in between, reads the record again and retries (the attempt repeats its checks on what it reads).
 */
async function whileUnchanged<T>(
  id: string,
  first: RecordRead,
  reread: () => Promise<RecordRead>,
  attempt: (current: RecordRead) => Promise<T>,
): Promise<T> {
  let current = first;
  for (let n = 1; ; n++) {
    try {
      return await attempt(current);
    } catch (error) {
      if (!(error instanceof RecordChanged)) throw error;
      if (n >= WRITE_ATTEMPTS) throw conflict(`record ${id} kept changing while it was written; try again`);
    }
    current = await reread();
  }
}

/** The stored form of a write: the id, a new version, creation kept from the previous version. */
function nextStored(record: RecordBody, id: string, previous: StoredRecord | undefined, user: string, now: Date): StoredRecord {
  return {
    ...record,
    id,
    version: nextVersion(now),
    createUser: previous?.createUser ?? user,
    createTime: previous?.createTime ?? now.toISOString(),
    ...(previous ? { modifyUser: user, modifyTime: now.toISOString() } : {}),
  };
}

export async function putRecords(input: RecordsPutMessage, ctx: RequestContext, deps: StorageDeps): Promise<Reply<PutRecordsResponse>> {
  const { principal, partition } = storageCaller(ctx);
  if (!holdsGroup(principal.groups, STORAGE_WRITER_GROUP)) throw missingRole("writing records", [STORAGE_WRITER_GROUP]);
  // Only what a record holds is kept: nulls, server-assigned and unknown fields go here.
  const body = check(PutRecordsBody, input.body).map(recordBodyOf);
  // Before anything is read or written: a record too deep for the index is refused, not stored.
  checkRecordDepth(body);
  const seen = new Set<string>();
  const ids = body.map((record, i) => {
    const id =
      record.id !== undefined
        ? checkId(record.id, partition, `/body/${i}/id`)
        : `${partition}:${record.kind.split(":")[2]!.replace(/[^\w\-.]/g, "-")}:${randomUUID().replaceAll("-", "")}`;
    if (seen.has(id)) throw invalidField(`/body/${i}/id`, "appears more than once in the request");
    seen.add(id);
    return id;
  });
  const now = deps.now?.() ?? new Date();
  const mayReplace = (existing: StoredRecord | undefined) => !existing || canSee(principal, existing, true);
  // A logically deleted record is still there for OSDU (inactive): written again, it keeps its
  // creation and only its owners may write it, as a live one.
  const previousOf = (read: RecordRead) => read.record ?? read.deleted;
  // Every existing record is checked before anything is written: one the caller does not own refuses the request.
  const reads = await Promise.all(ids.map((id) => deps.records.read(partition, id)));
  if (!reads.every((r) => mayReplace(previousOf(r)))) throw notOwnerOnUpdate();
  // Nothing half-written is acknowledged: the reply waits for every publish ack. A version written
  // by someone else after the check is re-read and re-checked; should that check fail, records of
  // this request written before it stay written (JetStream 2.9 has no multi-subject transaction).
  const stored = await Promise.all(
    body.map((record, i) =>
      whileUnchanged(
        ids[i]!,
        reads[i]!,
        () => deps.records.read(partition, ids[i]!),
        async (current) => {
          const previous = previousOf(current);
          if (!mayReplace(previous)) throw notOwnerOnUpdate();
          const out = nextStored(record, ids[i]!, previous, principal.subject, now);
          await deps.records.put(partition, out, current.seq);
          return out;
        },
      ),
    ),
  );
  return reply(
    {
      recordCount: stored.length,
      recordIds: stored.map((r) => r.id),
      recordIdVersions: stored.map((r) => `${r.id}:${r.version}`),
      skippedRecordIds: [],
    },
    201,
  );
}

export async function getRecord(input: RecordRef, ctx: RequestContext, deps: StorageDeps): Promise<StoredRecord> {
  const { principal, partition } = storageCaller(ctx);
  if (!SEARCH_ROLES.some((role) => holdsGroup(principal.groups, role))) throw missingRole("reading records", SEARCH_ROLES);
  const id = checkId(input.id, partition, "/params/id");
  const { record } = await deps.records.read(partition, id);
  // As OSDU: whether the record is there is answered before the ACL is looked at.
  if (!record) throw recordNotFound(id);
  if (!canSee(principal, record, false)) throw accessDenied("reading this record", "acl.viewers or acl.owners");
  return record;
}

export async function deleteRecord(input: RecordRef, ctx: RequestContext, deps: StorageDeps): Promise<Reply<undefined>> {
  const { principal, partition } = storageCaller(ctx);
  if (!holdsGroup(principal.groups, STORAGE_WRITER_GROUP)) throw missingRole("deleting records", [STORAGE_WRITER_GROUP]);
  const id = checkId(input.id, partition, "/params/id");
  const now = deps.now?.() ?? new Date();
  const read = () => deps.records.read(partition, id);
  await whileUnchanged(id, await read(), read, async ({ record, seq }) => {
    if (!record) throw deleteNotFound(id);
    if (!canSee(principal, record, true)) throw accessDenied("deleting this record", "acl.owners");
    // As OSDU's deleteRecord: the record stays (inactive) until purged, marked with who deleted it.
    await deps.records.remove(partition, { ...record, modifyUser: principal.subject, modifyTime: now.toISOString() }, seq);
  });
  return reply(undefined, 204);
}

/** `DELETE /api/storage/v2/records/{id}`: OSDU's purge. A logically deleted record may be purged too. */
export async function purgeRecord(input: RecordRef, ctx: RequestContext, deps: StorageDeps): Promise<Reply<undefined>> {
  const { principal, partition } = storageCaller(ctx);
  if (!holdsGroup(principal.groups, STORAGE_PURGE_GROUP)) throw missingRole("purging records", [STORAGE_PURGE_GROUP]);
  const id = checkId(input.id, partition, "/params/id");
  const read = () => deps.records.read(partition, id);
  await whileUnchanged(id, await read(), read, async ({ record, deleted, seq }) => {
    const last = record ?? deleted;
    if (!last) throw deleteNotFound(id);
    if (!canSee(principal, last, true)) throw purgeDenied();
    await deps.records.purge(partition, id, seq);
  });
  return reply(undefined, 204);
}

/** The storage readiness check: this actor answers and JetStream answers for the RECORDS stream. */
export async function storageHealth(deps: StorageDeps): Promise<StorageHealth> {
  return { records: await deps.records.count() };
}
