/**
 * Read-your-writes across actor processes: two derrick deployments (each its own edge, reporting
 * actor and NATS connection) on one nats-server. A write acknowledged through one must be seen by
 * the very next read through the other, even when both had the older result cached.
 */
import { describe, expect } from "vitest";
import { startDerrick, type TestDerrick } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import { BUCKETS } from "../../actors/reporting/store.ts";
import { prospectAnalysis, put, reportingTest, segment } from "./helpers.ts";

const ROUNDS = 12;

/** `derrick` and `other`: two deployments on the file's server. */
const it = reportingTest().extend("other", { scope: "file", auto: true }, async ({ nats }, { onCleanup }) => {
  const other = await startDerrick(nats, { actors: ["identity", "reporting"] });
  onCleanup(() => other.cleanup());
  return other;
});

describe("reporting consistency across processes", () => {
  const aggregation = async (via: TestDerrick, path: string) => {
    const res = await via.call(`/assessments/v1/${path}`);
    expect(res.status).toBe(200);
    return { cache: res.headers.get("x-derrick-cache"), body: await json(res) };
  };
  const probability = (round: number) => 0.3 + round * 0.05;
  /** Prospect `p-<key>` with the analysis `pa-<key>` of its one segment `<segmentId>`, written through `via` (both new: 201). */
  const prospectOfOneSegment = async (via: TestDerrick, key: string, segmentId: string, name: string, pg: number) => {
    expect((await put(via, "segmentanalyses", segmentId, segment(name, pg, 10, 100, { prospectId: `p-${key}` }))).status).toBe(201);
    const analysis = prospectAnalysis(`p-${key}`, name, [segmentId], { simulation: { trials: 200, seed: 1 } });
    expect((await put(via, "prospectanalyses", `pa-${key}`, analysis)).status).toBe(201);
  };

  it("consistency - a write through one process is seen by the next read through the other, with the older result cached in both", async ({
    derrick: a,
    other: b,
  }) => {
    const writeThrough = (via: TestDerrick, round: number) =>
      put(via, "segmentanalyses", "ryw-s1", segment("RYW", probability(round), 10, 100, { prospectId: "p-ryw" }));
    await prospectOfOneSegment(a, "ryw", "ryw-s1", "RYW", probability(0));
    for (let round = 1; round <= ROUNDS; round++) {
      const [writer, reader] = round % 2 ? [a, b] : [b, a];
      // Both processes answer the current result, the second time from the cache.
      for (const via of [a, b]) await aggregation(via, "prospectanalysisaggregation/pa-ryw");
      const before = await aggregation(reader, "prospectanalysisaggregation/pa-ryw");
      expect(before.cache).toBe("hit");
      expect(before.body.segments[0].pg).toBeCloseTo(probability(round - 1), 12);
      expect((await writeThrough(writer, round)).status).toBe(200);
      const after = await aggregation(reader, "prospectanalysisaggregation/pa-ryw");
      expect(after.cache).toBe("miss");
      expect(after.body.segments[0].pg).toBeCloseTo(probability(round), 12);
      expect(after.body.chanceOfSuccess.pgAtLeastOne).toBeCloseTo(probability(round), 12);
    }
  });

  it("consistency - a delete through one process is seen by the next read through the other", async ({ derrick: a, other: b }) => {
    await prospectOfOneSegment(a, "ryw-d", "ryw-d1", "RYW delete", 0.5);
    for (const via of [a, b, b]) await aggregation(via, "prospectanalysisaggregation/pa-ryw-d");
    expect((await a.call("/assessments/v1/segmentanalyses/ryw-d1", { as: "admin", method: "DELETE" })).status).toBe(204);
    const res = await b.call("/assessments/v1/prospectanalysisaggregation/pa-ryw-d");
    expect(res.status).toBe(409);
  });

  it("consistency - after a purge of the result cache (the results' lists of inputs gone with it), a write is still seen by the other process", async ({
    derrick: a,
    other: b,
    jsm,
  }) => {
    const path = "prospectanalysisaggregation/pa-ryw-p";
    await prospectOfOneSegment(a, "ryw-p", "ryw-p1", "RYW purge", 0.4);
    await aggregation(b, path);
    expect((await aggregation(b, path)).cache).toBe("hit");
    // An operator's purge: no watch hears it, and the write below finds no result listed under its input to delete.
    await jsm.streams.purge(`KV_${BUCKETS.cache}`);
    expect((await put(a, "segmentanalyses", "ryw-p1", segment("RYW purge", 0.6, 10, 100, { prospectId: "p-ryw-p" }))).status).toBe(200);
    const after = await aggregation(b, path);
    expect(after.cache).toBe("miss");
    expect(after.body.segments[0].pg).toBeCloseTo(0.6, 12);
  });
});
