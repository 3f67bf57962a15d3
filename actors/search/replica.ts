/**
 * Keeps one local index current from the RECORDS stream: an ordered consumer starting after the last
 * sequence the index applied (so a restart resumes, and a lost file — sequence 0 — replays the whole
 * compacted stream), batching messages into one index transaction per flush. A stream that was
 * recreated (another identity) or is behind the index (purged) triggers a full rebuild.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JsMsg } from "@nats-io/jetstream";
import { RECORDS_STREAM, RECORD_DELETE, RECORD_OPERATION_HEADER, recordKey, type StoredRecord } from "../../subjects/search.ts";
import type { Logger } from "../../platform/logger.ts";
import type { RecordChange, SearchBackend } from "./backend.ts";
import { toIndexedDoc } from "./documents.ts";
import { ensureRecordsStream } from "./store.ts";

const BATCH = 2000;
/** A backlog this long is loaded in bulk mode (see SqliteBackend.bulkLoad). */
const BULK_BACKLOG = 20_000;
const FLUSH_AFTER_MS = 5;
const decoder = new TextDecoder();

export type Replica = {
  /** Resolves once everything in the stream when it was called has been applied. */
  caughtUp(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
};

/** A stream message as an index change; undefined (skipped, logged) when it is not a usable record. */
export function changeOf(msg: Pick<JsMsg, "subject" | "data" | "headers" | "seq"> & { timestampMs?: number }, log?: Logger): RecordChange | undefined {
  const tokens = msg.subject.split(".");
  const partition = tokens[2]!;
  const key = tokens[3]!;
  if (msg.data.length === 0 || msg.headers?.get(RECORD_OPERATION_HEADER) === RECORD_DELETE) return { op: "delete", partition, key };
  let record: StoredRecord;
  try {
    record = JSON.parse(decoder.decode(msg.data)) as StoredRecord;
  } catch {
    log?.warn({ subject: msg.subject, seq: msg.seq }, "record message is not JSON: skipped");
    return undefined;
  }
  const problem =
    typeof record !== "object" || record === null
      ? "not an object"
      : typeof record.id !== "string" || typeof record.kind !== "string"
        ? "id and kind are required"
        : !record.acl || !Array.isArray(record.acl.viewers) || !Array.isArray(record.acl.owners)
          ? "acl.viewers and acl.owners are required"
          : typeof record.data !== "object" || record.data === null
            ? "data is required"
            : recordKey(record.id) !== key
              ? "the subject key is not the SHA-1 of the id"
              : record.id.split(":")[0] !== partition
                ? "the id does not start with the subject's partition"
                : undefined;
  if (problem) {
    log?.warn({ subject: msg.subject, seq: msg.seq, problem }, "record message skipped");
    return undefined;
  }
  // Records published straight to NATS may lack what storage adds.
  const time = new Date(msg.timestampMs ?? Date.now()).toISOString();
  const stored: StoredRecord = { ...record, version: record.version ?? msg.seq, createUser: record.createUser ?? "nats", createTime: record.createTime ?? time };
  return { op: "upsert", doc: toIndexedDoc(partition, key, stored) };
}

export async function followRecords(nc: NatsConnection, backend: SearchBackend, log: Logger): Promise<Replica> {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const info = await ensureRecordsStream(jsm);
  const identity = info.created;
  if (backend.streamIdentity() !== identity || backend.appliedSeq() > info.state.last_seq) {
    log.info({ applied: backend.appliedSeq(), streamLast: info.state.last_seq }, "search index (re)built from the RECORDS stream");
    backend.reset(identity);
  }
  const start = backend.appliedSeq() + 1;
  let bulk = info.state.last_seq - backend.appliedSeq() >= BULK_BACKLOG;
  if (bulk) await backend.bulkLoad?.(true);
  const consumer = await js.consumers.get(RECORDS_STREAM, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start });
  const messages: ConsumerMessages = await consumer.consume({ max_messages: BATCH * 2 });

  let buffer: RecordChange[] = [];
  let lastSeq = backend.appliedSeq();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waiters: Array<{ seq: number; resolve: () => void }> = [];

  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (lastSeq === backend.appliedSeq()) return;
    try {
      backend.apply(buffer, lastSeq);
    } catch (error) {
      log.error({ err: error, seq: lastSeq }, "applying records to the search index failed");
      throw error;
    }
    buffer = [];
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.seq <= lastSeq) waiters.splice(i, 1)[0]!.resolve();
    }
  };

  const loop = (async () => {
    for await (const msg of messages) {
      const change = changeOf({ subject: msg.subject, data: msg.data, headers: msg.headers, seq: msg.seq, timestampMs: Math.floor(msg.info.timestampNanos / 1e6) }, log);
      if (change) buffer.push(change);
      lastSeq = msg.seq;
      if (buffer.length >= BATCH || msg.info.pending === 0) flush();
      else timer ??= setTimeout(flush, FLUSH_AFTER_MS);
      if (bulk && msg.info.pending === 0) {
        bulk = false;
        // Queries are answered while the indexes build; messages arriving meanwhile wait in the consumer.
        log.info({ seq: lastSeq }, "search index caught up with the RECORDS stream; building its value indexes");
        const started = performance.now();
        await backend.bulkLoad?.(false);
        log.info({ seq: lastSeq, seconds: Math.round((performance.now() - started) / 100) / 10 }, "search index value indexes built");
      }
    }
    flush();
  })().catch((error) => log.error({ err: error }, "search replica stopped"));

  return {
    async caughtUp(timeoutMs = 60_000) {
      const target = (await jsm.streams.info(RECORDS_STREAM)).state.last_seq;
      if (backend.appliedSeq() >= target) return;
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`search index not caught up with sequence ${target} in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ seq: target, resolve: () => (clearTimeout(t), resolve()) });
      });
    },
    async stop() {
      await messages.close();
      await loop;
      flush();
      if (bulk) await backend.bulkLoad?.(false);
    },
  };
}
