import { describe, expect, it } from "vitest";
import { aclKey, RowFacts } from "./rows.ts";

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
