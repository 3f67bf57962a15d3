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

/**
 * An entry, linked in use order. Not the Map's own order: JSC finds a Map's first entry by walking past
 * every entry deleted since it last rehashed, which a full cache with changing keys paid on each set.
 */
type Slot<K, V> = { key: K; value: V; at: number; weight: number; older: Slot<K, V> | undefined; newer: Slot<K, V> | undefined };

export class BoundedCache<K, V> {
  private readonly entries = new Map<K, Slot<K, V>>();
  /** The least recently used entry (or, read only with peek, the oldest set), and the most recent. */
  private oldest: Slot<K, V> | undefined;
  private newest: Slot<K, V> | undefined;
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

  /** Every key and value held (expired ones too), oldest first, as a copy: the cache may be changed while it is walked. */
  snapshot(): Array<[K, V]> {
    const out: Array<[K, V]> = [];
    for (let slot = this.oldest; slot !== undefined; slot = slot.newer) out.push([slot.key, slot.value]);
    return out;
  }

  /** The value, counted as a use (it goes last out). */
  get(key: K): V | undefined {
    const slot = this.live(key);
    if (slot === undefined) return undefined;
    if (slot !== this.newest) {
      this.unlink(slot);
      this.append(slot);
    }
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
    const slot: Slot<K, V> = { key, value, at: this.ttlMs === undefined ? 0 : this.now(), weight, older: undefined, newer: undefined };
    this.entries.set(key, slot);
    this.append(slot);
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

  /** Every value held (expired ones not yet dropped included), oldest first, not counted as uses. Change the cache while walking snapshot(), not this. */
  *values(): IterableIterator<V> {
    for (let slot = this.oldest; slot !== undefined; slot = slot.newer) yield slot.value;
  }

  clear(): void {
    this.entries.clear();
    this.oldest = this.newest = undefined;
    this.weight = 0;
  }

  private live(key: K): Slot<K, V> | undefined {
    const slot = this.entries.get(key);
    if (slot === undefined || !this.expired(slot, this.ttlMs === undefined ? 0 : this.now())) return slot;
    this.evict(slot);
    return undefined;
  }

  private expired(slot: Slot<K, V>, now: number): boolean {
    return this.ttlMs !== undefined && now - slot.at >= this.ttlMs;
  }

  private append(slot: Slot<K, V>): void {
    slot.older = this.newest;
    slot.newer = undefined;
    if (this.newest === undefined) this.oldest = slot;
    else this.newest.newer = slot;
    this.newest = slot;
  }

  private unlink(slot: Slot<K, V>): void {
    if (slot.older === undefined) this.oldest = slot.newer;
    else slot.older.newer = slot.newer;
    if (slot.newer === undefined) this.newest = slot.older;
    else slot.newer.older = slot.older;
    slot.older = slot.newer = undefined;
  }

  private remove(key: K): void {
    const slot = this.entries.get(key);
    if (slot === undefined) return;
    this.entries.delete(key);
    this.unlink(slot);
    this.weight -= slot.weight;
  }

  private evict(slot: Slot<K, V>): void {
    this.remove(slot.key);
    this.onEvict?.(slot.key, slot.value);
  }

  private over(): boolean {
    return this.entries.size > this.max || this.weight > this.maxWeight;
  }

  private trim(): void {
    if (!this.over()) return;
    if (this.ttlMs !== undefined) {
      const now = this.now();
      while (this.oldest !== undefined && this.expired(this.oldest, now)) this.evict(this.oldest);
    }
    while (this.oldest !== undefined && this.over()) this.evict(this.oldest);
  }
}
