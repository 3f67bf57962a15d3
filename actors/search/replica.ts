/**
 * Keeps one local index current from the RECORDS stream, and never stops on its own: a message it
 * cannot index is skipped and counted, any other failure restarts the consumer after the last applied
 * sequence, with backoff. The parts and why: docs/search.md#following-the-records-stream.
 */
import { streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection, Status, Subscription } from "@nats-io/nats-core";
import {
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import type { Logger } from "../../platform/logger.ts";
import type { RecordChange, SearchBackend } from "./backend.ts";
import { decodeChange, errorText, type StreamMsg } from "./decode.ts";
import { ensureRecordsStream } from "../storage/store.ts";
import { onStreamDeleted, recreateDelay } from "../runtime/recreate.ts";
import { systemClock, type Clock } from "../../platform/clock.ts";
import { ConsumerRun, type ReplicaState } from "./replica-run.ts";
import {
  BATCH,
  CatchUpWaiters,
  DEFAULT_BACKOFF,
  IDENTITY_CHECK_MS,
  RestartSchedule,
  needsRebuild,
  startsBulkLoad,
  streamReplaced,
  type RestartBackoff,
} from "./replica-policy.ts";

export type { RestartBackoff };

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

export type ReplicaOptions = {
  backoff?: RestartBackoff;
  storage?: StoragePolicy;
  /** The decode worker's module (tests point it elsewhere). */
  decoder?: URL;
  clock?: Clock;
};

export { decodeChange };

/** A stream message as an index change; undefined (skipped, logged) when it is not a usable record. */
export function changeOf(msg: StreamMsg, log?: Logger): RecordChange | undefined {
  const change = decodeChange(msg);
  if (change.op !== "skip") return change;
  log?.warn({ subject: msg.subject, seq: msg.seq, problem: change.reason }, "record message skipped");
  return undefined;
}

/** Follows the RECORDS stream into `backend` until stop(); the first consumer is open when this resolves. */
export async function followRecords(
  nc: NatsConnection,
  backend: SearchBackend,
  log: Logger,
  options: ReplicaOptions = {},
): Promise<Replica> {
  const follower = new RecordsFollower(nc, await jetstreamManager(nc), jetstream(nc), backend, log, options);
  await follower.start();
  return {
    caughtUp: (timeoutMs) => follower.caughtUp(timeoutMs),
    health: () => ({ ...follower.health }),
    stop: () => follower.stop(),
  };
}

/** The replica's supervisor: opens consumers, runs them one at a time, restarts them, and watches the stream's identity. */
class RecordsFollower implements ReplicaState {
  readonly health: ReplicaHealth = { following: false, restarts: 0, skipped: 0 };
  readonly clock: Clock;
  readonly decoder: URL | undefined;
  /** Whether the backend is in bulk mode: it outlives a failed consumer, so its end (the index build) is not lost. */
  bulk = false;
  stopping = false;
  private readonly waiters = new CatchUpWaiters();
  private readonly restarts: RestartSchedule;
  /** The open consumer, if any. */
  private messages: ConsumerMessages | undefined;
  private wakeFromBackoff: (() => void) | undefined;
  private deletions: Subscription | undefined;
  private statuses: (AsyncIterable<Status> & { stop?: () => void }) | undefined;
  private stopIdentityCheck: (() => void) | undefined;
  private supervised: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    readonly backend: SearchBackend,
    readonly log: Logger,
    private readonly options: ReplicaOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.decoder = options.decoder;
    this.restarts = new RestartSchedule(options.backoff ?? DEFAULT_BACKOFF, this.clock);
  }

  // The first consumer is opened before followRecords returns: a search actor that cannot reach the
  // stream at start fails to start. Later failures restart it, for as long as the actor runs.
  async start(): Promise<void> {
    this.messages = await this.open();
    this.health.following = true;
    this.watchStream();
    this.supervised = this.supervise().catch((error) => this.log.error({ err: error }, "search replica supervisor failed")); // not reached: every failure is caught in supervise
  }

  skip(subject: string, seq: number, reason: string): void {
    this.health.skipped++;
    this.health.lastSkipped = { subject, seq, reason };
    this.log.warn({ subject, seq, reason, skipped: this.health.skipped }, "record message skipped: it cannot be indexed");
  }

  appliedUpTo(seq: number): void {
    this.waiters.appliedUpTo(seq);
  }

  async endBulkLoad(seq: number): Promise<void> {
    this.log.info({ seq }, "search index caught up with the RECORDS stream; building its value indexes");
    const started = this.clock.now();
    await this.backend.bulkLoad?.(false);
    this.bulk = false;
    this.waiters.appliedUpTo(seq);
    this.log.info({ seq, seconds: Math.round((this.clock.now() - started) / 100) / 10 }, "search index value indexes built");
  }

  async caughtUp(timeoutMs = 60_000): Promise<void> {
    const target = (await this.jsm.streams.info(RECORDS_STREAM)).state.last_seq;
    if (!this.bulk && this.backend.appliedSeq() >= target) return;
    await new Promise<void>((resolve, reject) => {
      const cancel = this.clock.after(timeoutMs, () =>
        reject(new Error(`search index not caught up with sequence ${target} in ${timeoutMs} ms`)),
      );
      this.waiters.add(target, () => (cancel(), resolve()));
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.deletions?.unsubscribe();
    this.statuses?.stop?.();
    this.stopIdentityCheck?.();
    this.wakeFromBackoff?.();
    await this.messages?.close().catch(() => undefined);
    await this.supervised;
    if (this.bulk) await this.backend.bulkLoad?.(false);
  }

  /** Opens a consumer after the last applied sequence (rebuilding first when the stream is another one). */
  private async open(): Promise<ConsumerMessages> {
    const { backend } = this;
    const info = await ensureRecordsStream(this.jsm, this.options.storage);
    const stream = { identity: info.created, lastSeq: info.state.last_seq };
    if (needsRebuild({ identity: backend.streamIdentity(), appliedSeq: backend.appliedSeq() }, stream)) {
      this.log.info({ applied: backend.appliedSeq(), streamLast: stream.lastSeq }, "search index (re)built from the RECORDS stream");
      await backend.reset(stream.identity);
    }
    if (startsBulkLoad(backend.appliedSeq(), stream.lastSeq, this.bulk)) {
      await backend.bulkLoad?.(true);
      this.bulk = true;
    }
    const consumer = await this.js.consumers.get(RECORDS_STREAM, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: backend.appliedSeq() + 1,
    });
    return consumer.consume({ max_messages: BATCH * 2 });
  }

  /** Runs consumers one after the other until stop(), pausing with backoff after each failure. */
  private async supervise(): Promise<void> {
    const { backend, health, log } = this;
    while (!this.stopping) {
      const started = this.clock.now();
      try {
        if (!this.messages) {
          const opened = await this.open();
          if (this.stopping) {
            await opened.close().catch(() => undefined);
            break;
          }
          this.messages = opened;
          health.following = true;
          log.info({ seq: backend.appliedSeq(), restarts: health.restarts }, "search replica following the RECORDS stream again");
        }
        await new ConsumerRun(this, this.messages).run();
      } catch (error) {
        if (this.stopping) {
          log.error(
            { err: error, appliedSeq: backend.appliedSeq() },
            "search replica failed while stopping; the rest is applied on the next start",
          );
          break;
        }
        health.following = false;
        health.restarts++;
        health.lastError = errorText(error);
        const delay = this.restarts.next(started);
        log.error(
          { err: error, appliedSeq: backend.appliedSeq(), retryInMs: delay },
          "search replica stopped following the RECORDS stream; restarting after the last applied sequence",
        );
        await this.messages?.close().catch(() => undefined);
        this.messages = undefined;
        await this.pause(delay);
      }
    }
    health.following = false;
  }

  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const cancel = this.clock.after(ms, () => {
        this.wakeFromBackoff = undefined;
        resolve();
      });
      this.wakeFromBackoff = () => {
        cancel();
        this.wakeFromBackoff = undefined;
        resolve();
      };
    });
  }

  /**
   * Ends the consumer when the stream is deleted or replaced (the next opening rebuilds from the
   * stream there is then): at the deletion advisory, at every reconnect, and every IDENTITY_CHECK_MS,
   * as the advisory can be missed (docs/search.md#following-the-records-stream).
   */
  private watchStream(): void {
    const { backend, log } = this;
    this.deletions = onStreamDeleted(
      this.nc,
      () => {
        log.warn(
          { stream: RECORDS_STREAM, appliedSeq: backend.appliedSeq() },
          "the RECORDS stream was deleted; the index is rebuilt from the stream made in its place",
        );
        void recreateDelay().then(() => this.messages?.close().catch(() => undefined));
      },
      RECORDS_STREAM,
    );
    this.stopIdentityCheck = this.clock.every(IDENTITY_CHECK_MS, () => this.checkIdentitySafely());
    // Stopped with the replica: a `break` alone would leave the listener on the shared connection
    // until its next status event.
    const statuses = this.nc.status() as AsyncIterable<Status> & { stop?: () => void };
    this.statuses = statuses;
    void (async () => {
      for await (const s of statuses) {
        if (this.stopping) break;
        if (s.type === "reconnect") this.checkIdentitySafely();
      }
    })();
  }

  /** A check on a timer or an event: a failure is logged, never left unheard (Bun exits on an unheard rejection). */
  private checkIdentitySafely(): void {
    this.checkIdentity().catch((error) =>
      this.log.error({ err: error, stream: RECORDS_STREAM }, "checking the RECORDS stream's identity failed"),
    );
  }

  private async checkIdentity(): Promise<void> {
    const info = await streamInfoIfAny(this.jsm, RECORDS_STREAM).catch(() => null);
    // Not a word to the index once stopping (it may be closed), nor when the check could not tell.
    if (info === null || this.stopping || !streamReplaced(info, this.backend.streamIdentity())) return;
    this.log.warn(
      { stream: RECORDS_STREAM, appliedSeq: this.backend.appliedSeq() },
      "the RECORDS stream is not the one the index was built from; the index is rebuilt from the stream there is now",
    );
    await this.messages?.close().catch(() => undefined);
  }
}
