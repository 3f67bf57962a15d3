/**
 * Sorting by numbers and dates without a SQLite lookup per match: per field path of numbers or dates only,
 * each record's smallest and largest value in memory (ES sorts by min ascending, max descending), the
 * page picked with a bounded heap; the same columns check ranges (docs/search.md#in-memory-facts-and-sort-columns).
 */
import type { SortKey, SortValue } from "./backend.ts";
import { LeafType, type Leaf } from "./documents.ts";
import { covering } from "./rows.ts";
import { ColumnCache, MAX_COLUMNS } from "./column-cache.ts";

/** Bits of `NumericColumn.kinds`: which kinds of value a column has held. */
export const NUMBERS = 1;
export const DATES = 2;

export type NumericColumn = {
  min: Float64Array;
  max: Float64Array;
  /** NUMBERS | DATES held at any time since the load (never narrowed: a range check needs to know whether to read its bounds as numbers or as dates). */
  kinds?: number;
  /** The records with a value, ascending by `min` or by `max`: built on a sort's first walk (see orderedCandidates). */
  orders?: { min?: Int32Array; max?: Int32Array };
  /** Records changed since the orders were built: an order does not place them, a walk looks at them apart. */
  changed?: Set<number>;
};

/** Changed records beyond which the orders are dropped (and built again by the next walk). */
const CHANGED_MAX = 4096;

/** What a column load reads: the numeric values of a path (dates as epoch ms, `date` set), and whether it holds any other value. */
export type ColumnSource = { numbers: Iterable<[rid: number, value: number, date?: boolean]>; hasOtherValues: boolean };

/** A path cannot be kept when it holds values other than numbers and dates (the SQL path sorts those). */
export class SortColumns extends ColumnCache<NumericColumn> {
  /** The columns for these sort keys' paths, loading missing ones; undefined when one cannot be kept here. */
  columnsFor(paths: string[], load: (path: string) => ColumnSource): NumericColumn[] | undefined {
    const out: NumericColumn[] = [];
    for (const path of paths) {
      const column = this.use(path, () => fromSource(load(path)));
      if (column === null) return undefined;
      out.push(column);
    }
    return out;
  }

  /**
   * A path's column for a range check: one already held, or a new one while fewer than MAX_COLUMNS
   * are held. Ranges never evict: a query rotating through more range fields than that would
   * otherwise reload a column (a scan of the field's values) on every query; those ranges stay in SQL.
   */
  columnForRange(path: string, load: (path: string) => ColumnSource): NumericColumn | undefined {
    const column = this.columns.get(path);
    if (column !== undefined || this.held().length >= MAX_COLUMNS) return column ?? undefined;
    return this.columnsFor([path], load)?.[0];
  }

  /** A record's new values: every kept column follows them; a non-numeric value drops its column. */
  upsert(rid: number, leaves: Leaf[]): void {
    for (const [path, column] of this.columns) {
      if (column === null) continue;
      changed(column, rid);
      if (column.min.length > rid) {
        column.min[rid] = Number.NaN;
        column.max[rid] = Number.NaN;
      }
      for (const leaf of leaves) {
        if (leaf.path !== path || leaf.t === LeafType.null || leaf.t === LeafType.geometry) continue;
        if (leaf.num !== null) {
          include(column, rid, leaf.num);
          column.kinds = (column.kinds ?? 0) | (leaf.t === LeafType.date ? DATES : NUMBERS);
        }
        // A long string has no exact value (SQL's coalesce(num, str) is NULL too): it does not count.
        else if (leaf.str !== null) {
          this.columns.set(path, null);
          break;
        }
      }
    }
  }

  remove(rid: number): void {
    for (const column of this.columns.values()) {
      if (column) changed(column, rid);
      if (column && rid < column.min.length) {
        column.min[rid] = Number.NaN;
        column.max[rid] = Number.NaN;
      }
    }
  }
}

function fromSource(source: ColumnSource): NumericColumn | null {
  if (source.hasOtherValues) return null;
  const column = { min: new Float64Array(1024).fill(Number.NaN), max: new Float64Array(1024).fill(Number.NaN), kinds: 0 };
  for (const [rid, value, date] of source.numbers) {
    include(column, rid, value);
    column.kinds |= date ? DATES : NUMBERS;
  }
  return column;
}

function changed(column: NumericColumn, rid: number): void {
  if (!column.orders) return;
  column.changed ??= new Set();
  column.changed.add(rid);
  if (column.changed.size > CHANGED_MAX) {
    column.orders = undefined;
    column.changed = undefined;
  }
}

/** Widens a record's min and max by one of its values (NaN: none yet). */
function include(column: NumericColumn, rid: number, value: number): void {
  column.min = covering(column.min, rid, Number.NaN);
  column.max = covering(column.max, rid, Number.NaN);
  const lo = column.min[rid]!;
  const hi = column.max[rid]!;
  if (lo !== lo || value < lo) column.min[rid] = value;
  if (hi !== hi || value > hi) column.max[rid] = value;
}

const valueAt = (values: Float64Array, rid: number): number => (rid < values.length ? values[rid]! : Number.NaN);

export const PASS = 1;
export const FAIL = -1;
export const UNDECIDED = 0;

/** A range on numbers (or dates as epoch ms); an absent end is open. */
export type NumericRange = { lower?: number; upper?: number; includeLower: boolean; includeUpper: boolean };

/**
 * Whether a record has a value within a range, from its smallest and largest value alone: PASS when
 * either is in range; UNDECIDED when they straddle it (a value in between might be in it: only SQL
 * can tell); FAIL otherwise (no value, or every value on one side).
 */
export function rangeVerdict(column: NumericColumn, rid: number, range: NumericRange): number {
  const lo = valueAt(column.min, rid);
  if (lo !== lo) return FAIL;
  const hi = column.max[rid]!;
  const below = (x: number) => range.lower !== undefined && (range.includeLower ? x < range.lower : x <= range.lower);
  const above = (x: number) => range.upper !== undefined && (range.includeUpper ? x > range.upper : x >= range.upper);
  if ((!below(lo) && !above(lo)) || (!below(hi) && !above(hi))) return PASS;
  return below(lo) && above(hi) ? UNDECIDED : FAIL;
}

/**
 * SQLite's BINARY order of two strings (their UTF-8 bytes, i.e. code point order). JS compares
 * UTF-16 code units, which differs only where a surrogate meets a unit from U+E000 to U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      // Surrogates stand for code points above U+FFFF: they sort after U+E000–U+FFFF.
      x = x <= 0xdfff ? x + 0x2000 : x - 0x800;
      y = y <= 0xdfff ? y + 0x2000 : y - 0x800;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

export type SortedPage = { rids: number[]; positions: SortValue[][] };

/**
 * The page `offset`…`offset + limit` of the matches in `ORDER BY s IS NULL, s ASC|DESC, …, id` order, after the keyset
 * position `after` if any. Keys decide first (bounded heap, O(n log k)); ids are read only for the rows that can make
 * the page or tie with `after`, a few rather than every match (docs/search.md#in-memory-facts-and-sort-columns).
 */
export function sortedPage(
  rids: ArrayLike<number>,
  keys: SortKey[],
  columns: NumericColumn[],
  window: { offset: number; limit: number; after?: SortValue[] },
  idsOf: (rids: number[]) => Map<number, string>,
): SortedPage {
  const values = keys.map((key, i) => ((key.mode ?? (key.order === "asc" ? "min" : "max")) === "min" ? columns[i]!.min : columns[i]!.max));
  const direction = keys.map((key) => (key.order === "asc" ? 1 : -1));
  const keyOf = (rid: number, k: number) => valueAt(values[k]!, rid);
  /** Order of two keys of sort key `k` (NaN = missing, last in either direction). */
  const compareKey = (x: number, y: number, k: number): number => {
    const xMissing = x !== x;
    const yMissing = y !== y;
    if (xMissing || yMissing) return xMissing && yMissing ? 0 : xMissing ? 1 : -1;
    return x === y ? 0 : x < y ? -direction[k]! : direction[k]!;
  };
  // No closures per comparison: the heap compares every match with its root.
  const compare = (x: number, y: number): number => {
    for (let k = 0; k < values.length; k++) {
      const order = compareKey(keyOf(x, k), keyOf(y, k), k);
      if (order !== 0) return order;
    }
    return 0;
  };

  let candidates: number[] = [];
  const after = window.after;
  if (after) {
    const afterKeys = values.map((_, k) => (after[k] === null || after[k] === undefined ? Number.NaN : Number(after[k])));
    const afterId = String(after[after.length - 1]);
    const tied: number[] = [];
    for (let i = 0; i < rids.length; i++) {
      const rid = rids[i]!;
      let order = 0;
      for (let k = 0; k < values.length && order === 0; k++) order = compareKey(keyOf(rid, k), afterKeys[k]!, k);
      if (order > 0) candidates.push(rid);
      else if (order === 0) tied.push(rid);
    }
    if (tied.length) {
      const ids = idsOf(tied);
      for (const rid of tied) if (compareCodePoints(ids.get(rid)!, afterId) > 0) candidates.push(rid);
    }
  } else candidates = Array.from(rids);

  const k = window.offset + window.limit;
  if (k === 0 || candidates.length === 0) return { rids: [], positions: [] };
  if (candidates.length > k) {
    // Max-heap (the worst of the best k at the root) by keys; then everything tied with that worst.
    const heap: number[] = [];
    for (const rid of candidates) {
      if (heap.length < k) {
        heap.push(rid);
        for (let c = heap.length - 1; c > 0; ) {
          const parent = (c - 1) >> 1;
          if (compare(heap[c]!, heap[parent]!) <= 0) break;
          [heap[c], heap[parent]] = [heap[parent]!, heap[c]!];
          c = parent;
        }
      } else if (compare(rid, heap[0]!) < 0) {
        heap[0] = rid;
        for (let i = 0; ; ) {
          const l = 2 * i + 1;
          const r = l + 1;
          let worst = i;
          if (l < k && compare(heap[l]!, heap[worst]!) > 0) worst = l;
          if (r < k && compare(heap[r]!, heap[worst]!) > 0) worst = r;
          if (worst === i) break;
          [heap[i], heap[worst]] = [heap[worst]!, heap[i]!];
          i = worst;
        }
      }
    }
    const boundary = heap[0]!;
    candidates = candidates.filter((rid) => compare(rid, boundary) <= 0);
  }
  const ids = idsOf(candidates);
  candidates.sort((x, y) => compare(x, y) || compareCodePoints(ids.get(x)!, ids.get(y)!));
  const page = candidates.slice(window.offset, k);
  return {
    rids: page,
    positions: page.map((rid) => [
      ...values.map((_, key) => {
        const v = keyOf(rid, key);
        return v !== v ? null : v;
      }),
      ids.get(rid)!,
    ]),
  };
}

/** The records with a value in `which`, ascending by it. */
function orderOf(column: NumericColumn, which: "min" | "max"): Int32Array {
  column.orders ??= {};
  let order = column.orders[which];
  if (!order) {
    const values = column[which];
    const rids: number[] = [];
    for (let rid = 0; rid < values.length; rid++) if (values[rid] === values[rid]) rids.push(rid);
    rids.sort((x, y) => values[x]! - values[y]!);
    column.orders[which] = order = Int32Array.from(rids);
  }
  return order;
}

/**
 * Early termination for a one-key sort: the matches met walking the column's order until `k` and the k-th's ties, plus
 * changed records the order does not place (docs/search.md#in-memory-facts-and-sort-columns). Undefined when fewer than k hold a value.
 */
export function orderedCandidates(column: NumericColumn, key: SortKey, member: (rid: number) => boolean, k: number): number[] | undefined {
  const which = (key.mode ?? (key.order === "asc" ? "min" : "max")) === "min" ? "min" : "max";
  const values = column[which];
  const order = orderOf(column, which);
  const changedRids = column.changed;
  const out: number[] = [];
  let boundary = Number.NaN;
  const n = order.length;
  const forward = key.order === "asc";
  for (let i = 0; i < n; i++) {
    const rid = order[forward ? i : n - 1 - i]!;
    if (changedRids?.has(rid) || !member(rid)) continue;
    const value = values[rid]!;
    if (out.length >= k && value !== boundary) break;
    out.push(rid);
    if (out.length === k) boundary = value;
  }
  if (out.length < k) return undefined;
  if (changedRids) for (const rid of changedRids) if (member(rid) && valueAt(values, rid) === valueAt(values, rid)) out.push(rid);
  return out;
}
