/**
 * A RECORDS stream message as an index change (or why it cannot be one), with nothing of NATS but the
 * message's fields: used on the actor's thread and in the decode worker (decode-worker.ts).
 */
import {
  RECORD_DELETE,
  RECORD_MAX_DEPTH,
  RECORD_OPERATION_HEADER,
  recordKey,
  tooDeepAt,
  type StoredRecord,
} from "../../subjects/search.ts";
import type { RecordChange } from "./backend.ts";
import { toIndexedDoc } from "./documents.ts";

const decoder = new TextDecoder();

export const errorText = (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error));

export type StreamMsg = {
  subject: string;
  data: Uint8Array;
  headers?: { get(name: string): string } | undefined;
  seq: number;
  timestampMs?: number;
};

/** A stream message as it crosses threads: its delete header as a flag. */
export type RawMessage = { subject: string; data: Uint8Array; deleted: boolean; seq: number; timestampMs?: number };

/** Whether a message's headers mark it as a record's deletion. */
export const isDeletion = (headers: StreamMsg["headers"]): boolean => headers?.get(RECORD_OPERATION_HEADER) === RECORD_DELETE;

/** A stream message as an index change, or why it cannot be one. Never throws. */
export function decodeChange(msg: StreamMsg): RecordChange | { op: "skip"; reason: string } {
  return decodeRaw({ subject: msg.subject, data: msg.data, deleted: isDeletion(msg.headers), seq: msg.seq, timestampMs: msg.timestampMs });
}

/** decodeChange for a message whose delete header is a flag. */
export function decodeRaw(msg: RawMessage): RecordChange | { op: "skip"; reason: string } {
  const tokens = msg.subject.split(".");
  const partition = tokens[2]!;
  const key = tokens[3]!;
  if (msg.data.length === 0 || msg.deleted) return { op: "delete", partition, key };
  let record: StoredRecord;
  try {
    record = JSON.parse(decoder.decode(msg.data)) as StoredRecord;
  } catch {
    return { op: "skip", reason: "not JSON" };
  }
  const isStrings = (list: unknown) => Array.isArray(list) && list.every((v) => typeof v === "string");
  let deep: string | undefined;
  const problem =
    typeof record !== "object" || record === null || Array.isArray(record)
      ? "not an object"
      : typeof record.id !== "string" || typeof record.kind !== "string"
        ? "id and kind are required"
        : typeof record.acl !== "object" || record.acl === null || !isStrings(record.acl.viewers) || !isStrings(record.acl.owners)
          ? "acl.viewers and acl.owners are required, as arrays of strings"
          : typeof record.data !== "object" || record.data === null
            ? "data is required"
            : recordKey(record.id) !== key
              ? "the subject key is not the SHA-1 of the id"
              : record.id.split(":")[0] !== partition
                ? "the id does not start with the subject's partition"
                : (deep = tooDeepAt(record, RECORD_MAX_DEPTH)) !== undefined
                  ? `nests objects and arrays more than ${RECORD_MAX_DEPTH} levels deep (at ${deep})`
                  : undefined;
  if (problem) return { op: "skip", reason: problem };
  try {
    // Records published straight to NATS may lack what storage adds.
    const stored: StoredRecord = {
      ...record,
      version: record.version ?? msg.seq,
      createUser: record.createUser ?? "nats",
      createTime: record.createTime ?? new Date(msg.timestampMs ?? Date.now()).toISOString(),
    };
    return { op: "upsert", doc: toIndexedDoc(partition, key, stored) };
  } catch (error) {
    return { op: "skip", reason: `cannot be indexed: ${errorText(error)}` };
  }
}
