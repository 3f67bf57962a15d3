import { describe, expect } from "vitest";
import { natsTest } from "../harness/fixture.ts";
import { MAX_DEPENDENTS, assessmentStore, entityKey, openStores, resultKey } from "../../actors/reporting/store.ts";

const it = natsTest()
  .extend("stores", { scope: "file" }, async ({ nc }) => openStores(nc))
  .extend("store", { scope: "file" }, async ({ stores }) => assessmentStore(stores));

describe("reporting store", () => {
  const now = () => new Date().toISOString();

  it("store - a result computed from an input that changed before it was registered is dropped", async ({ store }) => {
    await store.put("p", "segmentanalyses", "s1", () => ({ name: "v1" }), now());
    const key = resultKey("p", "prospect", "race");
    const miss = await store.cached(key);
    const tracker = store.tracker();
    await tracker.get(entityKey("p", "segmentanalyses", "s1"));
    // A writer lands between the computation's read and its registration (and finds nothing to invalidate yet).
    await store.put("p", "segmentanalyses", "s1", () => ({ name: "v2" }), now());
    await store.invalidate([entityKey("p", "segmentanalyses", "s1")]);
    expect(await store.remember(key, { stale: true }, tracker, miss.revision)).toBe(false);
    expect((await store.cached(key)).value).toBeUndefined();
  });

  it("store - a registered result is deleted by the next write of any of its inputs, and only that one", async ({ store }) => {
    await store.put("p", "segmentanalyses", "a", () => ({ name: "a" }), now());
    await store.put("p", "segmentanalyses", "b", () => ({ name: "b" }), now());
    const fromA = store.tracker();
    await fromA.get(entityKey("p", "segmentanalyses", "a"));
    const fromB = store.tracker();
    await fromB.get(entityKey("p", "segmentanalyses", "b"));
    expect(await store.remember(resultKey("p", "prospect", "from-a"), { a: 1 }, fromA, 0)).toBe(true);
    expect(await store.remember(resultKey("p", "prospect", "from-b"), { b: 1 }, fromB, 0)).toBe(true);
    await store.put("p", "segmentanalyses", "a", () => ({ name: "a2" }), now());
    await store.invalidate([entityKey("p", "segmentanalyses", "a")]);
    expect((await store.cached(resultKey("p", "prospect", "from-a"))).value).toBeUndefined();
    expect(JSON.parse(new TextDecoder().decode((await store.cached(resultKey("p", "prospect", "from-b"))).value))).toEqual({ b: 1 });
  });

  it("store - an absent input that appears later invalidates results computed without it", async ({ store }) => {
    const tracker = store.tracker();
    expect(await tracker.get(entityKey("p", "licenses", "later"))).toBeUndefined();
    expect(await store.remember(resultKey("p", "prospect", "without"), { x: 1 }, tracker, 0)).toBe(true);
    await store.put("p", "licenses", "later", () => ({ name: "L" }), now());
    await store.invalidate([entityKey("p", "licenses", "later")]);
    expect((await store.cached(resultKey("p", "prospect", "without"))).value).toBeUndefined();
  });

  it("store - a result is written only if its key is as the miss saw it: an invalidation meanwhile wins over the slower reader", async ({
    store,
  }) => {
    await store.put("p", "segmentanalyses", "slow", () => ({ name: "v1" }), now());
    const key = resultKey("p", "prospect", "slow");
    const input = entityKey("p", "segmentanalyses", "slow");
    const slowMiss = await store.cached(key);
    const slow = store.tracker();
    await slow.get(input);
    // A faster reader stores and registers its result; then a writer's invalidation deletes it. The
    // input itself is left as it was: this stands for a write that lands after the slow reader
    // re-read its inputs, which only the conditional write can catch.
    const fast = store.tracker();
    await fast.get(input);
    expect(await store.remember(key, { from: "fast" }, fast, (await store.cached(key)).revision)).toBe(true);
    await store.invalidate([input]);
    expect(await store.remember(key, { from: "slow" }, slow, slowMiss.revision)).toBe(false);
    expect((await store.cached(key)).value).toBeUndefined();
    // Two readers after that: the first to store wins, the other is told so.
    const a = store.tracker();
    await a.get(input);
    const b = store.tracker();
    await b.get(input);
    const missAfter = (await store.cached(key)).revision;
    expect(await store.remember(key, { from: "a" }, a, missAfter)).toBe(true);
    expect(await store.remember(key, { from: "b" }, b, missAfter)).toBe(false);
    expect(JSON.parse(new TextDecoder().decode((await store.cached(key)).value))).toEqual({ from: "a" });
  });

  it("store - an input lists a bounded number of dependents: the oldest registrations are evicted and their results deleted", async ({
    stores,
    nc,
  }) => {
    const small = assessmentStore(stores, { maxDependents: 3 });
    await small.put("p", "segmentanalyses", "popular", () => ({ name: "v1" }), now());
    const input = entityKey("p", "segmentanalyses", "popular");
    const key = (i: number) => resultKey("p", "prospect", `dependent-${i}`);
    const computeAndRemember = async (i: number) => {
      const tracker = small.tracker();
      await tracker.get(input);
      const miss = await small.cached(key(i));
      return small.remember(key(i), { i }, tracker, miss.revision);
    };
    for (let i = 0; i < 5; i++) expect(await computeAndRemember(i)).toBe(true);
    const cached = async () => {
      const out: number[] = [];
      for (let i = 0; i < 5; i++) if ((await small.cached(key(i))).value) out.push(i);
      return out;
    };
    expect(await cached()).toEqual([2, 3, 4]);
    const listed = async () => (await stores.cache.get(`d.${input}`))!.json<{ keys: string[] }>().keys;
    expect(await listed()).toEqual([key(2), key(3), key(4)]);
    // A result stored again counts as the newest registration: the next eviction takes another.
    expect(await computeAndRemember(0)).toBe(true);
    expect(await cached()).toEqual([0, 3, 4]);
    // The next write of the input still reaches every result that stays cached.
    await small.put("p", "segmentanalyses", "popular", () => ({ name: "v2" }), now());
    expect(await cached()).toEqual([]);
    // The default bound keeps the longest list inside the NATS payload limit (1 MB by default).
    const longest = resultKey("x".repeat(128), "fullcycle", "x".repeat(128), "0".repeat(16));
    expect(MAX_DEPENDENTS * (longest.length + 3)).toBeLessThan(nc.info!.max_payload);
  });

  it("store - versions count upserts, concurrent writers all land, and a delete then re-create starts at version 1", async ({ store }) => {
    const writes = await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.put("p", "segmentanalyses", "busy", () => ({ name: `w${i}` }), now())),
    );
    expect(writes.map((w) => w.stored.version).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await store.delete("p", "segmentanalyses", "busy")).toBe(true);
    expect(await store.delete("p", "segmentanalyses", "busy")).toBe(false);
    expect((await store.put("p", "segmentanalyses", "busy", () => ({ name: "again" }), now())).stored.version).toBe(1);
  });
});
