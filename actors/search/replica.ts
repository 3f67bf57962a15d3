/**
 * Keeps one local index current from the RECORDS stream: an ordered consumer starting after the last
 * sequence the index applied (so a restart resumes, and a lost file — sequence 0 — replays the whole
 * compacted stream), batching messages into one index transaction per flush. A stream that was
 * recreated (another identity) or is behind the index (purged) triggers a full rebuild.
 *
 * The replica never stops on its own:
 * - a message it cannot index (not JSON, a bad shape, nested deeper than RECORD_MAX_DEPTH, or an
 *   error of its own while it is decoded or written) is skipped with a warning naming its subject,
 *   sequence and reason, and counted (health().skipped); the sequence still counts as applied;
 * - any other failure (the consumer throws or ends, the index file cannot be written — from the loop
 *   or from the flush timer) ends the consumer and starts a new one after the last applied sequence,
 *   with backoff; health().following is false meanwhile. Nothing escapes to the process: Bun exits
 *   on an unhandled rejection and on an exception thrown in a timer.
 */
import { streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection, Status } from "@nats-io/nats-core";
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages } from "@nats-io/jetstream";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import type { Logger } from "../../platform/logger.ts";
import type { RecordChange, SearchBackend } from "./backend.ts";
import { decodeChange, decodeRaw, errorText, isDeletion, type StreamMsg } from "./decode.ts";
import { DecodePipeline, type DecodedBatch } from "./decode-pipeline.ts";
import { ensureRecordsStream } from "./store.ts";
import { onStreamDeleted, recreateDelay } from "../runtime/recreate.ts";

const BATCH = 2000;
/** A backlog this long is loaded in bulk mode (see SqliteBackend.bulkLoad). */
const BULK_BACKLOG = 20_000;
const FLUSH_AFTER_MS = 5;
/** A consumer that ran this long before failing starts its backoff over. */
const HEALTHY_RUN_MS = 30_000;
/**
 * How often the stream followed is checked to be the index's, for a deletion whose advisory was missed:
 * one stream info per 5 s, for a search that catches up within seconds rather than never.
 */
const IDENTITY_CHECK_MS = 5_000;

/** How long to wait before restarting a failed consumer: doubles from `firstMs` up to `maxMs`. */
export type RestartBackoff = { firstMs: number; maxMs: number };
const DEFAULT_BACKOFF: RestartBackoff = { firstMs: 200, maxMs: 30_000 };

export type ReplicaHealth = {
  /** A consumer is open and feeding the index. */
  following: boolean;
  /** Failures that restarted the consumer. */
  restarts: number;
  /** Messages skipped because they could not be indexed. */
  skipped: number;
  lastError?: string;
  lastSkipped?: { subject: string; seq: number; reason: string };
};

export type Replica = {
  /** Resolves once everything in the stream when it was called has been applied. */
  caughtUp(timeoutMs?: number): Promise<void>;
  health(): ReplicaHealth;
  stop(): Promise<void>;
};

export { decodeChange };

/** A stream message as an index change; undefined (skipped, logged) when it is not a usable record. */
export function changeOf(msg: StreamMsg, log?: Logger): RecordChange | undefined {
  const change = decodeChange(msg);
  if (change.op !== "skip") return change;
  log?.warn({ subject: msg.subject, seq: msg.seq, problem: change.reason }, "record message skipped");
  return undefined;
}

/**
 * Whether an error of the index write is about the record written (skip it) rather than the file or
 * the machine (restart, skip nothing). SQLite says which: constraint, size and type failures belong
 * to the row; I/O, full disk, busy, read-only, corruption and the rest do not. Of the others, a
 * TypeError or RangeError came from turning the record into rows (a pathological value); anything
 * else is taken as the environment's, so a record is never skipped for a failure that is not its own.
 */
function isRecordError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("SQLITE_")) return /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code);
  return error instanceof TypeError || error instanceof RangeError;
}

type Buffered = { change: RecordChange; seq: number; subject: string };

export async function followRecords(
  nc: NatsConnection,
  backend: SearchBackend,
  log: Logger,
  options: {
    backoff?: RestartBackoff;
    storage?: StoragePolicy /** The decode worker's module (tests point it elsewhere). */;
    decoder?: URL;
  } = {},
): Promise<Replica> {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const backoff = options.backoff ?? DEFAULT_BACKOFF;
  const waiters: Array<{ seq: number; resolve: () => void }> = [];
  const health: ReplicaHealth = { following: false, restarts: 0, skipped: 0 };
  /** Whether the backend is in bulk mode: it outlives a failed consumer, so its end (the index build) is not lost. */
  let bulk = false;
  let stopping = false;
  let wakeFromBackoff: (() => void) | undefined;

  const resolveWaiters = (applied: number) => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.seq <= applied) waiters.splice(i, 1)[0]!.resolve();
    }
  };

  const skip = (subject: string, seq: number, reason: string) => {
    health.skipped++;
    health.lastSkipped = { subject, seq, reason };
    log.warn({ subject, seq, reason, skipped: health.skipped }, "record message skipped: it cannot be indexed");
  };

  /** Opens a consumer after the last applied sequence (rebuilding first when the stream is another one). */
  const open = async (): Promise<ConsumerMessages> => {
    const info = await ensureRecordsStream(jsm, options.storage);
    const identity = info.created;
    if (backend.streamIdentity() !== identity || backend.appliedSeq() > info.state.last_seq) {
      log.info({ applied: backend.appliedSeq(), streamLast: info.state.last_seq }, "search index (re)built from the RECORDS stream");
      await backend.reset(identity);
    }
    if (!bulk && info.state.last_seq - backend.appliedSeq() >= BULK_BACKLOG) {
      await backend.bulkLoad?.(true);
      bulk = true;
    }
    const consumer = await js.consumers.get(RECORDS_STREAM, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: backend.appliedSeq() + 1,
    });
    return consumer.consume({ max_messages: BATCH * 2 });
  };

  /** One consumer's life: resolves when it was closed by stop(), rejects on any failure. */
  const follow = async (messages: ConsumerMessages): Promise<void> => {
    let buffer: Buffered[] = [];
    /** The last message received (applied, or on its way through the decode worker). */
    let lastSeq = backend.appliedSeq();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failure: { error: unknown } | undefined;
    const fail = (error: unknown) => {
      failure ??= { error };
      messages.close().catch(() => undefined);
    };

    /** Writes changes up to `upTo`; a change the index refuses on its own account is skipped, anything else throws. */
    const applyBatch = (items: Buffered[], upTo: number) => {
      if (upTo === backend.appliedSeq()) return;
      try {
        backend.apply(
          items.map((b) => b.change),
          upTo,
        );
      } catch (error) {
        if (!isRecordError(error)) throw error;
        // One change broke the batch: apply them one by one to find it (the batch was rolled back).
        log.warn({ err: error, seq: upTo, changes: items.length }, "a batch of record changes failed; applying them one by one");
        for (const { change, seq, subject } of items) {
          try {
            backend.apply([change], seq);
          } catch (single) {
            if (!isRecordError(single)) throw single;
            skip(subject, seq, `the index refused it: ${errorText(single)}`);
          }
        }
        backend.apply([], upTo);
      }
      // In a bulk load what was applied may not be searchable yet (the lookup file is written by a worker):
      // waiters are told once it ends.
      if (!bulk) resolveWaiters(upTo);
    };

    /** A batch decoded and prepared by the decode worker; one the index refuses is decoded again here and applied one by one. */
    const applyPrepared = (items: Buffered[], batch: DecodedBatch) => {
      if (batch.upTo === backend.appliedSeq()) return;
      try {
        backend.apply(
          items.map((b) => b.change),
          batch.upTo,
          batch.parts,
        );
      } catch (error) {
        if (!isRecordError(error)) throw error;
        const raw = new Map(batch.raw.map((m) => [m.seq, m]));
        const again: Buffered[] = [];
        for (const { seq, subject } of items) {
          const change = decodeRaw(raw.get(seq)!);
          if (change.op !== "skip") again.push({ change, seq, subject });
        }
        applyBatch(again, batch.upTo);
      }
    };

    // A bulk load decodes and prepares records in a worker while this thread writes the previous batch.
    let decoding: DecodePipeline | undefined;
    if (bulk && backend.takesPrepared) {
      const started = await DecodePipeline.start((batch) => {
        const items: Buffered[] = [];
        batch.changes.forEach((change, i) => {
          const { subject, seq } = batch.raw[i]!;
          if (change.op === "skip") skip(subject, seq, change.reason);
          else items.push({ change, seq, subject });
        });
        try {
          if (!failure) applyPrepared(items, batch);
        } catch (error) {
          fail(error);
        }
      }, options.decoder);
      if (typeof started === "string") log.warn({ problem: started }, "the decode worker did not start; decoding on the actor's thread");
      else decoding = started;
    }
    const stopDecoding = () => {
      decoding?.terminate();
      decoding = undefined;
    };
    // A decode worker that died took what it held with it: the consumer restarts after what was applied.
    const failIfDecoderDied = () => {
      if (decoding?.failure !== undefined) fail(new Error(`the decode worker failed: ${decoding.failure}`));
    };

    /** Set when this consumer's life is over: a flush timer firing later must not apply (or mark as applied) anything. */
    let ended = false;
    const flush = () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (ended) return;
      if (decoding) return decoding.send(lastSeq);
      applyBatch(buffer, lastSeq);
      buffer = [];
    };
    // A timer callback must not throw (Bun exits): the failure ends this consumer instead.
    const flushFromTimer = () => {
      try {
        flush();
      } catch (error) {
        fail(error);
      }
    };

    try {
      for await (const msg of messages) {
        if (failure) break;
        const raw = {
          subject: msg.subject,
          data: msg.data,
          deleted: isDeletion(msg.headers),
          seq: msg.seq,
          timestampMs: Math.floor(msg.info.timestampNanos / 1e6),
        };
        if (decoding) decoding.add(raw);
        else {
          const change = decodeRaw(raw);
          if (change.op === "skip") skip(msg.subject, msg.seq, change.reason);
          else buffer.push({ change, seq: msg.seq, subject: msg.subject });
        }
        lastSeq = msg.seq;
        if ((decoding ? decoding.size : buffer.length) >= BATCH || msg.info.pending === 0) flush();
        else timer ??= setTimeout(flushFromTimer, FLUSH_AFTER_MS);
        // Checked after every message, so batches sent by the flush timer count too.
        const room = decoding?.room();
        if (room) await room;
        failIfDecoderDied();
        const behind = backend.backpressure?.();
        if (behind) await behind;
        if (failure) break;
        if (bulk && msg.info.pending === 0) {
          if (decoding) await decoding.drained();
          failIfDecoderDied();
          stopDecoding();
          if (failure) break;
          // Queries are answered while the indexes build; messages arriving meanwhile wait in the consumer.
          log.info({ seq: lastSeq }, "search index caught up with the RECORDS stream; building its value indexes");
          const started = performance.now();
          await backend.bulkLoad?.(false);
          bulk = false;
          resolveWaiters(lastSeq);
          log.info({ seq: lastSeq, seconds: Math.round((performance.now() - started) / 100) / 10 }, "search index value indexes built");
        }
      }
      if (timer) clearTimeout(timer);
      if (failure) throw failure.error;
      flush();
      if (decoding) await decoding.drained();
      failIfDecoderDied();
      if (failure) throw (failure as { error: unknown }).error;
    } finally {
      // What the worker still held is dropped: the next consumer starts after what was applied. A timer
      // flush after this point would have marked `lastSeq` applied with those messages never written.
      ended = true;
      if (timer) clearTimeout(timer);
      stopDecoding();
    }
    if (!stopping) throw new Error("the RECORDS consumer ended");
  };

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => ((wakeFromBackoff = undefined), resolve()), ms);
      wakeFromBackoff = () => (clearTimeout(t), (wakeFromBackoff = undefined), resolve());
    });

  // The first consumer is opened before followRecords returns: a search actor that cannot reach the
  // stream at start fails to start. Later failures restart it, for as long as the actor runs.
  let messages: ConsumerMessages | undefined = await open();
  health.following = true;
  // A deleted RECORDS stream ends the consumer at once: nats.js's ordered consumer would wait for it to
  // come back (for good: nothing here would bring it back), and writes to the one made in its place
  // would never be searchable. The next opening finds another stream identity and rebuilds.
  const deletions = onStreamDeleted(
    nc,
    () => {
      log.warn(
        { stream: RECORDS_STREAM, appliedSeq: backend.appliedSeq() },
        "the RECORDS stream was deleted; the index is rebuilt from the stream made in its place",
      );
      void recreateDelay().then(() => messages?.close().catch(() => undefined));
    },
    RECORDS_STREAM,
  );
  // The advisory can be missed: sent while this process was disconnected, or never sent (a store lost
  // while nats-server was down; nats-server 2.9.10 was seen to send it to no subscriber in about 1 run
  // in 10 of test/search/deleted-storage.test.ts). So the stream is also checked at every reconnect and
  // every IDENTITY_CHECK_MS: one missing, or another than the index's, ends the consumer the same way
  // (the ordered consumer would follow its replacement from the old position, skipping its first
  // records and keeping the old ones in the index).
  const checkIdentity = async () => {
    const info = await streamInfoIfAny(jsm, RECORDS_STREAM).catch(() => null);
    if (info === null || info?.created === backend.streamIdentity() || stopping) return;
    log.warn(
      { stream: RECORDS_STREAM, appliedSeq: backend.appliedSeq() },
      "the RECORDS stream is not the one the index was built from; the index is rebuilt from the stream there is now",
    );
    await messages?.close().catch(() => undefined);
  };
  const identityCheck = setInterval(() => void checkIdentity(), IDENTITY_CHECK_MS);
  identityCheck.unref?.();
  // Stopped with the replica: a `break` alone would leave the listener on the shared connection
  // until its next status event.
  const statuses = nc.status() as AsyncIterable<Status> & { stop?: () => void };
  void (async () => {
    for await (const s of statuses) {
      if (stopping) break;
      if (s.type === "reconnect") void checkIdentity();
    }
  })();
  const supervised = (async () => {
    let attempt = 0;
    while (!stopping) {
      const started = Date.now();
      try {
        if (!messages) {
          const opened = await open();
          if (stopping) {
            await opened.close().catch(() => undefined);
            break;
          }
          messages = opened;
          health.following = true;
          log.info({ seq: backend.appliedSeq(), restarts: health.restarts }, "search replica following the RECORDS stream again");
        }
        await follow(messages);
      } catch (error) {
        if (stopping) {
          log.error(
            { err: error, appliedSeq: backend.appliedSeq() },
            "search replica failed while stopping; the rest is applied on the next start",
          );
          break;
        }
        health.following = false;
        health.restarts++;
        health.lastError = errorText(error);
        if (Date.now() - started >= HEALTHY_RUN_MS) attempt = 0;
        const delay = Math.min(backoff.maxMs, backoff.firstMs * 2 ** attempt++);
        log.error(
          { err: error, appliedSeq: backend.appliedSeq(), retryInMs: delay },
          "search replica stopped following the RECORDS stream; restarting after the last applied sequence",
        );
        await messages?.close().catch(() => undefined);
        messages = undefined;
        await pause(delay);
      }
    }
    health.following = false;
  })().catch((error) => log.error({ err: error }, "search replica supervisor failed")); // not reached: every failure is caught above

  return {
    async caughtUp(timeoutMs = 60_000) {
      const target = (await jsm.streams.info(RECORDS_STREAM)).state.last_seq;
      if (!bulk && backend.appliedSeq() >= target) return;
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`search index not caught up with sequence ${target} in ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ seq: target, resolve: () => (clearTimeout(t), resolve()) });
      });
    },
    health: () => ({ ...health }),
    async stop() {
      stopping = true;
      deletions.unsubscribe();
      statuses.stop?.();
      clearInterval(identityCheck);
      wakeFromBackoff?.();
      await messages?.close().catch(() => undefined);
      await supervised;
      if (bulk) await backend.bulkLoad?.(false);
    },
  };
}
