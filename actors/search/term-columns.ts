/**
 * Aggregations without SQL: per field path, each record's exact values (`vals.str`) as interned term ids in memory,
 * counted over a query's matches in one pass, as OpenSearch counts a keyword field's doc values
 * (docs/search.md#in-memory-facts-and-sort-columns).
 */
import type { Aggregation } from "../../subjects/search.ts";
import { LeafType, tokenize, type Leaf } from "./documents.ts";
import { covering } from "./rows.ts";
import { compareCodePoints } from "./sort-columns.ts";
import { ColumnCache } from "./column-cache.ts";

/** A field with more distinct values than this (ids, free text) stays in SQL: its terms would cost more memory than they save. */
export const MAX_TERMS = 65_536;
const NONE = -1;
/** `of[rid]` of a record with more than one distinct value: its term ids are in `multi`. */
const MULTI = -2;

export type TermColumn = {
  terms: string[];
  /** Per term, the number SQL holds beside it (`vals.num`), null for plain strings: numbers and dates order their buckets by value. */
  nums: Array<number | null>;
  /** Per term, its leaf type (a text with two types depends on the rows, as with two numbers). */
  types: number[];
  ids: Map<string, number>;
  /** Per record, its one term id, NONE, or MULTI. */
  of: Int32Array;
  multi: Map<number, number[]>;
  /** A record held one term twice, or a text too long for an exact value: the column cannot stand in for the field's words. */
  repeats: boolean;
  incomplete: boolean;
  /** Per term, its words when every one is plain ASCII (what FTS5 splits as tokenize() does), else null; filled on first use. */
  words: Array<string[] | null | undefined>;
};

/** What a column load reads: every exact value of the path with its number (null when it has none). */
export type TermSource = { values: Iterable<[rid: number, str: string, num: number | null, t: number]>; incomplete: boolean };

/** A path cannot be kept when it has too many terms, or one text with two numbers beside it. */
export class TermColumns extends ColumnCache<TermColumn> {
  /** The column of a path, loading it when missing; undefined when the path cannot be kept here. */
  columnFor(path: string, load: (path: string) => TermSource): TermColumn | undefined {
    return this.use(path, () => fromSource(load(path))) ?? undefined;
  }

  /** A record's new values: every kept column follows them. */
  upsert(rid: number, leaves: Leaf[]): void {
    for (const [path, column] of this.columns) {
      if (column === null) continue;
      clearRow(column, rid);
      for (const leaf of leaves) {
        if (leaf.path !== path || leaf.t === LeafType.null || leaf.t === LeafType.geometry) continue;
        if (leaf.str === null) {
          column.incomplete = true;
          continue;
        }
        if (!add(column, rid, leaf.str, leaf.num, leaf.t)) {
          this.columns.set(path, null);
          break;
        }
      }
    }
  }

  remove(rid: number): void {
    for (const column of this.columns.values()) if (column) clearRow(column, rid);
  }
}

function fromSource(source: TermSource): TermColumn | null {
  const column: TermColumn = {
    terms: [],
    nums: [],
    types: [],
    ids: new Map(),
    of: new Int32Array(1024).fill(NONE),
    multi: new Map(),
    repeats: false,
    incomplete: source.incomplete,
    words: [],
  };
  for (const [rid, str, num, t] of source.values) if (!add(column, rid, str, num, t)) return null;
  return column;
}

function clearRow(column: TermColumn, rid: number): void {
  if (rid >= column.of.length) return;
  if (column.of[rid] === MULTI) column.multi.delete(rid);
  column.of[rid] = NONE;
}

/** Adds one value of a record; false when the column cannot hold it (see TermColumns.columns). */
function add(column: TermColumn, rid: number, str: string, num: number | null, t: number): boolean {
  let term = column.ids.get(str);
  if (term === undefined) {
    if (column.terms.length >= MAX_TERMS) return false;
    term = column.terms.push(str) - 1;
    column.nums.push(num);
    column.types.push(t);
    column.ids.set(str, term);
    // SQL takes the smallest number of a term's rows: one text with two numbers (or a number and none) depends on the rows.
  } else if (column.nums[term] !== num || column.types[term] !== t) return false;
  column.of = covering(column.of, rid, NONE);
  const current = column.of[rid]!;
  if (current === NONE) column.of[rid] = term;
  else if (current === MULTI) {
    const list = column.multi.get(rid)!;
    if (!list.includes(term)) list.push(term);
    else column.repeats = true;
  } else if (current === term) column.repeats = true;
  else {
    column.multi.set(rid, [current, term]);
    column.of[rid] = MULTI;
  }
  return true;
}

/**
 * The buckets of `rids` (records, each counted once per distinct value), in the SQL order: count desc, then by number
 * when every bucket has one (numbers and dates), then by the text in SQLite's byte order; at most `size`.
 */
export function countTerms(column: TermColumn, rids: ArrayLike<number>, size: number): Aggregation[] {
  const counts = new Int32Array(column.terms.length);
  const of = column.of;
  for (let i = 0; i < rids.length; i++) {
    const rid = rids[i]!;
    if (rid >= of.length) continue;
    const term = of[rid]!;
    if (term >= 0) counts[term]!++;
    else if (term === MULTI) for (const t of column.multi.get(rid)!) counts[t]!++;
  }
  const buckets: number[] = [];
  let numeric = true;
  for (let t = 0; t < counts.length; t++) {
    if (counts[t] === 0) continue;
    buckets.push(t);
    if (column.nums[t] === null) numeric = false;
  }
  buckets.sort(
    (a, b) =>
      counts[b]! - counts[a]! ||
      (numeric && column.nums[a] !== column.nums[b] ? column.nums[a]! - column.nums[b]! : 0) ||
      compareCodePoints(column.terms[a]!, column.terms[b]!),
  );
  return buckets.slice(0, size).map((t) => ({ key: column.terms[t]!, count: counts[t]! }));
}

const PLAIN = /^[a-z0-9_]+$/;

/**
 * The records holding `words` in a row in one value of the field, or undefined where FTS5's answer could differ
 * (non-ASCII words, values too long to hold, several words over records with two values: docs/search.md#in-memory-facts-and-sort-columns).
 */
export function matchWords(column: TermColumn, words: string[]): ((rid: number) => boolean) | undefined {
  if (column.incomplete || words.length === 0 || !words.every((w) => PLAIN.test(w))) return undefined;
  if (words.length > 1 && (column.multi.size > 0 || column.repeats)) return undefined;
  const matched = new Uint8Array(column.terms.length);
  for (let t = 0; t < column.terms.length; t++) {
    // Numbers are matched by value, never by their digits (they are not in the field's text).
    if (column.types[t] === LeafType.number) continue;
    let own = column.words[t];
    if (own === undefined) {
      const tokens = tokenize(column.terms[t]!);
      column.words[t] = own = tokens.every((w) => PLAIN.test(w)) ? tokens : null;
    }
    if (own === null) return undefined;
    matched[t] = holdsRun(own, words) ? 1 : 0;
  }
  const of = column.of;
  const multi = column.multi;
  return (rid) => {
    if (rid >= of.length) return false;
    const term = of[rid]!;
    if (term >= 0) return matched[term] === 1;
    return term === MULTI && multi.get(rid)!.some((t) => matched[t] === 1);
  };
}

/** Whether `words` appear in `tokens` one after another. */
function holdsRun(tokens: string[], words: string[]): boolean {
  for (let i = 0; i + words.length <= tokens.length; i++) {
    let j = 0;
    while (j < words.length && tokens[i + j] === words[j]) j++;
    if (j === words.length) return true;
  }
  return false;
}
