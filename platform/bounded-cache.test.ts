import { describe, expect, it } from "vitest";
import { BoundedCache } from "./bounded-cache.ts";

const keysOf = (cache: BoundedCache<string, number>, candidates: string[]) => candidates.filter((k) => cache.peek(k) !== undefined);

describe("bounded cache", () => {
  it("bounded cache - keeps at most max entries, the least recently used going first; get is a use, peek and has are not", () => {
    const cache = new BoundedCache<string, number>({ max: 3 });
    cache.set("a", 1).set("b", 2).set("c", 3);
    expect(cache.get("a")).toBe(1); // a is now the most recently used
    expect(cache.peek("b")).toBe(2); // b stays the least recently used
    expect(cache.has("b")).toBe(true);
    cache.set("d", 4);
    expect(cache.size).toBe(3);
    expect(keysOf(cache, ["a", "b", "c", "d"])).toEqual(["a", "c", "d"]);
    cache.set("e", 5);
    expect(keysOf(cache, ["a", "b", "c", "d", "e"])).toEqual(["a", "d", "e"]);
  });

  it("bounded cache - read only with peek, the oldest set goes first; setting a key again makes it the newest", () => {
    const cache = new BoundedCache<string, number>({ max: 2 });
    cache.set("a", 1).set("b", 2);
    expect(cache.peek("a")).toBe(1);
    cache.set("c", 3);
    expect(keysOf(cache, ["a", "b", "c"])).toEqual(["b", "c"]);
    cache.set("b", 20);
    cache.set("d", 4);
    expect(keysOf(cache, ["b", "c", "d"])).toEqual(["b", "d"]);
    expect(cache.peek("b")).toBe(20);
  });

  it("bounded cache - an entry lives ttlMs after its set on the injected clock, reads do not extend it", () => {
    let now = 1_000;
    const cache = new BoundedCache<string, number>({ max: 10, ttlMs: 100, now: () => now });
    cache.set("a", 1);
    now = 1_099;
    expect(cache.get("a")).toBe(1);
    now = 1_100;
    expect(cache.get("a")).toBeUndefined();
    expect(cache.has("a")).toBe(false);
    expect(cache.size).toBe(0);
    cache.set("a", 2);
    now = 1_150;
    cache.set("a", 3); // a new set starts a new life
    now = 1_249;
    expect(cache.peek("a")).toBe(3);
    now = 1_250;
    expect(cache.peek("a")).toBeUndefined();
  });

  it("bounded cache - over the bound, expired entries at the old end go before live ones, then the oldest live one", () => {
    let now = 0;
    const cache = new BoundedCache<string, number>({ max: 3, ttlMs: 10, now: () => now });
    cache.set("old-1", 1).set("old-2", 2);
    now = 5;
    cache.set("live", 3);
    now = 12; // old-1 and old-2 have expired, live has not
    cache.set("new", 4);
    expect(cache.size).toBe(2);
    expect(keysOf(cache, ["old-1", "old-2", "live", "new"])).toEqual(["live", "new"]);
    cache.set("newer", 5);
    expect(cache.size).toBe(3);
    cache.set("newest", 6); // all live: the oldest goes
    expect(keysOf(cache, ["live", "new", "newer", "newest"])).toEqual(["new", "newer", "newest"]);
  });

  it("bounded cache - maxWeight bounds the sum of the weights, the least recently used going first; weigh sets a weight later", () => {
    const cache = new BoundedCache<string, number>({ max: 100, maxWeight: 10 });
    cache.set("a", 1, 4).set("b", 2, 4);
    expect(cache.totalWeight).toBe(8);
    cache.set("c", 3, 4);
    expect(keysOf(cache, ["a", "b", "c"])).toEqual(["b", "c"]);
    expect(cache.totalWeight).toBe(8);
    cache.weigh("c", 999, 9); // c no longer holds 999: ignored
    expect(cache.totalWeight).toBe(8);
    cache.weigh("c", 3, 9);
    expect(keysOf(cache, ["b", "c"])).toEqual(["c"]);
    expect(cache.totalWeight).toBe(9);
    cache.set("huge", 4, 11); // heavier than the bound on its own: nothing can hold it
    expect(cache.size).toBe(0);
    expect(cache.totalWeight).toBe(0);
  });

  it("bounded cache - deleteIfHolds removes a key only while it holds the value; delete and clear keep the weight right", () => {
    const cache = new BoundedCache<string, number>({ max: 10, maxWeight: 100 });
    cache.set("a", 1, 5);
    expect(cache.deleteIfHolds("a", 2)).toBe(false);
    expect(cache.peek("a")).toBe(1);
    expect(cache.deleteIfHolds("a", 1)).toBe(true);
    expect(cache.deleteIfHolds("a", 1)).toBe(false);
    expect(cache.totalWeight).toBe(0);
    cache.set("b", 1, 5).set("c", 1, 6);
    expect(cache.delete("b")).toBe(true);
    expect(cache.delete("b")).toBe(false);
    expect(cache.totalWeight).toBe(6);
    cache.clear();
    expect(cache.size).toBe(0);
    expect(cache.totalWeight).toBe(0);
  });

  it("bounded cache - values that are undefined-like are kept apart from absent keys", () => {
    const cache = new BoundedCache<string, number | null>({ max: 2 });
    cache.set("zero", 0).set("null", null);
    expect(cache.get("zero")).toBe(0);
    expect(cache.has("null")).toBe(true);
    expect(cache.deleteIfHolds("absent", null)).toBe(false);
  });

  it("bounded cache - onEvict hears what the bound and age drop, not what is deleted, cleared or set over", () => {
    let now = 0;
    const evicted: string[] = [];
    const cache = new BoundedCache<string, number>({ max: 2, ttlMs: 10, now: () => now, onEvict: (k, v) => evicted.push(`${k}=${v}`) });
    cache.set("a", 1).set("b", 2).set("a", 3);
    cache.delete("b");
    expect(evicted).toEqual([]);
    cache.set("c", 4).set("d", 5);
    expect(evicted).toEqual(["a=3"]);
    now = 10;
    expect(cache.get("c")).toBeUndefined();
    expect(evicted).toEqual(["a=3", "c=4"]);
    cache.clear();
    expect(evicted).toEqual(["a=3", "c=4"]);
  });

  it("bounded cache - under random sets, gets, peeks, deletes and weighs it holds what a plain list model holds, in the same order", () => {
    // The model: an array in use order, oldest first, trimmed from the front.
    type Entry = { key: string; value: number; weight: number };
    const model: Entry[] = [];
    const max = 50;
    const maxWeight = 400;
    const cache = new BoundedCache<string, number>({ max, maxWeight });
    const random = (() => {
      let x = 2463534242;
      return () => ((x ^= x << 13), (x ^= x >>> 17), (x ^= x << 5), (x >>> 0) / 2 ** 32);
    })();
    const modelTrim = () => {
      let total = model.reduce((sum, e) => sum + e.weight, 0);
      while (model.length > 0 && (model.length > max || total > maxWeight)) total -= model.shift()!.weight;
    };
    for (let step = 0; step < 5_000; step++) {
      const key = `k${Math.floor(random() * 120)}`;
      const at = model.findIndex((e) => e.key === key);
      const op = random();
      if (op < 0.45) {
        const entry = { key, value: step, weight: Math.floor(random() * 20) };
        if (at >= 0) model.splice(at, 1);
        model.push(entry);
        modelTrim();
        cache.set(key, entry.value, entry.weight);
      } else if (op < 0.7) {
        expect(cache.get(key)).toBe(at >= 0 ? model[at]!.value : undefined);
        if (at >= 0) model.push(...model.splice(at, 1));
      } else if (op < 0.8) {
        expect(cache.peek(key)).toBe(at >= 0 ? model[at]!.value : undefined);
      } else if (op < 0.9) {
        expect(cache.delete(key)).toBe(at >= 0);
        if (at >= 0) model.splice(at, 1);
      } else if (at >= 0) {
        const weight = Math.floor(random() * 40);
        cache.weigh(key, model[at]!.value, weight);
        model[at]!.weight = weight;
        modelTrim();
      }
      expect(cache.snapshot()).toEqual(model.map((e) => [e.key, e.value]));
      expect([...cache.values()]).toEqual(model.map((e) => e.value));
      expect(cache.size).toBe(model.length);
      expect(cache.totalWeight).toBe(model.reduce((sum, e) => sum + e.weight, 0));
    }
  });

  it("bounded cache - refuses a bound below one", () => {
    expect(() => new BoundedCache({ max: 0 })).toThrow(RangeError);
  });
});
