import { describe, expect, it } from "vitest";
import type { SearchRequest, SortKey } from "./backend.ts";
import { toIndexedDoc } from "./documents.ts";
import { parseQuery } from "./query/parser.ts";
import { FAIL, PASS, SortColumns, UNDECIDED, compareCodePoints, rangeVerdict, sortedPage, type NumericColumn } from "./sort-columns.ts";
import { SqliteBackend } from "./sqlite.ts";
import { testRecord as record } from "./testing.ts";

const column = (values: Record<number, number[]>): NumericColumn => {
  const min = new Float64Array(16).fill(Number.NaN);
  const max = new Float64Array(16).fill(Number.NaN);
  for (const [rid, vs] of Object.entries(values)) {
    min[Number(rid)] = Math.min(...vs);
    max[Number(rid)] = Math.max(...vs);
  }
  return { min, max };
};

describe("sorting from in-memory columns", () => {
  it("sort - missing values last in both directions, ties by id, min ascending and max descending", () => {
    const rids = [1, 2, 3, 4, 5];
    const idOf: Record<number, string> = { 1: "e", 2: "d", 3: "c", 4: "b", 5: "a" };
    const idsOf = (list: number[]) => new Map(list.map((rid) => [rid, idOf[rid]!]));
    const col = column({ 1: [5], 2: [1, 9], 3: [5], 5: [3] }); // rid 4 has no value
    const asc = sortedPage(rids, [{ field: "x", order: "asc" }], [col], { offset: 0, limit: 10 }, idsOf);
    expect(asc.rids).toEqual([2, 5, 3, 1, 4]); // 1 (min of 1,9), 3, 5 (ids c < e), missing
    expect(asc.positions).toEqual([
      [1, "d"],
      [3, "a"],
      [5, "c"],
      [5, "e"],
      [null, "b"],
    ]);
    const desc = sortedPage(rids, [{ field: "x", order: "desc" }], [col], { offset: 0, limit: 10 }, idsOf);
    expect(desc.rids).toEqual([2, 3, 1, 5, 4]); // 9 (max of 1,9), 5 c, 5 e, 3, missing
    const explicitMin = sortedPage(rids, [{ field: "x", order: "desc", mode: "min" }], [col], { offset: 0, limit: 10 }, idsOf);
    expect(explicitMin.rids).toEqual([3, 1, 5, 2, 4]);
  });

  it("sort - a window and a keyset position give the same slices as the full order", () => {
    const n = 300;
    const rids = Array.from({ length: n }, (_, i) => i);
    let idReads = 0;
    const idsOf = (list: number[]) => ((idReads += list.length), new Map(list.map((rid) => [rid, `id-${(rid * 7919) % n}`])));
    const a: Record<number, number[]> = {};
    const b: Record<number, number[]> = {};
    for (const i of rids) {
      if (i % 5) a[i] = [i % 13];
      if (i % 3) b[i] = [(i * 31) % 17, (i * 17) % 23];
    }
    const keys: SortKey[] = [
      { field: "a", order: "asc" },
      { field: "b", order: "desc" },
    ];
    const cols = [column(a), column(b)];
    const grow = (c: NumericColumn) => ({
      min: Float64Array.from({ length: n }, (_, i) => c.min[i] ?? Number.NaN),
      max: Float64Array.from({ length: n }, (_, i) => c.max[i] ?? Number.NaN),
    });
    const full = sortedPage(rids, keys, cols.map(grow), { offset: 0, limit: n }, idsOf);
    expect(full.rids).toHaveLength(n);
    expect(sortedPage(rids, keys, cols.map(grow), { offset: 40, limit: 25 }, idsOf).rids).toEqual(full.rids.slice(40, 65));
    // Paging by keyset from each page's last position walks the same order.
    const walked: number[] = [];
    let after: (string | number | null)[] | undefined;
    for (;;) {
      const page = sortedPage(rids, keys, cols.map(grow), { offset: 0, limit: 37, after }, idsOf);
      if (page.rids.length === 0) break;
      walked.push(...page.rids);
      after = page.positions.at(-1);
    }
    expect(walked).toEqual(full.rids);
    // A first page reads the ids of its rows and their ties only, not of every match.
    idReads = 0;
    sortedPage(rids, keys, cols.map(grow), { offset: 0, limit: 5 }, idsOf);
    expect(idReads).toBeLessThan(n / 4);
  });

  it("sort - ids compare as SQLite does (UTF-8 bytes, i.e. code points)", () => {
    expect(compareCodePoints("a", "b")).toBeLessThan(0);
    expect(compareCodePoints("ab", "a")).toBeGreaterThan(0);
    // U+FF5E (one unit, 0xFF5E) sorts before U+1F600 (surrogates 0xD83D…) in code point order.
    expect(compareCodePoints("\uFF5E", "\u{1F600}")).toBeLessThan(0);
    expect("\uFF5E" < "\u{1F600}").toBe(false); // what a plain JS comparison would get wrong
  });

  const dataOf = (i: number, round: number): Record<string, unknown> => ({
    N: i % 7 === 0 ? undefined : i % 11 === 0 ? [(i * 3 + round) % 50, (i * 5) % 50] : (i * 13 + round) % 50,
    D: i % 4 === 0 ? null : new Date(Date.UTC(2000 + (i % 9), i % 12, 1 + (i % 27))).toISOString(),
    S: `s${i % 5}`,
    G: i % 2 ? "odd" : "even",
    Text: `word${i % 3} common`,
    M: i === 17 ? "not a number" : i % 10,
    // Numbers and dates in one field: ranges on it stay in SQL.
    X: i % 2 ? i % 40 : new Date(Date.UTC(2010, i % 12, 1)).toISOString(),
  });

  it("ranges - a range loads a column only while fewer than 8 are held, and never evicts one", () => {
    const columns = new SortColumns();
    let loads = 0;
    const load = () => (loads++, { numbers: [[1, 5]] as Array<[number, number]>, hasOtherValues: false });
    for (let i = 0; i < 7; i++) expect(columns.columnsFor([`f${i}`], load)).toBeDefined();
    expect(columns.columnForRange("r1", load)).toBeDefined(); // the 8th
    expect(loads).toBe(8);
    expect(columns.columnForRange("r2", load)).toBeUndefined(); // full: SQL, nothing evicted
    expect(loads).toBe(8);
    expect(columns.held()).toHaveLength(8);
    expect(columns.columnForRange("f3", load)).toBeDefined(); // held: no load
    expect(loads).toBe(8);
  });

  it("ranges - a record's min and max decide a range unless they straddle it", () => {
    const col = column({ 1: [5], 2: [1, 19], 3: [20, 30], 5: [12, 14], 6: [1, 9] }); // rid 4 has no value
    const range = { lower: 10, upper: 15, includeLower: true, includeUpper: false };
    expect([1, 2, 3, 4, 5, 6].map((rid) => rangeVerdict(col, rid, range))).toEqual([FAIL, UNDECIDED, FAIL, FAIL, PASS, FAIL]);
    // Open and exclusive ends.
    expect(rangeVerdict(col, 1, { lower: 5, includeLower: false, includeUpper: true })).toBe(FAIL);
    expect(rangeVerdict(col, 1, { lower: 5, includeLower: true, includeUpper: true })).toBe(PASS);
    expect(rangeVerdict(col, 3, { upper: 20, includeLower: true, includeUpper: true })).toBe(PASS);
    expect(rangeVerdict(col, 3, { upper: 20, includeLower: true, includeUpper: false })).toBe(FAIL);
  });

  // Thousands of queries against SQL: a minute or more of CPU on a busy 2-core machine.
  it("sort - numbers and dates sorted in memory, and multi-word relevance ranked in memory, equal the SQL path, for windows, keysets, filters, after updates and deletes", {
    timeout: 180_000,
  }, () => {
    const fast = new SqliteBackend({ file: ":memory:" });
    const sql = new SqliteBackend({ file: ":memory:", sqlOnly: true });
    const load = (round: number, ids: number[]) => {
      const changes = ids.map((i) => ({ op: "upsert" as const, doc: toIndexedDoc("opendes", `k${i}`, record(i, dataOf(i, round))) }));
      fast.apply(changes, round * 1000 + ids.length);
      sql.apply(changes, round * 1000 + ids.length);
    };
    load(
      0,
      Array.from({ length: 400 }, (_, i) => i),
    );
    const request = (sort: SortKey[], query = "", extra: Partial<SearchRequest> = {}): SearchRequest => ({
      partition: "opendes",
      kinds: ["*:*:*:*"],
      query: parseQuery(query),
      access: { all: false, groups: ["data.a.viewers"], asOwner: false },
      sort,
      offset: 0,
      limit: 25,
      trackTotalCount: true,
      ...extra,
    });
    const sorts: SortKey[][] = [
      [{ field: "data.N", order: "asc" }],
      [{ field: "data.N", order: "desc" }],
      [{ field: "data.N", order: "asc", mode: "max" }],
      [
        { field: "data.D", order: "desc" },
        { field: "data.N", order: "asc" },
      ],
      [{ field: "data.S", order: "asc" }], // strings: the SQL path on both
      [{ field: "data.M", order: "asc" }], // one string among numbers: the SQL path on both
    ];
    const same = (r: SearchRequest) => {
      const a = fast.search(r);
      const b = sql.search(r);
      expect(a.total).toBe(b.total);
      expect(a.hits.map((h) => h.position)).toEqual(b.hits.map((h) => h.position));
      expect(a.hits.map((h) => h.doc.id)).toEqual(b.hits.map((h) => h.doc.id));
      return a;
    };
    const check = () => {
      // Relevance (no sort) for text of more than one word: ranked in memory vs in SQL.
      const ranges = [
        "common AND data.N:[10 TO 30]",
        "common AND data.N:{10 TO 30}",
        "common AND data.N:>=45",
        "common AND data.N:[10 TO 30] AND data.G:odd",
        "common AND data.N:[10 TO 30] AND NOT data.G:odd",
        "common AND (data.N:[10 TO 30] OR data.G:odd)",
        "word1 AND data.D:[2003 TO 2005]",
        "common AND data.D:<2004-06-01",
        "common AND data.D:[10 TO 30]", // numbers read as years on a date field: nothing
        "common AND data.N:[2003-01-01 TO 2005-01-01]", // dates on a number field: nothing
        "common AND data.M:[2 TO 5]", // a string among the numbers: SQL
        "common AND data.X:[5 TO 20]", // numbers and dates: SQL
        "common AND data.X:[2010-03-01 TO 2010-06-01]",
      ];
      for (const query of [
        "word1 common",
        'data.S:"s3"',
        '"word2 common" AND data.G:odd',
        ...ranges,
        ...ranges.map((q) => q.replace(/^common AND /, "data.G:even AND common AND ")),
      ]) {
        for (const window of [
          { offset: 0, limit: 25 },
          { offset: 30, limit: 50 },
          { offset: 0, limit: 0 },
        ]) {
          const r = request([], query, window);
          expect(fast.search(r)).toEqual(sql.search(r));
        }
      }
      for (const sort of sorts) {
        for (const [query, window] of [
          ["", { offset: 0, limit: 25 }],
          ["", { offset: 180, limit: 40 }],
          ["data.G:odd AND common", { offset: 5, limit: 10 }],
          ["word1", { offset: 0, limit: 1000 }],
          ["common AND data.N:[10 TO 30]", { offset: 0, limit: 50 }],
        ] as const) {
          same(request(sort, query, window));
        }
        // Keyset pages (what cursors do) through every match, SQL-driven and text-driven.
        for (const query of ["data.G:even", "common AND data.G:even"]) {
          let after: (string | number | null)[] | undefined;
          let seen = 0;
          for (;;) {
            const page = same(request(sort, query, { limit: 30, keyset: after ? { after } : {}, skipCount: true }));
            if (page.hits.length === 0) break;
            seen += page.hits.length;
            after = page.hits.at(-1)!.position;
          }
          expect(seen).toBe(sql.search(request(sort, query, { limit: 0 })).total);
          expect(seen).toBeGreaterThan(190);
        }
      }
    };
    check();
    // Range checks load columns too: X (numbers and dates) is held, its ranges still go to SQL.
    expect(fast.columnarSortFields().sort()).toEqual(["data.D", "data.N", "data.X"]);
    // Updates move values (and put a string into N for one record: N goes back to SQL), deletes remove rows.
    load(
      1,
      Array.from({ length: 400 }, (_, i) => i).filter((i) => i % 3 === 0),
    );
    const deletes = [5, 6, 50, 51, 399].map((i) => ({ op: "delete" as const, partition: "opendes", key: `k${i}` }));
    fast.apply(deletes, 5000);
    sql.apply(deletes, 5000);
    check();
    const withString = { op: "upsert" as const, doc: toIndexedDoc("opendes", "k7", record(7, { ...dataOf(7, 2), N: "seven" })) };
    fast.apply([withString], 6000);
    sql.apply([withString], 6000);
    check();
    expect(fast.columnarSortFields().sort()).toEqual(["data.D", "data.X"]);
    fast.close();
    sql.close();
  });
});
