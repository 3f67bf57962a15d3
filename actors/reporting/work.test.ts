/** The work estimates that decide between 200 and 202 (work.ts): pure, from the inputs' sizes. */
import { describe, expect, it } from "vitest";
import { prospectModel } from "./aggregate.ts";
import { ASYNC_WORK_MIN, aggregationWork } from "./work.ts";

const model = (segments: number, trials: number, products = 1) =>
  prospectModel(
    {
      prospectAnalysisId: "pa",
      prospect: { id: "p", name: "P" },
      segmentAnalysisIds: Array.from({ length: segments }, (_, i) => `s${i}`),
      dependency: { model: "commonFactor", commonFactors: [{ name: "charge", probability: 0.8 }] },
      simulation: { trials, seed: 1 },
    },
    Array.from({ length: segments }, (_, i) => ({
      segmentAnalysisId: `s${i}`,
      name: `S${i}`,
      riskFactors: [{ name: "trap", probability: 0.5 }],
      volumes: Object.fromEntries(["oil", "gas", "oilEquivalent"].slice(0, products).map((p) => [p, { unit: "u", p90: 5, p10: 50 }])),
    })),
  );

describe("reporting work", () => {
  it("a prospect's work: per trial, each segment's outcome and a draw per product it holds, the order statistics per product and the trial's overhead", () => {
    expect(aggregationWork.prospect(model(10, 100_000, 2))).toBe(100_000 * (10 * 3 + 2 + 4));
    expect(aggregationWork.prospect(model(64, 1_000_000, 2))).toBe(1_000_000 * (64 * 3 + 2 + 4));
  });

  it("the limits' largest aggregations are tasks, the everyday ones answered at once", () => {
    expect(aggregationWork.prospect(model(64, 1_000_000))).toBeGreaterThanOrEqual(ASYNC_WORK_MIN);
    expect(aggregationWork.prospect(model(10, 100_000, 2))).toBeLessThan(ASYNC_WORK_MIN);
    expect(aggregationWork.fullcycle(model(64, 1_000_000), false)).toBe(0);
    expect(aggregationWork.scenarios([model(16, 1000), model(16, 1000)], 1000)).toBeLessThan(ASYNC_WORK_MIN);
    expect(aggregationWork.scenarios([model(64, 1_000_000)], 1_000_000)).toBeGreaterThanOrEqual(ASYNC_WORK_MIN);
    const fifty = Array.from({ length: 50 }, () => model(1, 1_000_000));
    expect(aggregationWork.scenarios(fifty, 1_000_000)).toBeGreaterThanOrEqual(ASYNC_WORK_MIN);
    // Ten one-segment scenarios: each trial's overhead, not its one draw, is most of the work.
    expect(aggregationWork.scenarios(fifty.slice(0, 10), 1_000_000)).toBeGreaterThanOrEqual(ASYNC_WORK_MIN);
  });

  it("a sampled outcome tree (beyond 16 segments) adds its draws and its outcomes", () => {
    const m = model(17, 1000);
    const simulation = aggregationWork.prospect(m);
    expect(aggregationWork.scenarios([m], 1000)).toBe(simulation + 1000 * 17 + 1000 * 17 * 8);
  });
});
