/**
 * Single-key reads of a bucket answered from memory while the bucket's republished writes (write-notes.ts) say the
 * held value is still the key's last: a write to a key drops it here before its acknowledgement can cause a read, so
 * a read after any acknowledged write goes to the bucket. Without notes (a cluster, a bucket made before they were set,
 * a reconnect) every read goes to the bucket (docs/operations.md#memory-views).
 */
import { Bucket, type KV } from "@nats-io/kv";
import type { NatsConnection, Subscription } from "@nats-io/nats-core";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import { isLive, type Versioned } from "./kv.ts";
import { connectionSession, NOTES_TRUSTED_MS, notesOrdered, notesSubject } from "./write-notes.ts";
import { onStreamDeleted } from "./recreate.ts";

export type CachedKeysLimits = {
  /** Most keys held (absent ones too). */
  entries: number;
  /** Most bytes of values held. */
  bytes: number;
};

/**
 * A key's last value as read (undefined: no live value), its revision and when it was written (epoch ms); the value
 * parsed once, on its first read, and frozen: every later read shares it, so no reader may change it.
 */
type Held = { bytes: Uint8Array | undefined; revision: number; written: number; parsed?: { value: unknown } };

const decoder = new TextDecoder();

/** peek()'s answer when memory cannot answer at once. */
export const NOT_HELD: unique symbol = Symbol("not held");

export class CachedKeys {
  private readonly held: BoundedCache<string, Held>;
  /** Reads of the bucket under way, by key: a note for the key while one runs makes its result unfit to keep. */
  private readonly loading = new Map<string, Set<{ noted: boolean }>>();
  private notes?: Subscription;
  /** Subscribing to the notes was refused: not tried again. */
  private denied = false;
  /** The server's word that the stream was deleted: no write, so no note; heard at once when heard at all. */
  private readonly deletions: Subscription;
  private prefix = "";
  /** The connection session the held values were read in; any other empties the memory (notes may have been missed). */
  private session?: object;
  /** The stream's creation and first sequence at the last look, and when that look was sent. */
  private created: string | undefined;
  /** When the stream was last looked at (performance.now(): a clock that does not step). */
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** Bumped by forgetAll(): a load that began before is not kept. */
  private clears = 0;
  private checking?: Promise<boolean>;
  private maxAgeMs = 0;

  constructor(
    private readonly kv: KV,
    private readonly nc: NatsConnection,
    limits: CachedKeysLimits,
  ) {
    if (!(kv instanceof Bucket)) throw new TypeError("CachedKeys reads buckets opened with Kvm");
    this.held = new BoundedCache({ max: limits.entries, maxWeight: limits.bytes });
    this.deletions = onStreamDeleted(
      nc,
      () => {
        this.forgetAll();
        this.checkedAt = Number.NEGATIVE_INFINITY;
      },
      kv.stream,
    );
  }

  /** Drops everything held, and the loads under way: each may straddle what made the memory forget. */
  private forgetAll(): void {
    this.held.clear();
    this.clears++;
  }

  /** Drops what is held of `key`: a compare-and-set that lost to another writer read it stale (a bucket made again). */
  forget(key: string): void {
    this.held.delete(key);
  }

  /**
   * The key's last live value, parsed, with its revision; from memory when the notes vouch for it. The value is
   * deeply frozen (shared by the reads of one held entry): a writer builds a new value, as the stores' updates do.
   */
  async read<T>(key: string): Promise<Versioned<T> | undefined> {
    return this.versioned(await this.lookup(key));
  }

  /**
   * read()'s answer when memory holds the key and may answer without a look at the stream; NOT_HELD otherwise. A read
   * from memory waits on nothing, so it needs none of the machinery that a read sent to the bucket does (recreate.ts).
   */
  peek<T>(key: string): Versioned<T> | undefined | typeof NOT_HELD {
    if (!this.answersNow()) return NOT_HELD;
    const held = this.held.get(key);
    if (!held || (this.maxAgeMs !== 0 && held.written + this.maxAgeMs <= Date.now())) return NOT_HELD;
    return this.versioned(held);
  }

  private versioned<T>(held: Held): Versioned<T> | undefined {
    if (!held.bytes) return undefined;
    held.parsed ??= { value: deepFreeze(JSON.parse(decoder.decode(held.bytes))) };
    return { value: held.parsed.value as T, revision: held.revision };
  }

  /** usable() without its waits: true exactly when usable() would answer true at once. */
  private answersNow(): boolean {
    const session = connectionSession(this.nc);
    return (
      session !== undefined &&
      session === this.session &&
      this.notes !== undefined &&
      notesOrdered(this.nc) &&
      performance.now() - this.checkedAt < NOTES_TRUSTED_MS
    );
  }

  get size(): number {
    return this.held.size;
  }

  stop(): void {
    this.deletions.unsubscribe();
    this.notes?.unsubscribe();
    this.notes = undefined;
    this.forgetAll();
  }

  private async lookup(key: string): Promise<Held> {
    if (!(await this.usable())) return this.load(key, false);
    const held = this.held.get(key);
    if (held && (this.maxAgeMs === 0 || held.written + this.maxAgeMs > Date.now())) return held;
    return this.load(key, true);
  }

  /** Whether memory may answer: notes heard on an unbroken connection, the stream looked at within the trust window. */
  private async usable(): Promise<boolean> {
    if (!notesOrdered(this.nc)) return false;
    const session = connectionSession(this.nc);
    if (!session) return false;
    if (session !== this.session) {
      this.forgetAll();
      this.session = session;
      this.checkedAt = Number.NEGATIVE_INFINITY;
    }
    if (performance.now() - this.checkedAt >= NOTES_TRUSTED_MS) {
      const checked = await (this.checking ??= this.check()
        .then(() => true)
        .catch(() => {
          // Unknown what changed: nothing held is kept, and the stream is asked again a window later, not per read.
          this.forgetAll();
          this.checkedAt = performance.now();
          return false;
        })
        .finally(() => (this.checking = undefined)));
      if (!checked) return false;
    }
    return this.notes !== undefined && this.session === connectionSession(this.nc);
  }

  /** Looks at the stream: notes set up, a stream made again or purged (no write, so no note) forgotten. */
  private async check(): Promise<void> {
    const sentAt = performance.now();
    const { streamInfo } = await this.kv.status();
    const subject = this.denied ? undefined : notesSubject(streamInfo.config);
    if (!subject) {
      this.notes?.unsubscribe();
      this.notes = undefined;
      this.forgetAll();
      // Asked again a window later (a bucket made again may have gained the setting), not on every read.
      this.checkedAt = sentAt;
      return;
    }
    if (!this.notes) {
      this.prefix = subject.slice(0, -1);
      this.notes = this.nc.subscribe(subject, {
        callback: (error, msg) => {
          // Not allowed to subscribe there: nothing vouches, every read goes to the bucket.
          if (error) {
            this.denied = true;
            this.notes = undefined;
            this.forgetAll();
          } else this.noted(msg.subject.slice(this.prefix.length));
        },
      });
      // Held values predate the subscription; the next check (after this one's trust window) vouches for the rest.
      this.forgetAll();
      return;
    }
    if (this.created !== streamInfo.created) this.forgetAll();
    else {
      const first = streamInfo.state.first_seq;
      for (const [key, held] of this.held.snapshot()) if (held.revision > 0 && held.revision < first) this.held.delete(key);
    }
    this.created = streamInfo.created;
    this.maxAgeMs = Math.floor((streamInfo.config.max_age ?? 0) / 1e6);
    this.checkedAt = sentAt;
  }

  private noted(key: string): void {
    this.held.delete(key);
    for (const load of this.loading.get(key) ?? []) load.noted = true;
  }

  private async load(key: string, keep: boolean): Promise<Held> {
    const load = { noted: false };
    const session = connectionSession(this.nc);
    const clears = this.clears;
    let loads = this.loading.get(key);
    if (keep) {
      if (!loads) this.loading.set(key, (loads = new Set()));
      loads.add(load);
    }
    try {
      const entry = await this.kv.get(key);
      // A delete marker is held too: its revision tells a purge below it, its time the key's age.
      const held: Held = {
        bytes: isLive(entry) ? entry.value : undefined,
        revision: entry?.revision ?? 0,
        written: entry?.created.getTime() ?? Date.now(),
      };
      if (keep && !load.noted && clears === this.clears && session === this.session && session === connectionSession(this.nc))
        this.held.set(key, held, held.bytes?.length ?? 0);
      return held;
    } finally {
      if (loads?.delete(load) && loads.size === 0 && this.loading.get(key) === loads) this.loading.delete(key);
    }
  }
}

/** Freezes a parsed JSON value and everything in it (plain objects and arrays only). */
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
