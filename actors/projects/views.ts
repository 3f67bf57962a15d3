/**
 * The projects actor's memory views (docs/content.md#memory-views): the newest value of each key of a bucket, kept by a
 * watch (BucketView) and bounded in bytes. A read after `fresh()` sees every write acknowledged before it, in any
 * process; what the view no longer holds (dropped by its bound, or close to the bucket's max age) is read from the bucket.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import type { KV, KvEntry } from "@nats-io/kv";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { Logger } from "../../platform/logger.ts";
import { BucketView, directLastMessage } from "../runtime/bucket-view.ts";
import { encodeJson, type Versioned } from "../runtime/kv.ts";

/** How long a read waits for a view before it reads the bucket instead (a watch on a lost cluster server). */
export const VIEW_WAIT_MS = 1_500;

/** A key the view may hold or not: read the bucket. */
export const UNKNOWN = Symbol("unknown");

export type KeyViewOptions = {
  /** What is viewed, in logs and errors. */
  what: string;
  /** Most stored bytes held (values as written, the oldest dropped first). */
  maxBytes: number;
  /** The bucket's max age: an entry is not answered from memory within EXPIRY_MARGIN_MS of it. */
  ttlMs?: number;
  /**
   * A key no reader asks for, written when the bucket's last message may have expired unseen (max age): the view then
   * waits for this write instead.
   */
  barrierKey?: string;
  now?: () => number;
  checkEveryMs?: number;
};

/** Near its max age an entry is read from the bucket: this process's clock may run behind the server's. */
const EXPIRY_MARGIN_MS = 1_000;
/** Counted per entry on top of its value's bytes (key, revision, the map's slot). */
const ENTRY_OVERHEAD_BYTES = 128;

type Held<T> = Versioned<T> & { key: string; created: number };

export class KeyView<T> {
  private readonly held: BoundedCache<string, Held<T>>;
  /** Every live key of the bucket is held: a key not held does not exist. False once the bound dropped one. */
  private complete = true;
  private readonly view: BucketView;
  private readonly now: () => number;

  constructor(
    kv: KV,
    nc: NatsConnection | undefined,
    private readonly options: KeyViewOptions,
    log: Logger,
  ) {
    this.now = options.now ?? Date.now;
    this.held = new BoundedCache<string, Held<T>>({
      max: Number.MAX_SAFE_INTEGER,
      maxWeight: options.maxBytes,
      onEvict: () => {
        this.complete = false;
      },
    });
    const { barrierKey } = options;
    this.view = new BucketView(
      kv,
      {
        what: options.what,
        nc,
        checkEveryMs: options.checkEveryMs,
        lastMessage: nc ? directLastMessage(nc, kv) : undefined,
        apply: (entry) => this.apply(entry),
        reset: () => {
          this.held.clear();
          this.complete = true;
        },
        barrier: barrierKey ? () => kv.put(barrierKey, encodeJson({ at: new Date().toISOString() })) : undefined,
      },
      log,
    );
  }

  start(): Promise<void> {
    return this.view.start();
  }

  stop(): Promise<void> {
    return this.view.stop();
  }

  /** True once the view holds every write acknowledged before the call; false when it could not catch up in time. */
  fresh(waitMs = VIEW_WAIT_MS): Promise<boolean> {
    return this.view.fresh(waitMs).then(
      () => true,
      () => false,
    );
  }

  /** The key's newest value (undefined: the key does not exist), or UNKNOWN when the view cannot tell. Call after fresh(). */
  get(key: string): Versioned<T> | undefined | typeof UNKNOWN {
    this.prune();
    const held = this.held.peek(key);
    if (held === undefined) return this.complete ? undefined : UNKNOWN;
    if (this.expiresSoon(held)) return UNKNOWN;
    return held;
  }

  /** Entries and stored bytes held (for tests and status). */
  get size(): { entries: number; bytes: number } {
    return { entries: this.held.size, bytes: this.held.totalWeight };
  }

  private apply(entry: KvEntry): void {
    if (entry.key === this.options.barrierKey) return;
    if (entry.operation !== "PUT" || entry.length === 0) {
      this.held.delete(entry.key);
      return;
    }
    const held = { key: entry.key, value: entry.json<T>(), revision: entry.revision, created: entry.created.getTime() };
    // Read with peek only, the cache keeps write order: the oldest write goes first, as it is the first to expire.
    this.held.set(entry.key, held, entry.length + entry.key.length + ENTRY_OVERHEAD_BYTES);
    this.prune();
  }

  private expiresSoon(held: Held<T>): boolean {
    const { ttlMs } = this.options;
    return ttlMs !== undefined && held.created + ttlMs - EXPIRY_MARGIN_MS <= this.now();
  }

  /** Drops the entries past the bucket's max age from the old end (the watch does not tell of expiry). */
  private prune(): void {
    if (this.options.ttlMs === undefined) return;
    for (const held of this.held.values()) {
      if (held.created + this.options.ttlMs > this.now()) return;
      this.held.delete(held.key);
    }
  }
}

/**
 * The key's value from the view when it can tell (fresh, and held or known absent), else from the bucket. Without a
 * view, from the bucket.
 */
export async function readThrough<T>(
  view: KeyView<T> | undefined,
  key: string,
  direct: () => Promise<Versioned<T> | undefined>,
): Promise<Versioned<T> | undefined> {
  if (view && (await view.fresh())) {
    const found = view.get(key);
    if (found !== UNKNOWN) return found;
  }
  return direct();
}
