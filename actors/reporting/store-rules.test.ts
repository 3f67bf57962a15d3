import { describe, expect, it } from "vitest";
import {
  announced,
  type Dependents,
  envelopeOfVersion,
  indexWith,
  invalidated,
  isEmpty,
  lostRaceDelayMs,
  nextEnvelope,
  registered,
  registrationOpen,
  stillPending,
  withdrawn,
} from "./store-rules.ts";

describe("reporting store rules", () => {
  it("store - the first envelope is version 1 created now; the next keeps its creation time and counts on", () => {
    const first = nextEnvelope(undefined, { name: "a" }, "2026-01-01T00:00:00Z");
    expect(first).toEqual({ entity: { name: "a" }, version: 1, createdAt: "2026-01-01T00:00:00Z", updatedAt: "2026-01-01T00:00:00Z" });
    const second = nextEnvelope(first, { name: "b" }, "2026-01-02T00:00:00Z");
    expect(second).toEqual({ entity: { name: "b" }, version: 2, createdAt: "2026-01-01T00:00:00Z", updatedAt: "2026-01-02T00:00:00Z" });
  });

  it("store - an index change is written sorted, and not at all when the member is already as asked", () => {
    expect(indexWith(undefined, "b", true)).toEqual(["b"]);
    expect(indexWith(["c", "a"], "b", true)).toEqual(["a", "b", "c"]);
    expect(indexWith(["a", "b"], "b", true)).toBeUndefined();
    expect(indexWith(["a", "b"], "a", false)).toEqual(["b"]);
    expect(indexWith(["a"], "z", false)).toBeUndefined();
    expect(indexWith(["a"], "a", false)).toEqual([]);
  });

  it("store - of an entity's history, the newest envelope with the version asked wins (numbers repeat after a re-create)", () => {
    const v = (version: number, name: string) => ({ entity: { name }, version, createdAt: "t", updatedAt: "t" });
    expect(envelopeOfVersion([v(1, "old"), v(2, "old"), v(1, "new")], 1)?.entity.name).toBe("new");
    expect(envelopeOfVersion([v(1, "old"), v(2, "old"), v(1, "new")], 2)?.entity.name).toBe("old");
    expect(envelopeOfVersion([v(1, "a")], 3)).toBeUndefined();
  });

  it("store - an announcement from an older revision than the input's has landed or never will: it no longer counts", () => {
    const writing = [
      { id: "w1", revision: 4 },
      { id: "w2", revision: 5 },
    ];
    expect(stillPending(writing, 5)).toEqual([{ id: "w2", revision: 5 }]);
    expect(stillPending(writing, 4)).toEqual(writing);
    expect(stillPending(writing, 6)).toEqual([]);
  });

  it("store - announcing a write keeps what is listed (to delete it), adds the write, and drops the announcements left behind", () => {
    const before: Dependents = { keys: ["r1", "r2"], writing: [{ id: "old", revision: 3 }] };
    expect(announced(before, { id: "new", revision: 7 })).toEqual({ keys: ["r1", "r2"], writing: [{ id: "new", revision: 7 }] });
    const racing: Dependents = { keys: [], writing: [{ id: "other", revision: 7 }] };
    expect(announced(racing, { id: "new", revision: 7 }).writing).toEqual([
      { id: "other", revision: 7 },
      { id: "new", revision: 7 },
    ]);
  });

  it("store - withdrawing empties the list and keeps the other writes; an announcement already dropped leaves the record as it is", () => {
    const record: Dependents = {
      keys: ["r1"],
      writing: [
        { id: "mine", revision: 7 },
        { id: "other", revision: 7 },
      ],
    };
    expect(withdrawn(record, "mine")).toEqual({ keys: [], writing: [{ id: "other", revision: 7 }] });
    expect(withdrawn({ keys: [], writing: [{ id: "mine", revision: 7 }] }, "mine")).toEqual({ keys: [] });
    expect(withdrawn({ keys: ["registered-since"] }, "mine")).toBeUndefined();
  });

  it("store - a record with nothing listed and no write under way is empty (deleted rather than written)", () => {
    expect(isEmpty({ keys: [] })).toBe(true);
    expect(isEmpty({ keys: [], writing: [] })).toBe(true);
    expect(isEmpty({ keys: ["r"] })).toBe(false);
    expect(isEmpty({ keys: [], writing: [{ id: "w", revision: 1 }] })).toBe(false);
  });

  it("store - an invalidation empties the list and keeps only the writes that may still land", () => {
    const record: Dependents = {
      keys: ["r1", "r2"],
      writing: [
        { id: "landed", revision: 2 },
        { id: "pending", revision: 5 },
      ],
    };
    expect(invalidated(record, 5)).toEqual({ keys: [], writing: [{ id: "pending", revision: 5 }] });
    expect(invalidated(record, 6)).toEqual({ keys: [] });
  });

  it("store - registration is refused while a write that may still land is announced, and allowed once the input moved past it", () => {
    const record: Dependents = { keys: [], writing: [{ id: "w", revision: 5 }] };
    expect(registrationOpen(record, 5)).toBe(false);
    expect(registrationOpen(record, 6)).toBe(true);
    expect(registrationOpen({ keys: ["r"] }, 0)).toBe(true);
  });

  it("store - a registration is the newest entry, evicts the oldest beyond the bound, and drops announcements left behind", () => {
    expect(registered({ keys: ["a", "b"] }, "c", 3)).toEqual({ next: { keys: ["a", "b", "c"] }, evicted: [] });
    expect(registered({ keys: ["a", "b", "c"] }, "d", 3)).toEqual({ next: { keys: ["b", "c", "d"] }, evicted: ["a"] });
    // Listed already: moved to the newest place, nothing evicted.
    expect(registered({ keys: ["a", "b", "c"] }, "a", 3)).toEqual({ next: { keys: ["b", "c", "a"] }, evicted: [] });
    // A list longer than the bound (a smaller bound since) comes back to it.
    expect(registered({ keys: ["a", "b", "c", "d"] }, "e", 2)).toEqual({ next: { keys: ["d", "e"] }, evicted: ["a", "b", "c"] });
    expect(registered({ keys: ["a"], writing: [{ id: "w", revision: 1 }] }, "b", 3).next).toEqual({ keys: ["a", "b"] });
  });

  it("store - the pause after a lost race is random, grows with the attempt and stays under 50 ms", () => {
    expect(lostRaceDelayMs(0, () => 0.5)).toBe(0.5);
    expect(lostRaceDelayMs(3, () => 0.5)).toBe(4);
    expect(lostRaceDelayMs(10, () => 0.999)).toBeLessThan(50);
    expect(lostRaceDelayMs(10, () => 0)).toBe(0);
  });
});
