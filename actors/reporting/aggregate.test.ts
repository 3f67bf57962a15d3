/** The scenario mixture of aggregate.ts: scenarios weighted by their share of the success. */
import { describe, expect, it } from "vitest";
import { prospectModel, scenarioAggregation } from "./aggregate.ts";

const model = (id: string, probability: number, mean: number) =>
  prospectModel(
    {
      prospectAnalysisId: id,
      prospect: { id: "p", name: "P" },
      segmentAnalysisIds: [`${id}-s`],
      dependency: { model: "independent" },
      simulation: { trials: 10_000, seed: 1 },
    },
    [{ segmentAnalysisId: `${id}-s`, name: "S", riskFactors: [{ name: "trap", probability }], volumes: { oil: { unit: "MMbbl", mean } } }],
  );

describe("reporting aggregate - multiple scenarios", () => {
  it("the overall success case mixes the scenarios by p_s·Pg_s: a likely scenario that rarely succeeds weighs little", () => {
    // A: p 0.5, Pg 1, 10 MMbbl; B: p 0.5, Pg 0.01, 1000 MMbbl. Given success, B is 0.005 / 0.505 ≈ 1%.
    const scenarios = [
      { scenario: { scenarioId: "a", name: "A", probability: 0.5, prospectAnalysisId: "pa-a" }, model: model("pa-a", 1, 10) },
      { scenario: { scenarioId: "b", name: "B", probability: 0.5, prospectAnalysisId: "pa-b" }, model: model("pa-b", 0.01, 1000) },
    ];
    const result = scenarioAggregation(
      {
        multipleScenarioAnalysisId: "m",
        prospectId: "p",
        scenarios: scenarios.map((s) => s.scenario),
        simulation: { trials: 10_000, seed: 1 },
      },
      scenarios,
    );
    const oil = result.results.resources.products.oil!;
    expect(result.results.chanceOfSuccess.pgAtLeastOne).toBeCloseTo(0.505, 12);
    expect(oil.riskedMean).toBeCloseTo(0.5 * 10 + 0.005 * 1000, 9);
    expect(oil.successCase).toMatchObject({ p90: 10, p50: 10, p10: 10 });
    expect(oil.riskedExceedance[0]!.probability).toBeCloseTo(0.505, 12);
  });
});
