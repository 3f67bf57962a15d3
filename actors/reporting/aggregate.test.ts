/** The scenario mixture of aggregate.ts: scenarios weighted by their share of the success. */
import { describe, expect, it } from "vitest";
import { MAX_TREE_BYTES, outcomeNodeBytes, prospectModel, scenarioAggregation } from "./aggregate.ts";
import { MAX_REPLY_BYTES } from "../../subjects/headers.ts";

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

describe("reporting aggregate - the outcome tree's size", () => {
  it("64 segments with 128-character ids: the tree keeps what fits MAX_TREE_BYTES and folds the rest, so the reply fits one", () => {
    const ids = Array.from({ length: 64 }, (_, i) => `${"s".repeat(125)}${String(i).padStart(3, "0")}`);
    const segments = ids.map((segmentAnalysisId, i) => ({
      segmentAnalysisId,
      name: `S${i}`,
      riskFactors: [{ name: "trap", probability: 0.5 }],
      volumes: { oil: { unit: "MMbbl".padEnd(32, "x"), p90: 5, p10: 50 } },
    }));
    const pa = {
      prospectAnalysisId: "pa-wide",
      prospect: { id: "p", name: "P" },
      segmentAnalysisIds: ids,
      dependency: { model: "independent" as const },
      simulation: { trials: 20_000, seed: 1 },
    };
    const scenario = { scenarioId: "a", name: "A", probability: 1, prospectAnalysisId: "pa-wide" };
    const result = scenarioAggregation(
      { multipleScenarioAnalysisId: "m", prospectId: "p", scenarios: [scenario], simulation: { trials: 20_000, seed: 1 } },
      [{ scenario, model: prospectModel(pa, segments) }],
    );
    const nodes = result.outcomeTree.nodes;
    const outcomes = nodes.filter((n) => n.kind === "outcome");
    const bound = outcomeNodeBytes(ids);
    // Every node within the estimate, the outcomes within the budget, and the rest folded with their probability.
    for (const node of nodes) expect(JSON.stringify(node).length + 1).toBeLessThanOrEqual(bound);
    expect(outcomes.length).toBe(Math.floor(MAX_TREE_BYTES / bound) - 1);
    const other = nodes.find((n) => n.kind === "otherOutcomes") as { outcomes: number; jointProbability: number } | undefined;
    expect(other?.outcomes).toBeGreaterThan(0);
    const joint = nodes.filter((n) => n.kind !== "root" && n.kind !== "scenario").reduce((a, n) => a + (n.jointProbability as number), 0);
    expect(joint).toBeCloseTo(1, 9);
    expect(JSON.stringify(result).length).toBeLessThan(MAX_REPLY_BYTES);
  });
});
