import { describe, expect, it } from "vitest";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { recordKey, type StoredRecord } from "../../subjects/search.ts";
import type { SearchRequest } from "./backend.ts";
import { parseDate, toIndexedDoc, tokenize } from "./documents.ts";
import { intersects, within, type Shape } from "./geo.ts";
import { parseQuery } from "./query/parser.ts";
import { changeOf } from "./replica.ts";
import { SqliteBackend } from "./sqlite.ts";

const record = (i: number, data: Record<string, unknown>): StoredRecord => ({
  id: `opendes:well:${i}`,
  kind: "osdu:wks:master-data--Well:1.0.0",
  acl: { viewers: ["data.a.viewers@opendes.example.com"], owners: ["data.a.owners@opendes.example.com"] },
  data,
  version: 1,
  createUser: "test",
  createTime: "2026-01-01T00:00:00Z",
});

const request = (overrides: Partial<SearchRequest> = {}): SearchRequest => ({
  partition: "opendes",
  kinds: ["*:*:*:*"],
  query: parseQuery(""),
  access: { all: false, groups: ["data.a.viewers"], asOwner: false },
  sort: [],
  offset: 0,
  limit: 10,
  trackTotalCount: false,
  ...overrides,
});

describe("search engine pieces", () => {
  it("engine - totalCount stops at 10000 unless trackTotalCount asks for the exact count", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    const changes = Array.from({ length: 10_050 }, (_, i) => ({ op: "upsert" as const, doc: toIndexedDoc("opendes", `k${i}`, record(i, { N: i })) }));
    backend.apply(changes, changes.length);
    expect(backend.search(request()).total).toBe(10_000);
    expect(backend.search(request({ trackTotalCount: true })).total).toBe(10_050);
    expect(backend.search(request({ trackTotalCount: true, query: parseQuery("data.N:>=10000") })).total).toBe(50);
    backend.close();
  });

  it("engine - a caller without a matching group sees nothing, users.data.root everything", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    backend.apply([{ op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, {})) }], 1);
    expect(backend.search(request({ access: { all: false, groups: ["data.b.viewers"], asOwner: false } })).total).toBe(0);
    expect(backend.search(request({ access: { all: false, groups: [], asOwner: false } })).total).toBe(0);
    expect(backend.search(request({ access: { all: true } })).total).toBe(1);
    expect(backend.search(request({ access: { all: false, groups: ["data.a.owners"], asOwner: true } })).total).toBe(1);
    expect(backend.search(request({ access: { all: false, groups: ["data.a.viewers"], asOwner: true } })).total).toBe(0);
    backend.close();
  });

  it("engine - dates are ES date_optional_time, rounded up for inclusive upper bounds", () => {
    expect(parseDate("2020")).toBe(Date.UTC(2020, 0, 1));
    expect(parseDate("2020", { roundUp: true })).toBe(Date.UTC(2020, 11, 31, 23, 59, 59, 999));
    expect(parseDate("2020-02", { roundUp: true })).toBe(Date.UTC(2020, 1, 29, 23, 59, 59, 999));
    expect(parseDate("2020-01-01T10:00:00+02:00")).toBe(Date.UTC(2020, 0, 1, 8));
    expect(parseDate("2020-13-01")).toBeUndefined();
    expect(parseDate("2020", { minimal: "day" })).toBeUndefined();
  });

  it("engine - text is analyzed like ES's standard analyzer (lowercase, no diacritics, split on punctuation)", () => {
    expect(tokenize("Ærø-Ström IN_PROGRESS no.109")).toEqual(["ærø", "strom", "in_progress", "no", "109"]);
  });

  it("engine - WITHIN a concave polygon fails when an edge leaves it although every vertex is inside", () => {
    const u = [[[0, 0], [3, 0], [3, 3], [2, 3], [2, 1], [1, 1], [1, 3], [0, 3], [0, 0]]] as Array<Array<[number, number]>>;
    const line: Shape = { points: [], lines: [[[0.5, 2], [2.5, 2]]], polygons: [] };
    expect(within(line, { type: "polygon", polygon: u })).toBe(false);
    const inside: Shape = { points: [], lines: [[[0.5, 0.5], [2.5, 0.5]]], polygons: [] };
    expect(within(inside, { type: "polygon", polygon: u })).toBe(true);
    const square = [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]] as Array<Array<[number, number]>>;
    expect(intersects({ points: [], lines: [], polygons: [[[[0.5, 0.5], [2, 0.5], [2, 2], [0.5, 2], [0.5, 0.5]]]] }, [square])).toBe(true);
    expect(intersects({ points: [[5, 5]], lines: [], polygons: [] }, [square])).toBe(false);
  });

  it("engine - stream messages: a tombstone deletes; a key that is not the id's SHA-1 is skipped", () => {
    const id = "opendes:well:1";
    const data = new TextEncoder().encode(JSON.stringify({ id, kind: "osdu:wks:w:1.0.0", acl: { viewers: ["a"], owners: ["a"] }, data: {} }));
    const good = changeOf({ subject: `derrick.records.opendes.${recordKey(id)}`, data, headers: undefined, seq: 7 });
    expect(good).toMatchObject({ op: "upsert", doc: { id, key: recordKey(id), doc: { version: 7 } } });
    expect(changeOf({ subject: "derrick.records.opendes.abc", data, headers: undefined, seq: 8 })).toBeUndefined();
    expect(changeOf({ subject: `derrick.records.other.${recordKey(id)}`, data, headers: undefined, seq: 9 })).toBeUndefined();
    const h = natsHeaders();
    h.set("Derrick-Record-Operation", "delete");
    expect(changeOf({ subject: "derrick.records.opendes.abc", data: new Uint8Array(0), headers: h, seq: 10 })).toEqual({ op: "delete", partition: "opendes", key: "abc" });
  });
});
