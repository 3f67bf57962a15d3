import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { startTestNats, type TestNats } from "../harness/index.ts";
import { assessmentStore, entityKey, openStores, resultKey, type AssessmentStore } from "../../actors/reporting/store.ts";

describe("reporting store", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let store: AssessmentStore;
  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    store = assessmentStore(await openStores(nc));
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.cleanup();
  });

  const now = () => new Date().toISOString();

  it("store - a result computed from an input that changed before it was registered is dropped", async () => {
    await store.put("p", "segmentanalyses", "s1", () => ({ name: "v1" }), now());
    const key = resultKey("p", "prospect", "race");
    const tracker = store.tracker();
    await tracker.get(entityKey("p", "segmentanalyses", "s1"));
    // A writer lands between the computation's read and its registration (and finds nothing to invalidate yet).
    await store.put("p", "segmentanalyses", "s1", () => ({ name: "v2" }), now());
    await store.invalidate([entityKey("p", "segmentanalyses", "s1")]);
    expect(await store.remember(key, { stale: true }, tracker)).toBe(false);
    expect(await store.cached(key)).toBeUndefined();
  });

  it("store - a registered result is deleted by the next write of any of its inputs, and only that one", async () => {
    await store.put("p", "segmentanalyses", "a", () => ({ name: "a" }), now());
    await store.put("p", "segmentanalyses", "b", () => ({ name: "b" }), now());
    const fromA = store.tracker();
    await fromA.get(entityKey("p", "segmentanalyses", "a"));
    const fromB = store.tracker();
    await fromB.get(entityKey("p", "segmentanalyses", "b"));
    expect(await store.remember(resultKey("p", "prospect", "from-a"), { a: 1 }, fromA)).toBe(true);
    expect(await store.remember(resultKey("p", "prospect", "from-b"), { b: 1 }, fromB)).toBe(true);
    await store.put("p", "segmentanalyses", "a", () => ({ name: "a2" }), now());
    await store.invalidate([entityKey("p", "segmentanalyses", "a")]);
    expect(await store.cached(resultKey("p", "prospect", "from-a"))).toBeUndefined();
    expect(JSON.parse(new TextDecoder().decode(await store.cached(resultKey("p", "prospect", "from-b"))))).toEqual({ b: 1 });
  });

  it("store - an absent input that appears later invalidates results computed without it", async () => {
    const tracker = store.tracker();
    expect(await tracker.get(entityKey("p", "licenses", "later"))).toBeUndefined();
    expect(await store.remember(resultKey("p", "prospect", "without"), { x: 1 }, tracker)).toBe(true);
    await store.put("p", "licenses", "later", () => ({ name: "L" }), now());
    await store.invalidate([entityKey("p", "licenses", "later")]);
    expect(await store.cached(resultKey("p", "prospect", "without"))).toBeUndefined();
  });

  it("store - versions count upserts, concurrent writers all land, and a delete then re-create starts at version 1", async () => {
    const writes = await Promise.all(Array.from({ length: 10 }, (_, i) => store.put("p", "segmentanalyses", "busy", () => ({ name: `w${i}` }), now())));
    expect(writes.map((w) => w.stored.version).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await store.delete("p", "segmentanalyses", "busy")).toBe(true);
    expect(await store.delete("p", "segmentanalyses", "busy")).toBe(false);
    expect((await store.put("p", "segmentanalyses", "busy", () => ({ name: "again" }), now())).stored.version).toBe(1);
  });
});
