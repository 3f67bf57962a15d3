import { describe, expect, it } from "vitest";
import type { Access, SearchRequest, SortKey } from "./backend.ts";
import { toIndexedDoc } from "./documents.ts";
import { parseQuery } from "./query/parser.ts";
import { orderedCandidates, SortColumns, sortedPage, type NumericColumn } from "./sort-columns.ts";
import { SqliteBackend } from "./sqlite.ts";
import { countTerms, matchWords, TermColumns } from "./term-columns.ts";
import { seededRandom as rng, testRecord, testRequest } from "./testing.ts";

const leaf = (path: string, str: string, t = 0, num: number | null = null) => ({ path, t: t as 0, str, num });

describe("term columns", () => {
  it("aggregate - counts over any set of records equal a naive count, each record once per distinct value, in count, number, then byte order", () => {
    const columns = new TermColumns();
    const values: Record<number, string[]> = {};
    const draw = rng(3);
    const terms = ["b", "a", "B", "\u{1F600}", "\uFF5E", "c"];
    const rows: Array<[number, string, number | null, number]> = [];
    for (let rid = 1; rid < 300; rid++) {
      const n = Math.floor(draw() * 3); // 0, 1 or 2 values, maybe the same twice
      values[rid] = Array.from({ length: n }, () => terms[Math.floor(draw() * terms.length)]!);
      for (const str of values[rid]!) rows.push([rid, str, null, 0]);
    }
    const column = columns.columnFor("f", () => ({ values: rows, incomplete: false }))!;
    const naive = (rids: number[]) => {
      const counts = new Map<string, number>();
      for (const rid of rids) for (const str of new Set(values[rid])) counts.set(str, (counts.get(str) ?? 0) + 1);
      // SQLite's BINARY order is the UTF-8 bytes' order: Buffer.compare gives it.
      return [...counts]
        .sort(([a, x], [b, y]) => y - x || Buffer.compare(Buffer.from(a), Buffer.from(b)))
        .map(([key, count]) => ({ key, count }));
    };
    for (let trial = 0; trial < 20; trial++) {
      const rids = Object.keys(values)
        .map(Number)
        .filter(() => draw() < 0.5);
      expect(countTerms(column, rids, 1000)).toEqual(naive(rids));
    }
    expect(countTerms(column, [1, 2, 3, 4, 5, 6, 7, 8], 2)).toEqual(naive([1, 2, 3, 4, 5, 6, 7, 8]).slice(0, 2));
    // Numbers order their ties by value, not by text; updates and deletes are followed.
    const numeric: Array<[number, string, number, number]> = [
      [1, "120", 120, 1],
      [2, "15", 15, 1],
    ];
    const numbers = columns.columnFor("n", () => ({ values: numeric, incomplete: false }))!;
    expect(countTerms(numbers, [1, 2], 10)).toEqual([
      { key: "15", count: 1 },
      { key: "120", count: 1 },
    ]);
    columns.upsert(1, [leaf("n", "15", 1, 15)]);
    columns.remove(2);
    expect(countTerms(numbers, [1, 2], 10)).toEqual([{ key: "15", count: 1 }]);
    // One text with two numbers beside it (a string "15" and a number 15): SQL decides, the column goes.
    columns.upsert(3, [leaf("n", "15", 0, null)]);
    expect(columns.held()).toEqual(["f"]);
  });

  it("words - a field's words match the values holding them in a row; undecidable columns answer undefined", () => {
    const columns = new TermColumns();
    const rows: Array<[number, string, number | null, number]> = [
      [1, "North Sea", null, 0],
      [2, "Sea North", null, 0],
      [3, "north sea basin", null, 0],
      [4, "North", null, 0],
      [5, "42", 42, 1],
    ];
    const column = columns.columnFor("p", () => ({ values: rows, incomplete: false }))!;
    const which = (words: string[]) => [1, 2, 3, 4, 5, 6].filter(matchWords(column, words)!);
    expect(which(["north", "sea"])).toEqual([1, 3]);
    expect(which(["north"])).toEqual([1, 2, 3, 4]);
    expect(which(["42"])).toEqual([]); // numbers match by value, never by their digits
    expect(matchWords(column, ["nörth"])).toBeUndefined();
    // Two values in one record: one word is still decided, several are not (FTS5 matches across values).
    columns.upsert(4, [leaf("p", "North"), leaf("p", "Sea")]);
    expect(which(["sea"])).toEqual([1, 2, 3, 4]);
    expect(matchWords(column, ["north", "sea"])).toBeUndefined();
    // A value too long to be held: neither.
    const long = columns.columnFor("q", () => ({ values: [[1, "a", null, 0] as [number, string, null, number]], incomplete: true }))!;
    expect(matchWords(long, ["a"])).toBeUndefined();
  });

  it("sort - early termination on the column's order gives the pages of the full sort, with ties, missing values, windows and changed records", () => {
    const draw = rng(11);
    const n = 500;
    const columns = new SortColumns();
    const numbers: Array<[number, number]> = [];
    for (let rid = 0; rid < n; rid++) {
      if (draw() < 0.15) continue; // missing
      numbers.push([rid, Math.floor(draw() * 20)]); // many ties
      if (draw() < 0.1) numbers.push([rid, Math.floor(draw() * 20)]); // two values: min and max differ
    }
    const [column] = columns.columnsFor(["x"], () => ({ numbers, hasOtherValues: false })) as [NumericColumn];
    const ids = (list: number[]) => new Map(list.map((rid) => [rid, `id-${(rid * 7919) % n}`]));
    const check = () => {
      for (const key of [
        { field: "x", order: "asc" },
        { field: "x", order: "desc" },
        { field: "x", order: "desc", mode: "min" },
        { field: "x", order: "asc", mode: "max" },
      ] as SortKey[]) {
        for (const density of [0.9, 0.3, 0.02]) {
          const all = Array.from({ length: n + 20 }, (_, rid) => rid).filter(() => draw() < density);
          const member = new Set(all);
          for (const window of [
            { offset: 0, limit: 10 },
            { offset: 25, limit: 7 },
            { offset: 0, limit: 1 },
          ]) {
            const full = sortedPage(all, [key], [column], window, ids);
            const candidates = orderedCandidates(column, key, (rid) => member.has(rid), window.offset + window.limit);
            // Undefined only when fewer matches than the window hold a value (the caller then sorts them all).
            if (candidates === undefined) {
              expect(all.filter((rid) => rid < column.min.length && column.min[rid] === column.min[rid]).length).toBeLessThan(
                window.offset + window.limit,
              );
              continue;
            }
            expect(candidates.length).toBeLessThan(all.length + 1);
            expect(sortedPage(candidates, [key], [column], window, ids)).toEqual(full);
          }
        }
      }
    };
    check();
    // Changed after the orders were built: moved values, new records, deleted records.
    for (let i = 0; i < 60; i++) {
      const rid = Math.floor(draw() * (n + 20));
      if (draw() < 0.3) columns.remove(rid);
      else columns.upsert(rid, [leaf("x", "", 1, Math.floor(draw() * 20))]);
    }
    expect(column.changed?.size).toBeGreaterThan(0);
    check();
  });

  // Thousands of queries against SQL: a minute or more of CPU on a busy 2-core machine.
  it("backend - aggregations, field words and walked sorts equal the SQL path, over ACLs, kinds, updates and deletes", {
    timeout: 180_000,
  }, () => {
    const fast = new SqliteBackend({ file: ":memory:" });
    const sql = new SqliteBackend({ file: ":memory:", sqlOnly: true });
    const basins = ["North Sea", "Sea North", "north sea shelf", "Permian", "Gulf of Mexico"];
    const dataOf = (i: number, round: number): Record<string, unknown> => ({
      Basin: i % 17 === 0 ? [basins[i % 5], basins[(i + 1) % 5]] : i % 13 === 0 ? undefined : basins[(i + round) % 5],
      Depth: i % 9 === 0 ? undefined : (i * 7 + round) % 40, // ties and missing values
      Spud: new Date(Date.UTC(2000 + (i % 6), 0, 1)).toISOString(),
      Status: i % 3 ? "Active" : 3, // a string and a number: the SQL aggregation on both
      Word: i % 2 ? "common" : "rare",
      Area: basins[(i * 3 + round) % 5], // one value a record: several words decided on the column
    });
    const load = (round: number, ids: number[]) => {
      const changes = ids.map((i) => {
        const r = testRecord(i, dataOf(i, round));
        if (i % 4 === 0) r.acl = { viewers: ["data.b.viewers@opendes.example.com"], owners: ["data.b.owners@opendes.example.com"] };
        if (i % 5 === 0) r.kind = "osdu:wks:master-data--Wellbore:1.0.0";
        return { op: "upsert" as const, doc: toIndexedDoc("opendes", `k${i}`, r) };
      });
      fast.apply(changes, round * 1000 + ids.length);
      sql.apply(changes, round * 1000 + ids.length);
    };
    load(
      0,
      Array.from({ length: 600 }, (_, i) => i),
    );
    const same = (r: SearchRequest) => {
      const a = fast.search(r);
      const b = sql.search(r);
      expect(a.total).toBe(b.total);
      expect(a.aggregations).toEqual(b.aggregations);
      expect(a.hits.map((h) => h.position)).toEqual(b.hits.map((h) => h.position));
      expect(a.hits.map((h) => h.doc.id)).toEqual(b.hits.map((h) => h.doc.id));
    };
    const check = () => {
      const accesses: Access[] = [
        { all: false, groups: ["data.a.viewers"], asOwner: false },
        { all: false, groups: ["data.b.viewers"], asOwner: false },
        { all: true },
      ];
      const kinds = [["*:*:*:*"], ["osdu:wks:master-data--wellbore:1.0.0"]];
      for (const access of accesses) {
        for (const kind of kinds) {
          for (const query of [
            "",
            "common",
            "rare AND data.Depth:[5 TO 20]",
            'data.Basin:"north sea"',
            "data.Basin:sea",
            "data.Word:rare",
            'data.Area:"north sea"',
          ]) {
            for (const aggregateBy of ["data.Basin", "kind", "data.Status", "data.Depth", "data.Basin.keyword", "data.Nope"])
              same(testRequest({ access, kinds: kind, query: parseQuery(query), aggregateBy, limit: 5 }));
            for (const sort of [
              [{ field: "data.Depth", order: "asc" }],
              [{ field: "data.Depth", order: "desc" }],
              [{ field: "data.Spud", order: "asc" }],
            ] as SortKey[][]) {
              for (const window of [
                { offset: 0, limit: 10 },
                { offset: 40, limit: 15 },
                { offset: 0, limit: 0 },
              ])
                same(testRequest({ access, kinds: kind, query: parseQuery(query), sort, ...window }));
              same(testRequest({ access, kinds: kind, query: parseQuery(query), sort, trackTotalCount: true }));
            }
          }
        }
      }
    };
    check();
    load(
      1,
      Array.from({ length: 600 }, (_, i) => i).filter((i) => i % 3 === 0),
    );
    const deletes = [1, 2, 34, 35, 599].map((i) => ({ op: "delete" as const, partition: "opendes", key: `k${i}` }));
    fast.apply(deletes, 5000);
    sql.apply(deletes, 5000);
    check();
    // A value too long to be exact: the field's words go back to FTS5, its aggregation still counts what SQL counts.
    const long = {
      op: "upsert" as const,
      doc: toIndexedDoc("opendes", "k3", testRecord(3, { ...dataOf(3, 2), Basin: `north sea ${"x".repeat(300)}` })),
    };
    fast.apply([long], 6000);
    sql.apply([long], 6000);
    check();
    fast.close();
    sql.close();
  });
});
