import { afterAll, describe, expect } from "vitest";
import { startDerrick, type TestDerrick } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { BUCKETS } from "../../actors/reporting/store.ts";
import { loadDemoOver } from "./helpers.ts";

// The reporting actor stops and starts within the test: its derricks are the test's own.
const it = natsTest();

/**
 * The entities bucket deleted while no reporting actor runs is made again by the next one to start:
 * the results cached from the entities that went with it must not be served then either (a hit is one
 * KV read, with no look at the inputs).
 */
describe("reporting after its entities were deleted while it was down", () => {
  let derrick: TestDerrick | undefined;
  afterAll(async () => {
    await derrick?.cleanup();
  });

  it("entities - a bucket deleted while the actor was down is made again at start, and no result cached from the old one is served", {
    timeout: 20_000,
  }, async ({ nats, jsm }) => {
    const aggregation = "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil";
    derrick = await startDerrick(nats, { actors: ["identity", "reporting"] });
    await loadDemoOver(derrick);
    expect((await derrick.call(aggregation)).status).toBe(200);
    expect((await derrick.call(aggregation)).headers.get("x-derrick-cache")).toBe("hit");
    await derrick.cleanup();
    derrick = undefined;
    expect(await jsm.streams.delete(`KV_${BUCKETS.entities}`)).toBe(true);
    derrick = await startDerrick(nats, { actors: ["identity", "reporting"] });
    expect((await derrick.call("/assessments/v1/prospectanalyses/pa-alpha-oil")).status).toBe(404);
    expect((await derrick.call(aggregation)).status).toBe(404);
  });
});
