/**
 * A Map with a bound, the one cache of the code base: at most `max` entries (and, when given, at most
 * `maxWeight` in total, e.g. bytes), the least recently used going first. With `ttlMs` an entry lives
 * that long after its set (reads do not extend it) and reads as absent afterwards; when the cache is
 * over its bound, expired entries at the old end go before any live one.
 *
 * `get` counts as a use (LRU); `peek` does not, so a cache read only with `peek` keeps insertion
 * order (the oldest set goes first): what a window table such as a throttle needs.
 */
export type BoundedCacheOptions<K = unknown, V = unknown> = {
  /** Most entries kept. */
  max: number;
  /** Most total weight kept (each entry weighs what set gave it, 0 by default); unbounded when absent. */
  maxWeight?: number;
  /** How long an entry lives after its set, in the clock's unit; forever when absent. */
  ttlMs?: number;
  /** The clock of ttlMs (milliseconds). */
  now?: () => number;
  /** Called for each entry the bound or its age drops (not for delete, clear or a set over it): to release what it holds. */
  onEvict?: (key: K, value: V) => void;
};

type Slot<V> = { value: V; at: number; weight: number };

export class BoundedCache<K, V> {
  /** In use order: the first entry is the least recently used (or, read only with peek, the oldest set). */
  private readonly entries = new Map<K, Slot<V>>();
  private weight = 0;
  private readonly max: number;
  private readonly maxWeight: number;
  private readonly ttlMs: number | undefined;
  private readonly now: () => number;
  private readonly onEvict: ((key: K, value: V) => void) | undefined;

  constructor(options: BoundedCacheOptions<K, V>) {
    if (!(options.max >= 1)) throw new RangeError(`a bounded cache needs max >= 1, not ${options.max}`);
    this.max = options.max;
    this.maxWeight = options.maxWeight ?? Number.POSITIVE_INFINITY;
    this.ttlMs = options.ttlMs;
    this.now = options.now ?? Date.now;
    this.onEvict = options.onEvict;
  }

  /** Entries held, expired ones not yet dropped included. */
  get size(): number {
    return this.entries.size;
  }

  /** The sum of the entries' weights. */
  get totalWeight(): number {
    return this.weight;
  }

  /** Every key and value held (expired ones too), as a copy: the cache may be changed while it is walked. */
  snapshot(): Array<[K, V]> {
    return [...this.entries].map(([key, slot]) => [key, slot.value]);
  }

  /** The value, counted as a use (it goes last out). */
  get(key: K): V | undefined {
    const slot = this.live(key);
    if (slot === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, slot);
    return slot.value;
  }

  /** The value, without counting it as a use. */
  peek(key: K): V | undefined {
    return this.live(key)?.value;
  }

  has(key: K): boolean {
    return this.live(key) !== undefined;
  }

  /** Sets the value as the most recently used (its life starts now), then drops what is over the bound. */
  set(key: K, value: V, weight = 0): this {
    this.remove(key);
    this.entries.set(key, { value, at: this.ttlMs === undefined ? 0 : this.now(), weight });
    this.weight += weight;
    this.trim();
    return this;
  }

  /** Sets the weight of an entry known only later, if the key still holds `value`. */
  weigh(key: K, value: V, weight: number): void {
    const slot = this.entries.get(key);
    if (slot === undefined || slot.value !== value) return;
    this.weight += weight - slot.weight;
    slot.weight = weight;
    this.trim();
  }

  delete(key: K): boolean {
    const held = this.entries.has(key);
    this.remove(key);
    return held;
  }

  /** Removes the key only while it still holds `value`: a failed load forgets itself, not a newer set. */
  deleteIfHolds(key: K, value: V): boolean {
    const slot = this.entries.get(key);
    if (slot === undefined || slot.value !== value) return false;
    this.remove(key);
    return true;
  }

  /** Every value held (expired ones not yet dropped included), not counted as uses. */
  *values(): IterableIterator<V> {
    for (const slot of this.entries.values()) yield slot.value;
  }

  clear(): void {
    this.entries.clear();
    this.weight = 0;
  }

  private live(key: K): Slot<V> | undefined {
    const slot = this.entries.get(key);
    if (slot === undefined || !this.expired(slot, this.ttlMs === undefined ? 0 : this.now())) return slot;
    this.evict(key);
    return undefined;
  }

  private expired(slot: Slot<V>, now: number): boolean {
    return this.ttlMs !== undefined && now - slot.at >= this.ttlMs;
  }

  private remove(key: K): void {
    const slot = this.entries.get(key);
    if (slot === undefined) return;
    this.entries.delete(key);
    this.weight -= slot.weight;
  }

  private evict(key: K): void {
    const slot = this.entries.get(key);
    this.remove(key);
    if (slot !== undefined) this.onEvict?.(key, slot.value);
  }

  private over(): boolean {
    return this.entries.size > this.max || this.weight > this.maxWeight;
  }

  private trim(): void {
    if (!this.over()) return;
    if (this.ttlMs !== undefined) {
      const now = this.now();
      for (const [key, slot] of this.entries) {
        if (!this.expired(slot, now)) break;
        this.evict(key);
      }
    }
    for (const key of this.entries.keys()) {
      if (!this.over()) return;
      this.evict(key);
    }
  }
}
