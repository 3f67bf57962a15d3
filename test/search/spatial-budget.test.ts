/**
 * Spatial filter work is bounded (review: a viewer who saw none of 8,000 records held the search
 * actor ~2 s per query with a 10,000-vertex polygon — every partition's points were tested exactly,
 * before the ACL, and the query polygon's edges were rebuilt per record). Asserted on work and
 * errors, never on time: only candidates the caller may see in the request's partition and kinds
 * are tested, a point outside a query ring's box costs nothing, and past SPATIAL_WORK_MAX the query
 * is a 400 naming /body/spatialFilter.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GeoFilter } from "../../actors/search/backend.ts";
import { toIndexedDoc } from "../../actors/search/documents.ts";
import { preparePolygon, withinPrepared, intersectsPrepared, type Position } from "../../actors/search/geo.ts";
import { SPATIAL_WORK_MAX, SqliteBackend } from "../../actors/search/sqlite.ts";
import { testRecord, testRequest } from "../../actors/search/testing.ts";
import { DerrickError } from "../../subjects/index.ts";

const POINTS = 3000;
/** A closed ring of n vertices (n + 1 points): a circle around every test point. */
const circle = (n: number): Position[] => {
  const ring = Array.from(
    { length: n },
    (_, i): Position => [10 + 30 * Math.cos((2 * Math.PI * i) / n), 55 + 20 * Math.sin((2 * Math.PI * i) / n)],
  );
  return [...ring, ring[0]!];
};
const polygonFilter = (n: number): GeoFilter => ({
  field: "data.Location",
  relation: "within",
  area: { type: "polygon", polygon: [circle(n)] },
});
const location = (i: number) => ({ Location: { latitude: 50 + (i % 1000) / 100, longitude: (i / 1000) % 20 } });
const SEES_A = { all: false as const, groups: ["data.a.viewers"], asOwner: false };
const WELLS = ["osdu:wks:master-data--well:1.0.0"];

let backend: SqliteBackend;
beforeAll(() => {
  backend = new SqliteBackend({ file: ":memory:" });
  const other = (i: number, acl: string[]) => ({ ...testRecord(i, location(i)), acl: { viewers: acl, owners: acl } });
  const changes = [
    // 10 records the caller (data.a.viewers) sees in opendes...
    ...Array.from({ length: 10 }, (_, i) => toIndexedDoc("opendes", `a${i}`, testRecord(i, location(i)))),
    // ...3000 it may not see in opendes, 3000 it may see in another partition, 3000 of another kind.
    ...Array.from({ length: POINTS }, (_, i) => toIndexedDoc("opendes", `b${i}`, other(100 + i, ["data.b.viewers@opendes.example.com"]))),
    ...Array.from({ length: POINTS }, (_, i) => toIndexedDoc("other", `c${i}`, testRecord(100 + i, location(i)))),
    ...Array.from({ length: POINTS }, (_, i) =>
      toIndexedDoc("opendes", `d${i}`, { ...testRecord(5000 + i, location(i)), kind: "osdu:wks:master-data--Wellbore:1.0.0" }),
    ),
  ].map((doc) => ({ op: "upsert" as const, doc }));
  backend.apply(changes, changes.length);
});
afterAll(() => backend?.close());

const refusal = (run: () => unknown): DerrickError => {
  try {
    run();
  } catch (error) {
    if (error instanceof DerrickError) return error;
    throw error;
  }
  throw new Error("the query was answered");
};

describe("search - spatial filter work is bounded", () => {
  it("search - a 10,000-vertex polygon over thousands of candidates is a 400 naming /body/spatialFilter, not seconds of exact tests", () => {
    // users.data.root sees the 3,010 opendes wells: 3,010 × 10,001 edges is past the budget.
    const error = refusal(() => backend.search(testRequest({ access: { all: true }, kinds: WELLS, spatial: polygonFilter(10_000) })));
    expect(error.status).toBe(400);
    expect(error.errors).toEqual([
      { pointer: "/body/spatialFilter", message: expect.stringContaining(`more than ${SPATIAL_WORK_MAX} vertex comparisons`) },
    ]);
    // A 1,000-vertex polygon over the same records is within it (3,010 × 1,001 ≈ 3M) and exact.
    expect(
      backend.search(testRequest({ access: { all: true }, kinds: WELLS, spatial: polygonFilter(1000), trackTotalCount: true })).total,
    ).toBe(POINTS + 10);
  });

  it("search - only records the caller may see in the request's partition and kinds are tested: the same polygon is answered for a viewer of 10", () => {
    // The 9,000 other records lie in the polygon too; none is tested, so the budget holds.
    const page = backend.search(testRequest({ access: SEES_A, kinds: WELLS, spatial: polygonFilter(10_000), limit: 100 }));
    expect(page.total).toBe(10);
    expect(page.hits.map((h) => h.doc.id).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `opendes:well:${i}`).sort());
    // A caller who sees nothing costs nothing.
    expect(
      backend.search(testRequest({ access: { all: false, groups: ["data.nobody"], asOwner: false }, spatial: polygonFilter(10_000) }))
        .total,
    ).toBe(0);
    // While root, or the viewer over every kind (3,000 wellbores it may see), are refused.
    expect(refusal(() => backend.search(testRequest({ access: { all: true }, kinds: WELLS, spatial: polygonFilter(10_000) }))).status).toBe(
      400,
    );
    expect(refusal(() => backend.search(testRequest({ access: SEES_A, spatial: polygonFilter(10_000) }))).status).toBe(400);
  });

  it("search - the query polygon is prepared once: a point outside a ring's box costs no edge comparisons, one inside costs the ring", () => {
    const polygon = preparePolygon([circle(10_000)]);
    let units = 0;
    const spend = (n: number) => void (units += n);
    expect(withinPrepared({ points: [[100, 0]], lines: [], polygons: [] }, { type: "polygon", polygon }, spend)).toBe(false);
    expect(intersectsPrepared({ points: [[100, 0]], lines: [], polygons: [] }, [polygon], spend)).toBe(false);
    expect(units).toBe(1); // intersects: one per query polygon for the box test
    units = 0;
    expect(withinPrepared({ points: [[10, 55]], lines: [], polygons: [] }, { type: "polygon", polygon }, spend)).toBe(true);
    expect(units).toBe(10_001);
  });
});
