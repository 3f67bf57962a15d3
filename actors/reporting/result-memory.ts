/**
 * Cached aggregations kept in the actor's memory, so a hit costs no KV read: the results read most
 * recently, each dropped when the cache bucket changes its key or no longer holds it (a purge). A
 * headers-only watch of the bucket (BucketView) learns of every change, and `fresh()` makes a read
 * wait for every write acknowledged before it, in any process (docs/reporting.md#results-in-memory).
 */
import type { KV, KvEntry, KvStatus, KvWatchOptions } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { Logger } from "../../platform/logger.ts";
import { encodeJson } from "../runtime/kv.ts";
import { BucketView } from "../runtime/bucket-view.ts";

/**
 * A result key's value as read from KV: its JSON bytes (absent: no live value) and the key's revision; `held` when the
 * memory keeps these very bytes (a later hit answers them again).
 */
export type CachedRead = { value: Uint8Array | undefined; revision: number; held?: boolean };

export type ResultMemoryLimits = {
  /** Most results held. */
  entries: number;
  /** Most bytes of results held (their JSON). */
  bytes: number;
};

/** Per process: 1,000 results, 32 MiB of their JSON (docs/reporting.md#results-in-memory). */
export const RESULT_MEMORY: ResultMemoryLimits = { entries: 1_000, bytes: 32 * 1024 * 1024 };

/** How long a read waits for the watch before it reads KV itself (a lagging watch must not hold a request near its deadline). */
const FRESH_WAIT_MS = 1_500;

type Held = { key: string; bytes: Uint8Array; revision: number };
/** A KV read under way: the newest revision of its key the watch delivered meanwhile. */
type Load = { seen: number };

/**
 * The bookkeeping of the memory, without NATS: which results are held, and whether a KV read may be
 * kept (no change of its key was delivered while it ran, beyond what it read).
 */
export class ResultTable {
  private readonly held: BoundedCache<string, Held>;
  private readonly loads = new Map<string, Set<Load>>();
  /** The bucket's first revision as last seen, and its stream's creation time: a value below it was purged. */
  private first = 0;
  private created: string | undefined;

  constructor(private readonly limits: ResultMemoryLimits = RESULT_MEMORY) {
    this.held = new BoundedCache({ max: limits.entries, maxWeight: limits.bytes });
  }

  /** The held result (counted as a use). */
  get(key: string): CachedRead | undefined {
    const held = this.held.get(key);
    return held && { value: held.bytes, revision: held.revision, held: true };
  }

  get size(): number {
    return this.held.size;
  }

  get bytes(): number {
    return this.held.totalWeight;
  }

  /** A change of `key` at `revision` (a put, delete or purge) was delivered: what is held from before it goes. */
  changed(key: string, revision: number): void {
    const held = this.held.peek(key);
    if (held && held.revision < revision) this.held.delete(key);
    for (const load of this.loads.get(key) ?? []) load.seen = Math.max(load.seen, revision);
  }

  /**
   * The bucket's first revision now (of the stream created at `created`): a held value below it is gone from the bucket.
   * Its key had no later change (that would have dropped it), so only a purge of the stream removed it, and no watch
   * delivers a purge. Another stream (the bucket made again) starts over from its own first revision.
   */
  firstRevision(revision: number, created = ""): void {
    if (created !== this.created) {
      if (this.created !== undefined) this.reset();
      this.created = created;
    } else if (revision <= this.first) return;
    this.first = revision;
    const gone = [...this.held.values()].filter((held) => held.revision < revision);
    for (const held of gone) this.held.delete(held.key);
  }

  /** The bucket was made again: nothing held or being read is current. */
  reset(): void {
    this.held.clear();
    this.first = 0;
    for (const loads of this.loads.values()) for (const load of loads) load.seen = Number.POSITIVE_INFINITY;
  }

  /** Reads `key` through `read`, keeping a live value unless a newer change of the key was delivered meanwhile. */
  async load(key: string, read: () => Promise<CachedRead>): Promise<CachedRead> {
    const load: Load = { seen: 0 };
    let loads = this.loads.get(key);
    if (!loads) this.loads.set(key, (loads = new Set()));
    loads.add(load);
    try {
      const found = await read();
      if (found.value === undefined || found.revision < load.seen || found.revision < this.first) return found;
      // Over the byte bound on its own, a result is answered and not held: setting it would first evict every other.
      if (found.value.length > this.limits.bytes) return { ...found, held: false };
      this.held.set(key, { key, bytes: found.value, revision: found.revision }, found.value.length);
      return { ...found, held: true };
    } finally {
      loads.delete(load);
      if (loads.size === 0 && this.loads.get(key) === loads) this.loads.delete(key);
    }
  }
}

/** Result keys start with `r` (store.ts resultKey); the `d.` records of the same bucket are not held. */
const isResultKey = (key: string) => key.charCodeAt(0) === 114;

export class ResultMemory {
  readonly table: ResultTable;
  private readonly view: BucketView;

  /**
   * `entityWrites`: where the entities' writes are republished. A purge of the results' bucket by an operator is no write and
   * takes the results' lists of inputs with it, so a later entity write deletes no result: after each entity write the next
   * read looks at the bucket, whose first revision tells the purge.
   */
  constructor(cache: KV, nc: NatsConnection, log: Logger, limits: ResultMemoryLimits = RESULT_MEMORY, entityWrites?: string) {
    this.table = new ResultTable(limits);
    this.view = new BucketView(
      observed(cache, (status) => this.table.firstRevision(status.streamInfo.state.first_seq, status.streamInfo.created)),
      {
        what: "assessment results",
        nc,
        looksAfterWritesTo: entityWrites,
        // Each look reads the stream's info, not its last message: only the info tells a purge.
        apply: (entry: KvEntry) => {
          if (isResultKey(entry.key)) this.table.changed(entry.key, entry.revision);
          // derrick emptied the bucket (a purge, no write) and said so with this marker.
          else if (entry.key === PURGED_KEY) this.table.reset();
        },
        reset: () => this.table.reset(),
        // After a purge the bucket's last revision is a message no watch delivers: a write of our own is one.
        barrier: () => cache.put(SYNC_KEY, encodeJson({ at: new Date().toISOString() })),
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

  /** The entity writes heard, while the notes vouch for them (BucketView.relatedWritesHeard); undefined when they do not. */
  entityWritesHeard(): number | undefined {
    return this.view.relatedWritesHeard();
  }

  /** The result as KV holds it now: from memory when held, else through `read` (then held). */
  async read(key: string, read: () => Promise<CachedRead>): Promise<CachedRead> {
    try {
      await this.view.fresh(FRESH_WAIT_MS);
    } catch {
      // The watch is behind: KV itself is current. What it holds stays until the watch delivers its changes.
      return read();
    }
    return this.table.get(key) ?? this.table.load(key, read);
  }
}

/** The key the view's barrier writes (storage layout: docs/reporting.md#storage-layout). */
export const SYNC_KEY = "sync";
/** The key derrick writes after it purges the bucket (store.ts emptyCache): every result memory then forgets what it holds. */
export const PURGED_KEY = "purged";

/**
 * The bucket as the view sees it: its watches are sent only the entries' headers (which key changed is all the memory
 * needs), and each status it reads is shown to `seen` (the stream's first revision tells a purge).
 */
function observed(kv: KV, seen: (status: KvStatus) => void): KV {
  return new Proxy(kv, {
    get(target, prop, receiver) {
      if (prop === "watch") return (opts: KvWatchOptions = {}) => target.watch({ ...opts, headers_only: true });
      if (prop === "status")
        return async () => {
          const status = await target.status();
          seen(status);
          return status;
        };
      return Reflect.get(target, prop, receiver);
    },
  });
}
