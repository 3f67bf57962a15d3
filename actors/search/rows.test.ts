import { describe, expect, it } from "vitest";
import { aclKey, PointIndex, RowFacts } from "./rows.ts";
import { seededRandom } from "./testing.ts";

const viewers = aclKey([{ group: "data.viewers", owner: false }]);
const owners = aclKey([{ group: "data.owners", owner: true }]);

/** Records 1–8: even rids readable by viewers, odd by owners; rid 7 of another kind, rid 8 in another partition. */
function facts(): RowFacts {
  const f = new RowFacts();
  for (let rid = 1; rid <= 8; rid++) {
    const partition = rid === 8 ? "other" : "opendes";
    const kind = rid === 7 ? "osdu:wks:master-data--Field:1.0.0" : "osdu:wks:master-data--Well:1.0.0";
    f.set(rid, partition, kind, "osdu", rid % 2 === 0 ? viewers : owners, 10);
  }
  return f;
}

describe("RowFacts.visibleAll", () => {
  it("lists the visible records in row order, each call right whatever the call before it listed", () => {
    const f = facts();
    const wells = ["osdu:wks:master-data--Well:1.0.0"];
    const all = f.visibleAll("opendes", ["osdu:wks:*:*"], { all: true });
    expect(Array.from(all)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // A shorter list after a longer one, in the same buffer: no rows of the earlier answer are left in it.
    const theirs = f.visibleAll("opendes", wells, { all: false, groups: ["data.viewers"], asOwner: false });
    expect(theirs.buffer).toBe(all.buffer);
    expect(Array.from(theirs)).toEqual([2, 4, 6]);
    expect(Array.from(f.visibleAll("opendes", wells, { all: false, groups: ["data.owners"], asOwner: true }))).toEqual([1, 3, 5]);
    expect(Array.from(f.visibleAll("opendes", ["osdu:wks:*:*"], { all: true }, 2))).toEqual([1, 2]);
    expect(Array.from(f.visibleAll("other", ["osdu:wks:*:*"], { all: true }))).toEqual([8]);
    // Records added past the list's size and a cleared index.
    f.set(2000, "opendes", "osdu:wks:master-data--Well:1.0.0", "osdu", viewers, 1);
    expect(Array.from(f.visibleAll("opendes", wells, { all: false, groups: ["data.viewers"], asOwner: false }))).toEqual([2, 4, 6, 2000]);
    f.clear();
    expect(Array.from(f.visibleAll("opendes", ["osdu:wks:*:*"], { all: true }))).toEqual([]);
  });
});

describe("PointIndex.inBox", () => {
  it("finds exactly the points a brute-force scan finds, after moves within and across cells, removals and returns", () => {
    const random = seededRandom(11);
    const index = new PointIndex();
    const points = new Map<number, [number, number]>();
    // Points packed into a few cells, so that moves within a cell and boxes along cell edges are common.
    const coordinate = (span: number) => Math.round((random() * span - span / 2) * 1e6) / 1e6;
    const place = (rid: number) => {
      const at: [number, number] = [coordinate(6), coordinate(4)];
      points.set(rid, at);
      index.set("data.Location", rid, at[0], at[1]);
    };
    for (let rid = 1; rid <= 3_000; rid++) place(rid);
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 300; i++) {
        const rid = 1 + Math.floor(random() * 3_500);
        const roll = random();
        if (roll < 0.4) place(rid);
        else if (roll < 0.7 && points.has(rid)) {
          // A move of a fraction of a degree: mostly within its cell.
          const [x, y] = points.get(rid)!;
          const moved: [number, number] = [x + (random() - 0.5) * 0.2, y + (random() - 0.5) * 0.2];
          points.set(rid, moved);
          index.set("data.Location", rid, moved[0], moved[1]);
        } else {
          points.delete(rid);
          index.remove(rid);
        }
      }
      for (let q = 0; q < 10; q++) {
        const [x0, x1] = [coordinate(7), coordinate(7)].sort((a, b) => a - b) as [number, number];
        const [y0, y1] = [coordinate(5), coordinate(5)].sort((a, b) => a - b) as [number, number];
        const found: number[] = [];
        index.inBox("data.Location", x0, x1, y0, y1, (rid, x, y) => {
          expect([x, y]).toEqual(points.get(rid));
          found.push(rid);
        });
        const expected = [...points].filter(([, [x, y]]) => x >= x0 && x <= x1 && y >= y0 && y <= y1).map(([rid]) => rid);
        expect(found.sort((a, b) => a - b)).toEqual(expected.sort((a, b) => a - b));
      }
    }
  });

  it("keeps its cell lists bounded however often records are set again (an update removes, then sets)", () => {
    const index = new PointIndex();
    const random = seededRandom(5);
    for (let round = 0; round < 200; round++)
      for (let rid = 1; rid <= 500; rid++) {
        index.remove(rid);
        // Within one cell, a new place each time: each set adds an entry; compaction drops the stale ones.
        index.set("p", rid, 3 + random() * 0.9, 7 + random() * 0.9);
      }
    const cells = (index as unknown as { paths: Map<string, { cells: Map<number, { rids: Int32Array; n: number }> }> }).paths.get(
      "p",
    )!.cells;
    const [cell] = [...cells.values()];
    expect(cells.size).toBe(1);
    // 100,000 sets of 500 records: the list holds at most twice the live entries before compacting again.
    expect(cell!.rids.length).toBeLessThanOrEqual(2 * 1024);
    const found: number[] = [];
    index.inBox("p", 3, 4, 7, 8, (rid) => found.push(rid));
    expect(found.sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
  });

  it("takes a box's edges as inside, to the last digit, where a 32-bit copy of the point rounds past the edge", () => {
    // Coordinates whose float32 lies above (below) them: a prefilter on the copies alone would drop them at a max (min) edge.
    const roundsUp = Array.from({ length: 100 }, (_, i) => 10 + i * 0.37).find((v) => Math.fround(v) > v)!;
    const roundsDown = Array.from({ length: 100 }, (_, i) => 10 + i * 0.37).find((v) => Math.fround(v) < v)!;
    const index = new PointIndex();
    index.set("p", 1, roundsUp, 50);
    index.set("p", 2, roundsDown, 50);
    index.set("p", 3, roundsUp + 1e-9, 50);
    const found = (minX: number, maxX: number) => {
      const rids: number[] = [];
      index.inBox("p", minX, maxX, 49, 50, (rid) => rids.push(rid));
      return rids.sort();
    };
    expect(found(roundsUp - 1e-6, roundsUp)).toEqual([1]);
    expect(found(roundsDown, roundsDown + 1e-6)).toEqual([2]);
  });
});
