/**
 * What the hot query paths check for every candidate record, kept in memory beside the SQLite replica:
 * the ids of its interned (partition, kind, authority) and ACL, and its token count — an array read
 * instead of a B-tree seek per candidate (docs/search.md#in-memory-facts-and-sort-columns).
 */
import type { Access } from "./backend.ts";
import { compileGlob, type GlobMatcher } from "./glob.ts";

export type AclEntry = { group: string; owner: boolean };

const NONE = -1;

/** A kind pattern (lowercased, `*` per segment, as the SQL GLOB) over the lowercased kind: only `*` is a wildcard. */
function kindPattern(kind: string): GlobMatcher {
  return compileGlob(kind.replace(/[\\?]/g, "\\$&"), { dotAll: true });
}

/** The ACL as one string: the same groups and owner flags give the same key. */
export function aclKey(acl: AclEntry[]): string {
  return acl
    .map((a) => `${a.owner ? "1" : "0"}${a.group}`)
    .sort()
    .join("\u0000");
}

function aclOfKey(key: string): AclEntry[] {
  return key === "" ? [] : key.split("\u0000").map((e) => ({ owner: e[0] === "1", group: e.slice(1) }));
}

export class RowFacts {
  private kindOf = new Int32Array(1024).fill(NONE);
  private aclOf = new Int32Array(1024).fill(NONE);
  private tokensOf = new Int32Array(1024);
  /** visibleAll's answer, reused (4 bytes a record once a query without predicates listed them all). */
  private listed = new Int32Array(0);
  private readonly kinds: Array<{ partition: string; kind: string; authority: string }> = [];
  private readonly kindIds = new Map<string, number>();
  private readonly acls: AclEntry[][] = [];
  private readonly aclIds = new Map<string, number>();
  /** Live records and the sum of their token counts (BM25's N and average document length). */
  rows = 0;
  totalTokens = 0;

  clear(): void {
    this.kindOf.fill(NONE);
    this.aclOf.fill(NONE);
    this.tokensOf.fill(0);
    this.listed = new Int32Array(0);
    this.rows = 0;
    this.totalTokens = 0;
  }

  private grow(rid: number): void {
    this.kindOf = covering(this.kindOf, rid, NONE);
    this.aclOf = covering(this.aclOf, rid, NONE);
    this.tokensOf = covering(this.tokensOf, rid, 0);
  }

  set(rid: number, partition: string, kind: string, authority: string, acl: string, tokens: number): void {
    this.remove(rid);
    this.grow(rid);
    const kindKey = `${partition}\u0000${kind}\u0000${authority}`;
    let k = this.kindIds.get(kindKey);
    if (k === undefined) {
      k = this.kinds.push({ partition, kind, authority }) - 1;
      this.kindIds.set(kindKey, k);
    }
    let a = this.aclIds.get(acl);
    if (a === undefined) {
      a = this.acls.push(aclOfKey(acl)) - 1;
      this.aclIds.set(acl, a);
    }
    this.kindOf[rid] = k;
    this.aclOf[rid] = a;
    this.tokensOf[rid] = tokens;
    this.rows++;
    this.totalTokens += tokens;
  }

  remove(rid: number): void {
    if (rid >= this.kindOf.length || this.kindOf[rid] === NONE) return;
    this.rows--;
    this.totalTokens -= this.tokensOf[rid]!;
    this.kindOf[rid] = NONE;
    this.aclOf[rid] = NONE;
    this.tokensOf[rid] = 0;
  }

  tokens(rid: number): number {
    return rid < this.tokensOf.length ? this.tokensOf[rid]! : 0;
  }

  /**
   * A test of "this record is in the request's partition and kinds and the caller may see it" —
   * the same rule as the SQL filter (kind GLOB, wildcard authority skips system-meta-data, ACL
   * groups, owners only with queryAsOwner).
   */
  visibility(partition: string, kinds: string[], access: Access): (rid: number) => boolean {
    const { kindOk, aclOk } = this.masks(partition, kinds, access);
    const kindOf = this.kindOf;
    const aclOf = this.aclOf;
    return (rid) => {
      if (rid >= kindOf.length) return false;
      const k = kindOf[rid]!;
      return k !== NONE && kindOk[k] === 1 && aclOk[aclOf[rid]!] === 1;
    };
  }

  /** Which interned kinds and ACLs a request may see. */
  private masks(partition: string, kinds: string[], access: Access): { kindOk: Uint8Array; aclOk: Uint8Array } {
    const patterns = kinds.map((k) => ({
      exact: k.includes("*") ? undefined : k,
      matches: k.includes("*") ? kindPattern(k) : undefined,
      anyAuthority: k.split(":")[0] === "*",
    }));
    const kindOk = new Uint8Array(this.kinds.length);
    this.kinds.forEach((k, i) => {
      if (k.partition !== partition) return;
      const ok = patterns.some((p) =>
        p.exact !== undefined ? p.exact === k.kind : p.matches!(k.kind) && (!p.anyAuthority || k.authority !== "system-meta-data"),
      );
      kindOk[i] = ok ? 1 : 0;
    });
    const aclOk = new Uint8Array(this.acls.length);
    if (access.all) aclOk.fill(1);
    else {
      const groups = new Set(access.groups);
      this.acls.forEach((entries, i) => {
        aclOk[i] = entries.some((e) => groups.has(e.group) && (!access.asOwner || e.owner)) ? 1 : 0;
      });
    }
    return { kindOk, aclOk };
  }

  /**
   * Every record a request may see, in row order, stopping after `stopAt` (the rows of a query without predicates).
   * The answer is a view of a buffer the next call overwrites: read it before calling again.
   */
  visibleAll(partition: string, kinds: string[], access: Access, stopAt = Number.POSITIVE_INFINITY): Int32Array {
    const { kindOk, aclOk } = this.masks(partition, kinds, access);
    const kindOf = this.kindOf;
    const aclOf = this.aclOf;
    // No more records can be visible than are live.
    const size = Math.min(this.rows, stopAt);
    // Kept between calls: a new 4 MB array per aggregation over 1M records costs more in page faults and
    // zeroing than the loop itself (docs/search.md#the-index-replica).
    if (this.listed.length < size) this.listed = new Int32Array(size);
    const out = this.listed.subarray(0, size);
    let n = 0;
    // One loop without calls: an aggregation over everything visible costs this loop and the count.
    for (let rid = 0; rid < kindOf.length && n < out.length; rid++) {
      const k = kindOf[rid]!;
      if (k !== NONE && kindOk[k] === 1 && aclOk[aclOf[rid]!] === 1) out[n++] = rid;
    }
    return out.subarray(0, n);
  }

  /** The records `visible` lets through, in row order, stopping after `stopAt` of them (the rows of a query without predicates). */
  visibleRows(visible: (rid: number) => boolean, stopAt = Number.POSITIVE_INFINITY): number[] {
    const out: number[] = [];
    const kindOf = this.kindOf;
    for (let rid = 0; rid < kindOf.length && out.length < stopAt; rid++) if (kindOf[rid] !== NONE && visible(rid)) out.push(rid);
    return out;
  }
}

/**
 * FTS5's bm25() for a query of one single-token phrase, computed from the same inputs FTS5 uses (fts5_aux.c): the
 * phrase's IDF from the number of rows holding it, the row's frequency of it and the row's token count against the
 * average. Lower (more negative) is more relevant, as FTS5's rank.
 */
export function bm25(frequency: number, idf: number, tokens: number, averageTokens: number): number {
  const k1 = 1.2;
  const b = 0.75;
  return -(idf * ((frequency * (k1 + 1)) / (frequency + k1 * (1 - b + (b * tokens) / averageTokens))));
}

/** FTS5's IDF: log((N - n + 0.5) / (n + 0.5)), at least 1e-6. */
export function idf(rows: number, hits: number): number {
  const value = Math.log((rows - hits + 0.5) / (hits + 0.5));
  return value <= 0 ? 1e-6 : value;
}

/**
 * Lone points (a well's location) per field path, in memory, with a 1° grid of records per cell: a box query reads the
 * cells it covers, not an R*Tree hit's SQLite lookup per point (docs/search.md#in-memory-facts-and-sort-columns). Cell
 * lists are append-only: moved or deleted points are skipped by their current coordinates, duplicates reported once.
 * Each entry keeps a 32-bit copy of its point, so a box scans its cells in order and reads the exact coordinates (by
 * row: a cache miss each) only for entries near the box (at 1M points a 1° box scans ~26,000 entries for ~6,700 in it).
 */
type Cell = { rids: Int32Array; xs: Float32Array; ys: Float32Array; n: number };

type PathPoints = {
  xs: Float64Array;
  ys: Float64Array;
  cells: Map<number, Cell>;
  seen: Uint32Array;
  generation: number;
};

/** The 1° cell of a point; coordinates out of range share the edge cells. */
const cellOf = (x: number, y: number) =>
  (Math.min(90, Math.max(-90, Math.floor(y))) + 90) * 361 + (Math.min(180, Math.max(-180, Math.floor(x))) + 180);

/**
 * Beyond a float32's rounding of a coordinate of a box within ±360 (a circle's box may pass ±180): at most 1.6e-5. The
 * copies prefilter, the exact values decide; a box beyond ±2048 could lose points at its edges.
 */
const COPY_SLACK = 1e-4;

export class PointIndex {
  private readonly paths = new Map<string, PathPoints>();

  clear(): void {
    this.paths.clear();
  }

  set(path: string, rid: number, x: number, y: number): void {
    let p = this.paths.get(path);
    if (!p)
      this.paths.set(
        path,
        (p = {
          xs: new Float64Array(1024).fill(NaN),
          ys: new Float64Array(1024).fill(NaN),
          cells: new Map(),
          seen: new Uint32Array(1024),
          generation: 0,
        }),
      );
    if (rid >= p.xs.length) {
      p.xs = covering(p.xs, rid, NaN);
      p.ys = covering(p.ys, rid, NaN);
      p.seen = new Uint32Array(p.xs.length);
      p.generation = 0;
    }
    if (p.xs[rid] === x && p.ys[rid] === y) return;
    const cell = cellOf(x, y);
    const same = p.xs[rid] === p.xs[rid] && cellOf(p.xs[rid]!, p.ys[rid]!) === cell;
    p.xs[rid] = x;
    p.ys[rid] = y;
    let list = p.cells.get(cell);
    if (same && list) {
      // Moved within its cell: its entry's copy is brought up to date (the last entry of the row in this cell).
      for (let i = list.n - 1; i >= 0; i--)
        if (list.rids[i] === rid) {
          list.xs[i] = x;
          list.ys[i] = y;
          return;
        }
    }
    if (!list) p.cells.set(cell, (list = { rids: new Int32Array(64), xs: new Float32Array(64), ys: new Float32Array(64), n: 0 }));
    // A full list drops its stale entries first; it doubles only when at least half of it is live. An update of a
    // record removes its point before setting it again, so each update adds an entry: without this, a list grew forever.
    if (list.n === list.rids.length && compacted(p, list, cell) > list.rids.length / 2) {
      list.rids = grown(list.rids);
      list.xs = grown(list.xs);
      list.ys = grown(list.ys);
    }
    list.rids[list.n] = rid;
    list.xs[list.n] = x;
    list.ys[list.n++] = y;
  }

  remove(rid: number): void {
    for (const p of this.paths.values()) {
      if (rid < p.xs.length) {
        p.xs[rid] = NaN;
        p.ys[rid] = NaN;
      }
    }
  }

  /** Records whose point at `path` lies in the box (inclusive), with the point. */
  inBox(path: string, minX: number, maxX: number, minY: number, maxY: number, each: (rid: number, x: number, y: number) => void): void {
    const p = this.paths.get(path);
    if (!p) return;
    const { xs, ys, seen } = p;
    if (++p.generation === 0xffffffff) {
      seen.fill(0);
      p.generation = 1;
    }
    const generation = p.generation;
    const [nearMinX, nearMaxX, nearMinY, nearMaxY] = [minX - COPY_SLACK, maxX + COPY_SLACK, minY - COPY_SLACK, maxY + COPY_SLACK];
    const visit = (cell: number) => {
      const list = p.cells.get(cell);
      if (!list) return;
      const { rids, xs: nearXs, ys: nearYs, n } = list;
      for (let i = 0; i < n; i++) {
        const nx = nearXs[i]!;
        const ny = nearYs[i]!;
        if (nx < nearMinX || nx > nearMaxX || ny < nearMinY || ny > nearMaxY) continue;
        const rid = rids[i]!;
        const x = xs[rid]!;
        const y = ys[rid]!;
        if (x >= minX && x <= maxX && y >= minY && y <= maxY && cellOf(x, y) === cell && seen[rid] !== generation) {
          seen[rid] = generation;
          each(rid, x, y);
        }
      }
    };
    const x0 = Math.max(-180, Math.floor(minX));
    const x1 = Math.min(180, Math.floor(maxX));
    const y0 = Math.max(-90, Math.floor(minY));
    const y1 = Math.min(90, Math.floor(maxY));
    if ((x1 - x0 + 1) * (y1 - y0 + 1) <= p.cells.size) {
      for (let cy = y0; cy <= y1; cy++) for (let cx = x0; cx <= x1; cx++) visit((cy + 90) * 361 + (cx + 180));
    } else {
      for (const cell of p.cells.keys()) visit(cell);
    }
  }
}

/** Keeps each row's current entry of a full cell list, its last one there (stale entries and duplicates go): the count kept. */
function compacted(p: PathPoints, list: Cell, cell: number): number {
  if (++p.generation === 0xffffffff) {
    p.seen.fill(0);
    p.generation = 1;
  }
  const generation = p.generation;
  const { rids, xs, ys, n } = list;
  // From the newest: a row moved within the cell had its last entry's copy updated, and a re-set row a new entry added.
  const keep = new Uint8Array(n);
  for (let i = n - 1; i >= 0; i--) {
    const rid = rids[i]!;
    const x = p.xs[rid]!;
    const y = p.ys[rid]!;
    if (x !== x || cellOf(x, y) !== cell || p.seen[rid] === generation) continue;
    p.seen[rid] = generation;
    keep[i] = 1;
  }
  // Moved down in order, in place (an entry never lands above where it was).
  let kept = 0;
  for (let i = 0; i < n; i++) {
    if (!keep[i]) continue;
    rids[kept] = rids[i]!;
    xs[kept] = xs[i]!;
    ys[kept++] = ys[i]!;
  }
  list.n = kept;
  return kept;
}

/** A copy of `array` twice its length. */
function grown<A extends Int32Array | Float32Array>(array: A): A {
  const bigger = new (array.constructor as new (length: number) => A)(array.length * 2);
  bigger.set(array);
  return bigger;
}

/** `array` itself when it has a slot `index`, else a copy doubled until it does, new slots set to `fill`. */
export function covering<A extends Int32Array | Float64Array>(array: A, index: number, fill: number): A {
  if (index < array.length) return array;
  let size = array.length;
  while (size <= index) size *= 2;
  const bigger = new (array.constructor as new (length: number) => A)(size).fill(fill) as A;
  bigger.set(array);
  return bigger;
}
