/**
 * Handlers of the `storage` actor: an OSDU Storage-compatible record store whose only storage is the
 * RECORDS stream (the latest version of each record per subject). Rules:
 *   PUT records: group users.datalake.editors (else 403); ids `<partition>:<type>:<id>` in the
 *     request's partition (generated when absent); createTime/createUser kept across versions.
 *   GET record: a search or storage role, and the record's ACL shares a group with the caller
 *     (users.data.root sees all), else 403; unknown or deleted → 404.
 *   delete: users.datalake.editors and an owner of the record (or users.data.root), else 403.
 */
import { randomUUID } from "node:crypto";
import { DerrickError, badRequest, check, forbidden, invalidField, notFound, reply, unauthorized, type Principal, type Reply } from "../../subjects/index.ts";
import {
  DATA_ROOT_GROUP,
  PutRecordsBody,
  RECORD_ID_PATTERN,
  SEARCH_ROLES,
  STORAGE_WRITER_GROUP,
  type PutRecordsResponse,
  type RecordsPutMessage,
  type RecordRef,
  type StoredRecord,
} from "../../subjects/search.ts";
import type { RequestContext } from "../runtime/context.ts";
import { aclGroup } from "../search/documents.ts";
import type { RecordStore } from "../search/store.ts";

export type StorageDeps = { records: Pick<RecordStore, "get" | "put" | "remove">; now?: () => Date };

const ID = new RegExp(RECORD_ID_PATTERN);
let lastVersion = 0;

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
  if (principal.groups.includes(DATA_ROOT_GROUP)) return true;
  const mine = new Set(principal.groups.map(aclGroup));
  const groups = asOwner ? record.acl.owners : [...record.acl.viewers, ...record.acl.owners];
  return groups.some((g) => mine.has(aclGroup(g)));
}

function checkId(id: string, partition: string, pointer: string): string {
  if (!ID.test(id) || id.length > 1024) throw invalidField(pointer, "must be <partition>:<type>:<id> (letters, digits, '_', '-', '.')");
  if (id.split(":")[0] !== partition) throw invalidField(pointer, `must start with the partition of the request (${partition}:)`);
  return id;
}

export async function putRecords(input: RecordsPutMessage, ctx: RequestContext, deps: StorageDeps): Promise<Reply<PutRecordsResponse>> {
  const { principal, partition } = caller(ctx);
  if (!principal.groups.includes(STORAGE_WRITER_GROUP)) throw forbidden(`writing records needs the group ${STORAGE_WRITER_GROUP}`);
  const body = check(PutRecordsBody, input.body);
  const seen = new Set<string>();
  const ids = body.map((record, i) => {
    const id = record.id !== undefined ? checkId(record.id, partition, `/body/${i}/id`) : `${partition}:${record.kind.split(":")[2]!.replace(/[^\w\-.]/g, "-")}:${randomUUID().replaceAll("-", "")}`;
    if (seen.has(id)) throw invalidField(`/body/${i}/id`, "appears more than once in the request");
    seen.add(id);
    return id;
  });
  const now = deps.now?.() ?? new Date();
  const user = principal.subject;
  const stored = await Promise.all(
    body.map(async (record, i) => {
      const id = ids[i]!;
      const previous = await deps.records.get(partition, id);
      const out: StoredRecord = {
        ...record,
        id,
        version: nextVersion(now),
        createUser: previous?.createUser ?? user,
        createTime: previous?.createTime ?? now.toISOString(),
        ...(previous ? { modifyUser: user, modifyTime: now.toISOString() } : {}),
      };
      return out;
    }),
  );
  // Nothing half-written is acknowledged: the reply waits for every publish ack.
  await Promise.all(stored.map((record) => deps.records.put(partition, record)));
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
  if (!SEARCH_ROLES.some((role) => principal.groups.includes(role))) throw forbidden("reading records needs a users.datalake.* group");
  const id = checkId(input.id, partition, "/params/id");
  const record = await deps.records.get(partition, id);
  if (!record) throw notFound(`record ${id} does not exist`);
  if (!canSee(principal, record, false)) throw new DerrickError(403, "The user is not authorized to perform this action", { title: "Access denied" });
  return record;
}

export async function deleteRecord(input: RecordRef, ctx: RequestContext, deps: StorageDeps): Promise<Reply<undefined>> {
  const { principal, partition } = caller(ctx);
  if (!principal.groups.includes(STORAGE_WRITER_GROUP)) throw forbidden(`deleting records needs the group ${STORAGE_WRITER_GROUP}`);
  const id = checkId(input.id, partition, "/params/id");
  const record = await deps.records.get(partition, id);
  if (!record) throw notFound(`record ${id} does not exist`);
  if (!canSee(principal, record, true)) throw new DerrickError(403, "The user is not authorized to perform this action", { title: "Access denied" });
  await deps.records.remove(partition, id);
  return reply(undefined, 204);
}
