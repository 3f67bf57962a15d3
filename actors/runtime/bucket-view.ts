/**
 * An actor's in-memory view of a KV bucket, kept by a watch, with read-your-writes across processes:
 * `fresh()` resolves once the view holds every write acknowledged before the call, in any process
 * (docs/operations.md#memory-views). What the view keeps is the owner's: it gets each entry in order.
 */
import { Bucket, type KV, type KvEntry } from "@nats-io/kv";
import type { StreamConfig } from "@nats-io/jetstream";
import type { NatsConnection, Subscription } from "@nats-io/nats-core";
import { connectionSession, NOTES_TRUSTED_MS, notedSequence, notesOrdered, notesSubject } from "./write-notes.ts";
import type { Logger } from "../../platform/logger.ts";
import { within } from "../../platform/clock.ts";
import { followBucket, type FollowedBucket, type FollowOptions } from "./follow.ts";

export type BucketViewOptions = {
  /** What is viewed, in logs and errors (e.g. "subscriptions"). */
  what: string;
  /** Each entry in revision order; throwing logs and skips it (its revision still counts as seen). */
  apply(entry: KvEntry): void;
  /** The bucket was made again: forget everything, its entries come again from revision 1. */
  reset(): void;
  /** Key filter and start (followBucket's); every key's last value by default. */
  key?: string;
  from?: FollowOptions["from"];
  /**
   * Hears the server's deletion advisories, so a bucket made again is noticed at once, and the writes the bucket's
   * stream republishes (republishedWrites), so a read needs no look while the server is alone.
   */
  nc?: NatsConnection;
  checkEveryMs?: number;
  /**
   * Writes a key no reader of the view cares about and returns its revision. For buckets whose last
   * message can vanish unseen (max age): the view then waits for this write instead of that message.
   */
  barrier?: () => Promise<number>;
  /**
   * The bucket's last message (directLastMessage): a cheaper look than the stream's info, for fresh().
   * Without it every look reads the stream's info.
   */
  lastMessage?: () => Promise<LastMessage | undefined>;
  /**
   * Another bucket's republished writes (write-notes.ts), after each of which the next read looks at this bucket: for entries
   * that go stale by writes elsewhere in a way no write here tells (reporting's results after a purge of their bucket).
   */
  looksAfterWritesTo?: string;
};

/**
 * At a look's sending: the connection's session when the notes are heard (the look then vouches for them), the related
 * writes heard, the bucket's generation, and when (performance.now()).
 */
type LookMark = { session: object | undefined; related: number; generation: number; at: number };

/** A message's stream sequence and time (epoch ms). */
export type LastMessage = { seq: number; time: number };

/**
 * The last message of `kv` (of `key`, a key or pattern, when given) by a direct get: served by the stream
 * itself, not JetStream's API queue, and it names the last message the stream still holds, which a watch delivers.
 */
export function directLastMessage(nc: NatsConnection, kv: KV, key = ">"): () => Promise<LastMessage | undefined> {
  if (!(kv instanceof Bucket)) throw new TypeError("directLastMessage reads buckets opened with Kvm");
  const subject = `$JS.API.DIRECT.GET.${kv.stream}`;
  const body = JSON.stringify({ last_by_subj: kv.fullKeyName(kv.encodeKey(key)) });
  return async () => {
    const msg = await nc.request(subject, body, { timeout: 2_000 });
    const seq = msg.headers?.get("Nats-Sequence");
    if (!seq) {
      if (msg.headers?.code === 404) return undefined;
      throw new Error(`direct get on ${kv.stream}: ${msg.headers?.code ?? "?"} ${msg.headers?.description ?? ""}`);
    }
    // RFC 3339 with nanoseconds; Date reads milliseconds.
    const stamp = (msg.headers?.get("Nats-Time-Stamp") ?? "").replace(/(\.\d{3})\d*/, "$1");
    return { seq: Number(seq), time: Date.parse(stamp) };
  };
}

/** How long fresh() waits for the watch before it fails (a caller is answered, never hung). */
export const FRESH_WAIT_MS = 5_000;
/** After this long without reaching the bucket's last revision, the watch is opened again (and a barrier written, if any). */
const REOPEN_AFTER_MS = 1_000;

export class BucketView {
  /** The newest revision the watch delivered, and its time (epoch ms). */
  private revision = 0;
  private revisionTime = 0;
  private created: string | undefined;
  private waiters: Array<{ revision: number; wake: () => void }> = [];
  private watch?: FollowedBucket;
  /** The look the callers of this turn of the event loop share (sent at its end). */
  private gathering?: Promise<void>;
  /** Direct gets are allowed on the stream (off on clusters, where a replica may answer behind its leader). */
  private direct = false;
  /** Epoch ms at which the last completed look was sent (for freshAsOf). */
  private syncedAt = 0;
  /** The stream's republished writes, and the newest sequence heard there. */
  private notes?: Subscription;
  private noted = 0;
  /** Subscribing to the notes was refused: not tried again. */
  private denied = false;
  /** The connection session of the last look sent while hearing the notes: reads may skip looks while it holds. */
  private vouchedSession?: object;
  /** When the newest note was heard, and the last vouching look sent (performance.now(): a clock that does not step). */
  private notedAt = 0;
  private vouchedAt = 0;
  /** The revisions the watch delivered last (a ring): a note it did not deliver, below what it passed, tells a bucket made again. */
  private readonly delivered = new Array<number>(64).fill(0);
  private deliveredAt = 0;
  /** Bumped when the bucket is made again: a look sent before vouches for nothing. */
  private generation = 0;
  /** Writes heard to `looksAfterWritesTo`: a look vouches only when none came while it ran. */
  private related = 0;
  private relatedNotes?: Subscription;

  constructor(
    private readonly kv: Pick<KV, "watch" | "status">,
    private readonly options: BucketViewOptions,
    private readonly log: Logger,
  ) {}

  /** Follows the bucket until stop(); resolves once the view holds what the bucket held at the start. */
  async start(waitMs = 60_000): Promise<void> {
    const status = await this.kv.status();
    this.created = status.streamInfo.created;
    this.direct = status.streamInfo.config.allow_direct === true;
    this.listen(status.streamInfo.config);
    const { nc, looksAfterWritesTo } = this.options;
    if (nc && looksAfterWritesTo)
      this.relatedNotes = nc.subscribe(looksAfterWritesTo, {
        callback: (error) => {
          // Refused, the related writes are unheard: nothing vouches any more.
          if (error) return this.deaf(error);
          this.related++;
          this.vouchedSession = undefined;
        },
      });
    this.watch = await followBucket(
      this.kv,
      {
        what: this.options.what,
        key: this.options.key,
        from: this.options.from,
        nc: this.options.nc,
        checkEveryMs: this.options.checkEveryMs,
        onRecreated: (created) => {
          this.revision = 0;
          this.revisionTime = 0;
          this.created = created;
          this.syncedAt = 0;
          this.noted = 0;
          this.notedAt = 0;
          this.vouchedSession = undefined;
          // A look sent before this vouches for nothing of the new bucket.
          this.generation++;
          this.options.reset();
        },
      },
      (entry) => this.see(entry),
      this.log,
    );
    try {
      await this.lookAtStream(waitMs);
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.relatedNotes?.unsubscribe();
    this.notes?.unsubscribe();
    this.notes = undefined;
    const stopping = this.watch?.stop();
    for (const w of this.waiters.splice(0)) w.wake();
    await stopping;
  }

  /**
   * Resolves once the view holds every write acknowledged before this call. Callers of one turn of the event loop
   * share one look at the bucket, sent after each of them arrived; looks of later turns do not wait for it.
   */
  fresh(waitMs = FRESH_WAIT_MS): Promise<void> {
    if (this.vouched()) {
      // Every write acknowledged before this call was republished to this connection before its acknowledgement.
      if (this.revision >= this.noted) return RESOLVED;
      const noted = this.noted;
      return within(
        this.reach(noted, Math.min(waitMs, REOPEN_AFTER_MS)).catch(() => this.sharedLook(waitMs)),
        waitMs + GRACE_MS,
        `the ${this.options.what} view did not catch up`,
      );
    }
    // Each caller waits its own time at most: a look's requests to JetStream have longer timeouts of their own.
    return within(this.sharedLook(waitMs), waitMs + GRACE_MS, `the ${this.options.what} view did not catch up`);
  }

  /** fresh() without its waits: true exactly when fresh() would resolve at once, so a read may answer without a promise. */
  freshNow(): boolean {
    return this.vouched() && this.revision >= this.noted;
  }

  /**
   * How many writes to `looksAfterWritesTo` were heard, while the notes vouch that no other was acknowledged (else
   * undefined): the same count at two moments means no such write was acknowledged between them.
   */
  relatedWritesHeard(): number | undefined {
    return this.vouched() ? this.related : undefined;
  }

  /** A look sent at the end of this turn of the event loop, shared by every caller of the turn. */
  private sharedLook(waitMs: number): Promise<void> {
    this.gathering ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      this.gathering = undefined;
      return this.look(waitMs);
    });
    return this.gathering;
  }

  /**
   * Resolves once the view holds every write made before `time` (epoch ms, less a margin for clocks of other machines).
   * Always reads the stream's info, so a bucket made again unheard is noticed at once.
   */
  async freshAsOf(time: number, waitMs = FRESH_WAIT_MS): Promise<void> {
    if (this.syncedAt - CLOCK_MARGIN_MS >= time) return;
    return within(this.lookAtStream(waitMs), waitMs + GRACE_MS, `the ${this.options.what} view did not catch up`);
  }

  /**
   * The last message by a direct get when the view has one: the view is fresh when it holds that very message (same
   * sequence and time), or once the watch reaches it. Anything else (fewer messages, a bucket made again, a watch that
   * does not get there) is settled by the stream's info.
   */
  private async look(waitMs: number): Promise<void> {
    const { lastMessage } = this.options;
    if (!lastMessage || !this.direct) return this.lookAtStream(waitMs);
    const sentAt = Date.now();
    const mark = this.mark();
    const last = await lastMessage().catch(() => null);
    // No message, and none ever seen: nothing to hold, nothing held.
    if (last === undefined && this.revision === 0) return this.synced(sentAt, mark, 0);
    if (!last) return this.lookAtStream(waitMs);
    if (last.seq < this.revision || (last.seq === this.revision && Math.abs(last.time - this.revisionTime) > 1)) {
      return this.lookAtStream(waitMs);
    }
    try {
      await this.reach(last.seq, Math.min(waitMs, REOPEN_AFTER_MS));
    } catch {
      return this.lookAtStream(waitMs);
    }
    this.synced(sentAt, mark, last.seq);
  }

  private async lookAtStream(waitMs: number): Promise<void> {
    const sentAt = Date.now();
    const mark = this.mark();
    const status = await this.kv.status();
    this.direct = status.streamInfo.config.allow_direct === true;
    this.listen(status.streamInfo.config);
    const until = Date.now() + waitMs;
    // The view still holds an older bucket's entries: wait for it to start over (a missed advisory is made up by looking now).
    const stale = () => this.created !== undefined && this.created !== status.streamInfo.created;
    if (stale()) {
      void this.watch?.recheck();
      while (stale()) {
        if (Date.now() > until) throw new Error(`the ${this.options.what} bucket was made again and the view has not started over yet`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const target = status.streamInfo.state.last_seq;
    if (this.revision < target) {
      try {
        await this.reach(target, Math.min(waitMs, REOPEN_AFTER_MS));
      } catch {
        // A watch whose server was lost delivers nothing until nats.js misses its heartbeats: open it again now.
        this.watch?.reopen();
        const { barrier } = this.options;
        const left = Math.max(0, until - Date.now());
        // The bucket's last message may be one no watch delivers (removed from the stream): a barrier write is one.
        await this.reach(barrier ? await barrier() : target, left);
      }
    }
    this.synced(sentAt, mark, target);
  }

  /** A look sent at `sentAt` completed: the view held every write acknowledged before it. */
  private synced(sentAt: number, mark: LookMark, last: number): void {
    this.syncedAt = Math.max(this.syncedAt, sentAt);
    if (mark.generation !== this.generation) return;
    if (mark.session && this.notes && mark.related === this.related) {
      // Vouching again after a lapse of the session (a reconnect): writes acknowledged meanwhile were never heard, so
      // the count moves on, and work begun before the lapse no longer passes for current (reporting's shared misses).
      if (this.vouchedSession !== mark.session) this.related++;
      this.vouchedSession = mark.session;
      this.vouchedAt = Math.max(this.vouchedAt, mark.at);
    }
    // A note heard before the look was sent names a write the stream had stored by then: one beyond what the look saw was
    // not this stream's (anyone in the account may publish there), and must not hold every read until it falls back.
    if (this.notedAt < mark.at && this.noted > Math.max(last, this.revision)) this.noted = Math.max(this.revision, last);
  }

  /** What a look sent now compares against when it completes (LookMark). */
  private mark(): LookMark {
    const session = this.notes && this.options.nc ? connectionSession(this.options.nc) : undefined;
    return { session, related: this.related, generation: this.generation, at: performance.now() };
  }

  /**
   * Whether the republished writes tell all a look would: heard since a recent look on an unbroken connection, to a
   * server with no cluster. The stream hands a republished write to this connection before its acknowledgement leaves,
   * so a write acknowledged anywhere was heard here before any request it could have caused; across a cluster's routes
   * that order does not hold.
   */
  private vouched(): boolean {
    const { nc } = this.options;
    // Notes are heard only through `nc`.
    return (
      nc !== undefined &&
      this.notes !== undefined &&
      this.vouchedSession !== undefined &&
      this.vouchedSession === connectionSession(nc) &&
      performance.now() - this.vouchedAt < NOTES_TRUSTED_MS &&
      notesOrdered(nc)
    );
  }

  /** Hears the writes the stream republishes, when it does so. */
  private listen(config: StreamConfig): void {
    const { nc } = this.options;
    const subject = nc && !this.denied && notesSubject(config, this.options.key);
    if (!subject) {
      this.notes?.unsubscribe();
      this.notes = undefined;
      return;
    }
    if (this.notes) return;
    this.notes = nc.subscribe(subject, {
      callback: (error, msg) => {
        if (error) return this.deaf(error);
        const seq = notedSequence(msg.headers);
        // One stream's notes come in rising order, each of a message the watch delivers just before or after it: a lower
        // one, or one at or below what the watch passed that it never delivered, is of a bucket made again (or forged).
        if (seq <= this.noted || (seq <= this.revision && !this.delivered.includes(seq))) this.vouchedSession = undefined;
        if (seq > this.noted) {
          this.noted = seq;
          this.notedAt = performance.now();
        }
      },
    });
    this.vouchedSession = undefined;
  }

  /**
   * The notes' subscription ended with an error (a user not allowed to subscribe there): nothing vouches any more, every
   * read looks. Heard before any look sent after the subscription answers, so no look vouches for notes never heard.
   */
  private deaf(error: Error): void {
    this.denied = true;
    this.notes?.unsubscribe();
    this.notes = undefined;
    this.vouchedSession = undefined;
    this.log.warn({ err: error, view: this.options.what }, "cannot hear the bucket's republished writes; every read looks at the bucket");
  }

  private see(entry: KvEntry): void {
    this.delivered[this.deliveredAt++ % this.delivered.length] = entry.revision;
    try {
      this.options.apply(entry);
    } finally {
      if (entry.revision > this.revision) {
        this.revision = entry.revision;
        this.revisionTime = entry.created.getTime();
      }
      if (this.waiters.length) {
        const ready = this.waiters.filter((w) => w.revision <= this.revision);
        this.waiters = this.waiters.filter((w) => w.revision > this.revision);
        for (const w of ready) w.wake();
      }
    }
  }

  /** Waits until the watch has passed `revision`; rejects after `waitMs` (a watch that stopped must not hang its callers). */
  private reach(revision: number, waitMs: number): Promise<void> {
    if (this.revision >= revision) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        revision,
        wake: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`the ${this.options.what} watch did not reach revision ${revision} within ${waitMs} ms (at ${this.revision})`));
      }, waitMs);
      this.waiters.push(waiter);
    });
  }
}

const RESOLVED = Promise.resolve();

/** Beyond its wait, a look's own timeouts get this long to report what they waited for. */
const GRACE_MS = 250;

/** Another machine's clock may be this far ahead: a write stamped up to this late still counts (dispatcher events). */
const CLOCK_MARGIN_MS = 250;
