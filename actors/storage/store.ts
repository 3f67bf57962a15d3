/**
 * The storage actor's record store: stream RECORDS on derrick.records.<partition>.<sha1(id)>, one message kept per
 * subject (a record's latest version or its deletion mark), so replaying it rebuilds an index. A logical delete's mark
 * keeps the last version, a purge's is empty; either stays so a replica that was behind still drops the record
 * (docs/search.md#records).
 */
import { SINGLE_NODE, streamOptions, type StoragePolicy } from "../runtime/storage.ts";
import { withStream } from "../runtime/recreate.ts";
import { headers as natsHeaders, type MsgHdrs, type NatsConnection } from "@nats-io/nats-core";
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StreamInfo,
} from "@nats-io/jetstream";
import { subjects } from "../../subjects/index.ts";
import { RECORDS_STREAM, RECORD_DELETE, RECORD_OPERATION_HEADER, recordKey, type StoredRecord } from "../../subjects/search.ts";
import { encodeJson } from "../runtime/kv.ts";

export async function ensureRecordsStream(jsm: JetStreamManager, policy: StoragePolicy = SINGLE_NODE): Promise<StreamInfo> {
  try {
    return await jsm.streams.info(RECORDS_STREAM);
  } catch {
    try {
      return await jsm.streams.add({
        name: RECORDS_STREAM,
        subjects: [subjects.allRecords()],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        max_msgs_per_subject: 1,
        discard: DiscardPolicy.Old,
        ...streamOptions(policy),
      });
    } catch (error) {
      // Another process created it between the two calls.
      const info = await jsm.streams.info(RECORDS_STREAM).catch(() => undefined);
      if (!info) throw error;
      return info;
    }
  }
}

/**
 * A record's latest version and its subject's last stream sequence (0: never written; a deletion
 * mark has a sequence and no record). `deleted`: the last version of a logically deleted record,
 * kept in its deletion mark (absent once purged, or for a mark without a body).
 */
export type RecordRead = { record: StoredRecord | undefined; seq: number; deleted?: StoredRecord };

/** A conditional write found the record's subject past the sequence it expected: someone wrote in between. */
export class RecordChanged extends Error {
  override name = "RecordChanged";
}

export type RecordStore = {
  js: JetStreamClient;
  jsm: JetStreamManager;
  read(partition: string, id: string): Promise<RecordRead>;
  /** With `expectedSeq`, written only while the record's subject is still at that sequence, else RecordChanged. */
  put(partition: string, record: StoredRecord, expectedSeq?: number): Promise<number>;
  /** Logical delete: a deletion mark that keeps `last` (the version deleted), readable as `deleted`. */
  remove(partition: string, last: StoredRecord, expectedSeq?: number): Promise<void>;
  /** Purge: an empty deletion mark replaces whatever the subject held (one message per subject). */
  purge(partition: string, id: string, expectedSeq?: number): Promise<void>;
  /** Messages on the stream; fails when JetStream does not answer. */
  count(): Promise<number>;
};

/** The server checks `Nats-Expected-Last-Subject-Sequence` (0 = no message yet) atomically with the append. */
async function publishRecord(
  js: JetStreamClient,
  subject: string,
  payload: Uint8Array,
  expectedSeq: number | undefined,
  h?: MsgHdrs,
): Promise<number> {
  try {
    const ack = await js.publish(subject, payload, {
      ...(h ? { headers: h } : {}),
      ...(expectedSeq !== undefined ? { expect: { lastSubjectSequence: expectedSeq } } : {}),
    });
    return ack.seq;
  } catch (error) {
    if (
      error instanceof JetStreamApiError &&
      (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
    ) {
      throw new RecordChanged(`${subject} changed after sequence ${expectedSeq}`, { cause: error });
    }
    throw error;
  }
}

function deletionHeaders(): MsgHdrs {
  const h = natsHeaders();
  h.set(RECORD_OPERATION_HEADER, RECORD_DELETE);
  return h;
}

const text = new TextDecoder();

/** The record a deletion mark keeps, when it holds one with this id and an ACL (anything else: none). */
function lastVersionIn(data: Uint8Array, id: string): StoredRecord | undefined {
  try {
    const record = JSON.parse(text.decode(data)) as Partial<StoredRecord> | null;
    const strings = (list: unknown) => Array.isArray(list) && list.every((g) => typeof g === "string");
    if (record?.id !== id || !strings(record.acl?.viewers) || !strings(record.acl?.owners)) return undefined;
    return record as StoredRecord;
  } catch {
    return undefined;
  }
}

export async function openRecordStore(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): Promise<RecordStore> {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await ensureRecordsStream(jsm, policy);
  /**
   * Runs `op`, making RECORDS again first if it is gone (an operator, a lost store), as every store of derrick does:
   * its records went with it, so reads find nothing, as search does once its replica rebuilt.
   */
  const withRecords = <T>(op: () => Promise<T>): Promise<T> =>
    withStream(
      jsm,
      RECORDS_STREAM,
      () => ensureRecordsStream(jsm, policy),
      op,
      (error) => error instanceof RecordChanged,
    );
  return {
    js,
    jsm,
    read: (partition, id) =>
      withRecords(async () => {
        // null when the subject has no message; any other failure propagates (never read as "absent").
        const stored = await jsm.streams.getMessage(RECORDS_STREAM, { last_by_subj: subjects.records(partition, recordKey(id)) });
        if (!stored) return { record: undefined, seq: 0 };
        if (stored.data.length === 0) return { record: undefined, seq: stored.seq };
        if (stored.header?.get(RECORD_OPERATION_HEADER) !== RECORD_DELETE) return { record: stored.json<StoredRecord>(), seq: stored.seq };
        // A deletion mark keeps the version deleted; one a producer wrote with something else in it keeps nothing.
        const last = lastVersionIn(stored.data, id);
        return { record: undefined, seq: stored.seq, ...(last ? { deleted: last } : {}) };
      }),
    put: (partition, record, expectedSeq) =>
      withRecords(() => publishRecord(js, subjects.records(partition, recordKey(record.id)), encodeJson(record), expectedSeq)),
    remove: (partition, last, expectedSeq) =>
      withRecords(
        async () =>
          void (await publishRecord(js, subjects.records(partition, recordKey(last.id)), encodeJson(last), expectedSeq, deletionHeaders())),
      ),
    purge: (partition, id, expectedSeq) =>
      withRecords(
        async () =>
          void (await publishRecord(js, subjects.records(partition, recordKey(id)), new Uint8Array(0), expectedSeq, deletionHeaders())),
      ),
    count: () => withRecords(async () => (await jsm.streams.info(RECORDS_STREAM)).state.messages),
  };
}
