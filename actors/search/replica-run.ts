/**
 * One consumer's life in the replica: messages are decoded (on this thread, or by the decode worker
 * during a bulk load), batched and written to the index, until the consumer is closed or fails.
 */
import type { ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";
import type { SearchBackend } from "./backend.ts";
import type { Clock } from "../../platform/clock.ts";
import { decodeRaw, isDeletion, type RawMessage } from "./decode.ts";
import { DecodePipeline, type DecodedBatch } from "./decode-pipeline.ts";
import { applyBatch, applyPrepared, type ApplyTarget, type Buffered } from "./replica-apply.ts";
import { FLUSH_AFTER_MS, flushNow } from "./replica-policy.ts";

/** What outlives one consumer: the index, its bulk-load state, the counts and the callers waiting. */
export interface ReplicaState extends ApplyTarget {
  readonly backend: SearchBackend;
  readonly log: Logger;
  readonly clock: Clock;
  /** The decode worker's module (tests point it elsewhere). */
  readonly decoder: URL | undefined;
  /** Whether the backend is in bulk mode: what is applied meanwhile may not be searchable yet. */
  readonly bulk: boolean;
  readonly stopping: boolean;
  /** Tells the callers waiting that everything up to `seq` is searchable. */
  appliedUpTo(seq: number): void;
  /** Ends the bulk load after `seq` (the value indexes are built). */
  endBulkLoad(seq: number): Promise<void>;
}

export class ConsumerRun {
  /** Changes decoded on this thread and not written yet. */
  private buffer: Buffered[] = [];
  /** The last message received (applied, or on its way through the decode worker). */
  private lastSeq: number;
  private cancelFlush: (() => void) | undefined;
  private failure: { error: unknown } | undefined;
  /** The decode worker of a bulk load, while one runs. */
  private decoding: DecodePipeline | undefined;
  /** Set when this consumer's life is over: a flush timer firing later must not apply (or mark as applied) anything. */
  private ended = false;

  constructor(
    private readonly state: ReplicaState,
    private readonly messages: ConsumerMessages,
  ) {
    this.lastSeq = state.backend.appliedSeq();
  }

  /** Resolves when the consumer was closed by stop(), rejects on any failure. */
  async run(): Promise<void> {
    await this.startDecoding();
    try {
      for await (const msg of this.messages) {
        if (this.failure) break;
        this.receive(msg);
        // Waits while the decode worker or the index is behind, after every message, so batches sent by
        // the flush timer count too. Inline: an await per message would cost a tick even when nothing waits.
        const room = this.decoding?.room();
        if (room) await room;
        this.failIfDecoderDied();
        const behind = this.state.backend.backpressure?.();
        if (behind) await behind;
        if (this.failure) break;
        if (this.state.bulk && msg.info.pending === 0) {
          await this.finishDecoding();
          if (this.failure) break;
          // Queries are answered while the indexes build; messages arriving meanwhile wait in the consumer.
          await this.state.endBulkLoad(this.lastSeq);
        }
      }
      this.cancelTimer();
      if (this.failure) throw this.failure.error;
      this.flush();
      if (this.decoding) await this.decoding.drained();
      this.failIfDecoderDied();
      if (this.failure) throw (this.failure as { error: unknown }).error;
    } finally {
      // What the worker still held is dropped: the next consumer starts after what was applied. A timer
      // flush after this point would have marked `lastSeq` applied with those messages never written.
      this.ended = true;
      this.cancelTimer();
      this.stopDecoding();
    }
    if (!this.state.stopping) throw new Error("the RECORDS consumer ended");
  }

  /** Ends this consumer's life with `error` (the first one wins). */
  private fail(error: unknown): void {
    this.failure ??= { error };
    this.messages.close().catch(() => undefined);
  }

  private receive(msg: JsMsg): void {
    const raw: RawMessage = {
      subject: msg.subject,
      data: msg.data,
      deleted: isDeletion(msg.headers),
      seq: msg.seq,
      timestampMs: Math.floor(msg.info.timestampNanos / 1e6),
    };
    if (this.decoding) this.decoding.add(raw);
    else {
      const change = decodeRaw(raw);
      if (change.op === "skip") this.state.skip(msg.subject, msg.seq, change.reason);
      else this.buffer.push({ change, seq: msg.seq, subject: msg.subject });
    }
    this.lastSeq = msg.seq;
    if (flushNow(this.decoding ? this.decoding.size : this.buffer.length, msg.info.pending)) this.flush();
    else this.cancelFlush ??= this.state.clock.after(FLUSH_AFTER_MS, this.flushFromTimer);
  }

  private flush(): void {
    this.cancelTimer();
    if (this.ended) return;
    if (this.decoding) {
      this.decoding.send(this.lastSeq);
      return;
    }
    if (applyBatch(this.state, this.buffer, this.lastSeq)) this.applied(this.lastSeq);
    this.buffer = [];
  }

  // A timer callback must not throw (Bun exits): the failure ends this consumer instead.
  private readonly flushFromTimer = () => {
    try {
      this.flush();
    } catch (error) {
      this.fail(error);
    }
  };

  private cancelTimer(): void {
    this.cancelFlush?.();
    this.cancelFlush = undefined;
  }

  /** In a bulk load what was applied may not be searchable yet (the lookup file is written by a worker): waiters are told once it ends. */
  private applied(seq: number): void {
    if (!this.state.bulk) this.state.appliedUpTo(seq);
  }

  /** A bulk load decodes and prepares records in a worker while this thread writes the previous batch. */
  private async startDecoding(): Promise<void> {
    if (!this.state.bulk || !this.state.backend.takesPrepared) return;
    const started = await DecodePipeline.start(this.onDecoded, this.state.decoder);
    if (typeof started === "string")
      this.state.log.warn({ problem: started }, "the decode worker did not start; decoding on the actor's thread");
    else this.decoding = started;
  }

  private readonly onDecoded = (batch: DecodedBatch) => {
    const items: Buffered[] = [];
    batch.changes.forEach((change, i) => {
      const { subject, seq } = batch.raw[i]!;
      if (change.op === "skip") this.state.skip(subject, seq, change.reason);
      else items.push({ change, seq, subject });
    });
    try {
      if (!this.failure && applyPrepared(this.state, items, batch)) this.applied(batch.upTo);
    } catch (error) {
      this.fail(error);
    }
  };

  /** Waits for every batch out at the decode worker, then ends it (the rest of the stream is decoded here). */
  private async finishDecoding(): Promise<void> {
    if (this.decoding) await this.decoding.drained();
    this.failIfDecoderDied();
    this.stopDecoding();
  }

  private stopDecoding(): void {
    this.decoding?.terminate();
    this.decoding = undefined;
  }

  // A decode worker that died took what it held with it: the consumer restarts after what was applied.
  private failIfDecoderDied(): void {
    if (this.decoding?.failure !== undefined) this.fail(new Error(`the decode worker failed: ${this.decoding.failure}`));
  }
}
