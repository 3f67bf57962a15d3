import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { connectNats } from "../../platform/nats.ts";
import { BUCKETS } from "../../actors/reporting/store.ts";
import { loadDemoOver } from "./helpers.ts";

/**
 * The entities bucket deleted while no reporting actor runs is made again by the next one to start:
 * the results cached from the entities that went with it must not be served then either (a hit is one
 * KV read, with no look at the inputs).
 */
describe("reporting after its entities were deleted while it was down", () => {
  let nats: TestNats;
  let derrick: TestDerrick | undefined;
  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("entities - a bucket deleted while the actor was down is made again at start, and no result cached from the old one is served", {
    timeout: 20_000,
  }, async () => {
    const aggregation = "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil";
    derrick = await startDerrick(nats, { actors: ["identity", "reporting"] });
    await loadDemoOver(derrick);
    expect((await derrick.call(aggregation)).status).toBe(200);
    expect((await derrick.call(aggregation)).headers.get("x-derrick-cache")).toBe("hit");
    await derrick.cleanup();
    derrick = undefined;
    const nc = await connectNats(nats.url, "deleted-while-down");
    expect(await (await jetstreamManager(nc)).streams.delete(`KV_${BUCKETS.entities}`)).toBe(true);
    await nc.close();
    derrick = await startDerrick(nats, { actors: ["identity", "reporting"] });
    expect((await derrick.call("/assessments/v1/prospectanalyses/pa-alpha-oil")).status).toBe(404);
    expect((await derrick.call(aggregation)).status).toBe(404);
  });
});
