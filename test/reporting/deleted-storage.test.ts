import { describe, expect } from "vitest";
import type { JetStreamManager } from "@nats-io/jetstream";
import { json } from "../harness/json.ts";
import { BUCKETS } from "../../actors/reporting/store.ts";
import { loadDemoOver, put, reportingTest, segment } from "./helpers.ts";

const it = reportingTest();

/**
 * The reporting buckets deleted at runtime (an operator, a tool, a lost store) are made again on their
 * next use, as every store of derrick is. Before, every reporting request answered 500 until a restart.
 */
describe("reporting after its storage was deleted", () => {
  it.beforeAll(async ({ derrick }) => {
    await loadDemoOver(derrick);
  });

  const deleteBucket = async (jsm: JetStreamManager, bucket: string) => expect(await jsm.streams.delete(`KV_${bucket}`)).toBe(true);

  it("cache - a deleted result cache is made again: the aggregation is computed again, then served from the new cache", async ({
    derrick,
    jsm,
  }) => {
    const path = "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil";
    const first = await derrick.call(path);
    expect(first.status).toBe(200);
    const expected = await json(first);
    await deleteBucket(jsm, BUCKETS.cache);
    const recomputed = await derrick.call(path);
    expect(recomputed.status, await recomputed.clone().text()).toBe(200);
    expect(recomputed.headers.get("x-derrick-cache")).toBe("miss");
    expect(await json(recomputed)).toEqual(expected);
    const hit = await derrick.call(path);
    expect(hit.headers.get("x-derrick-cache")).toBe("hit");
  });

  it("entities - a deleted entities bucket is made again: what it held is gone (404), new writes land and are read back with their versions", async ({
    derrick,
    jsm,
  }) => {
    expect((await put(derrick, "segmentanalyses", "seg-kept", segment("Kept", 0.5, 10, 90))).status).toBe(201);
    const aggregation = "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil";
    expect((await derrick.call(aggregation)).headers.get("x-derrick-cache")).toBe("hit");
    await deleteBucket(jsm, BUCKETS.entities);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-kept")).status).toBe(404);
    // Nothing cached from the entities that went with the bucket is served.
    expect((await derrick.call(aggregation)).status).toBe(404);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-kept?version=1")).status).toBe(404);
    const created = await put(derrick, "segmentanalyses", "seg-new", segment("New", 0.5, 10, 90));
    expect(created.status, await created.clone().text()).toBe(201);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-new?version=1")).status).toBe(200);
  });
});
