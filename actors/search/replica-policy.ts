/**
 * The replica's decisions, apart from NATS and the index: when a batch is written, when the index is
 * rebuilt or bulk loaded, when a stream is another one, how long to wait before a new consumer, and
 * which callers are caught up. docs/search.md#following-the-records-stream tells the whole loop.
 */
import type { Clock } from "../../platform/clock.ts";

/** Messages written in one index transaction at most. */
export const BATCH = 2000;
/** A backlog this long is loaded in bulk mode (see SqliteBackend.bulkLoad). */
export const BULK_BACKLOG = 20_000;
/** How long a partial batch waits for more messages before it is written. */
export const FLUSH_AFTER_MS = 5;
/** A consumer that ran this long before failing starts its backoff over. */
export const HEALTHY_RUN_MS = 30_000;
/** How often the stream followed is checked to be the index's, for a deletion whose advisory was missed. */
export const IDENTITY_CHECK_MS = 5_000;

/** How long to wait before restarting a failed consumer: doubles from `firstMs` up to `maxMs`. */
export type RestartBackoff = { firstMs: number; maxMs: number };
export const DEFAULT_BACKOFF: RestartBackoff = { firstMs: 200, maxMs: 30_000 };

/** What the index was built from, and how far it got. */
export type IndexPosition = { identity: string | undefined; appliedSeq: number };
/** The stream as its info tells it: its identity (creation time) and last sequence. */
export type StreamPosition = { identity: string; lastSeq: number };

/**
 * Whether the buffered messages are written now rather than when the flush timer fires: a full batch,
 * or the last message the consumer knows of (a quiet stream's writes are searchable at once).
 */
export function flushNow(buffered: number, pending: number, batch = BATCH): boolean {
  return buffered >= batch || pending === 0;
}

/** Whether the index must be emptied before following: another stream (recreated), or one behind the index (purged). */
export function needsRebuild(index: IndexPosition, stream: StreamPosition): boolean {
  return index.identity !== stream.identity || index.appliedSeq > stream.lastSeq;
}

/** Whether what is left to apply is long enough for a bulk load (indexes built once at its end). */
export function startsBulkLoad(appliedSeq: number, streamLastSeq: number, inBulk: boolean, backlog = BULK_BACKLOG): boolean {
  return !inBulk && streamLastSeq - appliedSeq >= backlog;
}

/**
 * Whether the stream found now is not the one the index follows: gone (undefined) or made again
 * (another identity). `null` is a check that could not tell (JetStream unreachable): nothing is done.
 */
export function streamReplaced(found: { created: string } | undefined | null, indexIdentity: string | undefined): boolean {
  if (found === null) return false;
  return found?.created !== indexIdentity;
}

/** The pause before each new consumer: doubling per failure, and starting over after a consumer that ran long enough. */
export class RestartSchedule {
  private attempt = 0;

  constructor(
    private readonly backoff: RestartBackoff,
    private readonly clock: Pick<Clock, "now">,
    private readonly healthyRunMs = HEALTHY_RUN_MS,
  ) {}

  /** The pause before the consumer that replaces one started at `startedAt` (a clock time) and failed now. */
  next(startedAt: number): number {
    if (this.clock.now() - startedAt >= this.healthyRunMs) this.attempt = 0;
    return Math.min(this.backoff.maxMs, this.backoff.firstMs * 2 ** this.attempt++);
  }
}

/** Callers of caughtUp(), each told once the index has applied its target sequence. */
export class CatchUpWaiters {
  private readonly waiting: Array<{ seq: number; resolve: () => void }> = [];

  add(seq: number, resolve: () => void): void {
    this.waiting.push({ seq, resolve });
  }

  /** Tells every caller whose target is at or below `applied`. */
  appliedUpTo(applied: number): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      if (this.waiting[i]!.seq <= applied) this.waiting.splice(i, 1)[0]!.resolve();
    }
  }

  get size(): number {
    return this.waiting.length;
  }
}

/**
 * Whether an error of the index write is about the record written (skip it) rather than the file or
 * the machine (restart, skip nothing): SQLite's constraint, size and type errors, or a TypeError or
 * RangeError from turning the record into rows. Anything else is the environment's.
 */
export function isRecordError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && code.startsWith("SQLITE_")) return /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code);
  return error instanceof TypeError || error instanceof RangeError;
}
