/**
 * Handlers of the `storage` actor: an OSDU Storage-compatible record store whose only storage is the
 * RECORDS stream (the latest version of each record per subject). Rules:
 *   PUT records: group users.datalake.editors (else 403); ids `<partition>:<type>:<id>` in the
 *     request's partition (generated when absent); objects and arrays nested at most
 *     RECORD_MAX_DEPTH levels (else 400 naming the field, nothing written); createTime/createUser kept across versions; a
 *     record that exists may be replaced only by an owner of its current ACL (or users.data.root),
 *     else 403 "User Unauthorized" for the whole request, as OSDU's validateOwnerAccess.
 *   GET record: a search or storage role, and the record's ACL shares a group with the caller
 *     (users.data.root sees all), else 403 "Access denied"; unknown or deleted → 404 "Record not
 *     found", whoever asks. These are OSDU's statuses (QueryServiceImpl.getRecord), kept because
 *     OSDU clients may branch on them: a caller with a role can tell an id that exists from one
 *     that does not, as in OSDU; the 403 carries only OSDU's fixed text, nothing read from the
 *     record (docs/search.md, "Records").
 *   delete: users.datalake.editors and an owner of the record (or users.data.root), else 403;
 *     unknown or deleted → 404 (OSDU's deleteRecord).
 * Each write is conditioned on the stream sequence its owner check read (expected last subject
 * sequence): a version written in between fails it, and the record is read and checked again, so a
 * check never approves a write over a version it did not see.
 */
import { randomUUID } from "node:crypto";
import { DerrickError, badRequest, check, conflict, forbidden, invalidField, reply, unauthorized, type Principal, type Reply } from "../../subjects/index.ts";
import {
  DATA_ROOT_GROUP,
  PutRecordsBody,
  checkRecordDepth,
  RECORD_ID_PATTERN,
  SEARCH_ROLES,
  STORAGE_WRITER_GROUP,
  type PutRecordsResponse,
  type RecordInput,
  type RecordsPutMessage,
  type RecordRef,
  type StoredRecord,
} from "../../subjects/search.ts";
import type { RequestContext } from "../runtime/context.ts";
import { aclGroup, holdsGroup } from "../search/documents.ts";
import { RecordChanged, type RecordRead, type RecordStore } from "../search/store.ts";

export type StorageDeps = { records: Pick<RecordStore, "read" | "put" | "remove">; now?: () => Date };

const ID = new RegExp(RECORD_ID_PATTERN);
/** Conditional writes that may find the record changed before the request gives up with 409. */
const WRITE_ATTEMPTS = 5;
let lastVersion = 0;

const notOwnerOnUpdate = () => new DerrickError(403, "User is not authorized to update records.", { title: "User Unauthorized" });
/** OSDU's fixed 403: it names nothing of the record (content, ACL, legal, version). */
const accessDenied = () => new DerrickError(403, "The user is not authorized to perform this action", { title: "Access denied" });
/** OSDU's 404s for a record that is not there (never written, or deleted): getRecord's, deleteRecord's. */
const recordNotFound = (id: string) => new DerrickError(404, `The record '${id}' was not found`, { title: "Record not found" });
const deleteNotFound = (id: string) => new DerrickError(404, `Record with id '${id}' does not exist`, { title: "Record not found" });

/** Microseconds since the epoch, strictly increasing in this process. */
function nextVersion(now: Date): number {
  lastVersion = Math.max(lastVersion + 1, now.getTime() * 1000);
  return lastVersion;
}

function caller(ctx: RequestContext): { principal: Principal; partition: string } {
  if (!ctx.principal) throw unauthorized("this operation needs an authenticated caller");
  if (!ctx.partition) throw badRequest("invalid or empty data partition provided");
  return { principal: ctx.principal, partition: ctx.partition };
}

function canSee(principal: Principal, record: StoredRecord, asOwner: boolean): boolean {
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
async function whileUnchanged<T>(id: string, first: RecordRead, reread: () => Promise<RecordRead>, attempt: (current: RecordRead) => Promise<T>): Promise<T> {
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
function nextStored(record: RecordInput, id: string, previous: StoredRecord | undefined, user: string, now: Date): StoredRecord {
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
  const { principal, partition } = caller(ctx);
  if (!holdsGroup(principal.groups, STORAGE_WRITER_GROUP)) throw forbidden(`writing records needs the group ${STORAGE_WRITER_GROUP}`);
  const body = check(PutRecordsBody, input.body);
  // Before anything is read or written: a record too deep for the index is refused, not stored.
  checkRecordDepth(body);
  const seen = new Set<string>();
  const ids = body.map((record, i) => {
    const id = record.id !== undefined ? checkId(record.id, partition, `/body/${i}/id`) : `${partition}:${record.kind.split(":")[2]!.replace(/[^\w\-.]/g, "-")}:${randomUUID().replaceAll("-", "")}`;
    if (seen.has(id)) throw invalidField(`/body/${i}/id`, "appears more than once in the request");
    seen.add(id);
    return id;
  });
  const now = deps.now?.() ?? new Date();
  const mayReplace = (existing: StoredRecord | undefined) => !existing || canSee(principal, existing, true);
  // Every existing record is checked before anything is written: one the caller does not own refuses the request.
  const reads = await Promise.all(ids.map((id) => deps.records.read(partition, id)));
  if (!reads.every((r) => mayReplace(r.record))) throw notOwnerOnUpdate();
  // Nothing half-written is acknowledged: the reply waits for every publish ack. A version written
  // by someone else after the check is re-read and re-checked; should that check fail, records of
  // this request written before it stay written (JetStream 2.9 has no multi-subject transaction).
  const stored = await Promise.all(
    body.map((record, i) =>
      whileUnchanged(ids[i]!, reads[i]!, () => deps.records.read(partition, ids[i]!), async ({ record: previous, seq }) => {
        if (!mayReplace(previous)) throw notOwnerOnUpdate();
        const out = nextStored(record, ids[i]!, previous, principal.subject, now);
        await deps.records.put(partition, out, seq);
        return out;
      }),
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
  const { principal, partition } = caller(ctx);
  if (!SEARCH_ROLES.some((role) => holdsGroup(principal.groups, role))) throw forbidden("reading records needs a users.datalake.* group");
  const id = checkId(input.id, partition, "/params/id");
  const { record } = await deps.records.read(partition, id);
  // As OSDU: whether the record is there is answered before the ACL is looked at.
  if (!record) throw recordNotFound(id);
  if (!canSee(principal, record, false)) throw accessDenied();
  return record;
}

export async function deleteRecord(input: RecordRef, ctx: RequestContext, deps: StorageDeps): Promise<Reply<undefined>> {
  const { principal, partition } = caller(ctx);
  if (!holdsGroup(principal.groups, STORAGE_WRITER_GROUP)) throw forbidden(`deleting records needs the group ${STORAGE_WRITER_GROUP}`);
  const id = checkId(input.id, partition, "/params/id");
  const read = () => deps.records.read(partition, id);
  await whileUnchanged(id, await read(), read, async ({ record, seq }) => {
    if (!record) throw deleteNotFound(id);
    if (!canSee(principal, record, true)) throw accessDenied();
    await deps.records.remove(partition, id, seq);
  });
  return reply(undefined, 204);
}
