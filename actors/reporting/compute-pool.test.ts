/** The compute worker: jobs computed on another thread answer exactly what this thread computes, failures included. */
import { afterAll, describe, expect, it } from "vitest";
import { DerrickError } from "../../subjects/index.ts";
import { encodeJson } from "../runtime/kv.ts";
import { prospectModel } from "./aggregate.ts";
import { ComputePool } from "./compute-pool.ts";
import { computeJob, type AggregationJob } from "./jobs.ts";

const model = (trials: number) =>
  prospectModel(
    {
      prospectAnalysisId: "pa-w",
      prospect: { id: "p", name: "P" },
      segmentAnalysisIds: ["s1", "s2"],
      dependency: { model: "independent" },
      simulation: { trials, seed: 7 },
    },
    [
      {
        segmentAnalysisId: "s1",
        name: "S1",
        riskFactors: [{ name: "trap", probability: 0.4 }],
        volumes: { oil: { unit: "MMbbl", p90: 5, p10: 50 } },
      },
      {
        segmentAnalysisId: "s2",
        name: "S2",
        riskFactors: [{ name: "seal", probability: 0.7 }],
        volumes: { oil: { unit: "MMbbl", mean: 12 } },
      },
    ],
  );

const pool = new ComputePool();
afterAll(() => pool.stop());

describe("reporting compute pool", () => {
  it("a prospect and a scenario job computed in the worker are byte for byte what this thread computes", async () => {
    const m = model(20_000);
    const scenario = { scenarioId: "a", name: "A", probability: 1, prospectAnalysisId: "pa-w" };
    const jobs: AggregationJob[] = [
      { kind: "prospect", model: m, licenses: [{ licenseId: "l1", name: "PL 1" }], version: 3 },
      {
        kind: "scenarios",
        msa: { multipleScenarioAnalysisId: "m", prospectId: "p", scenarios: [scenario], simulation: { trials: 20_000, seed: 7 } },
        scenarios: [{ scenario, model: m }],
      },
    ];
    const off = await Promise.all(jobs.map((job) => pool.run(job)));
    for (const [i, job] of jobs.entries())
      expect(new TextDecoder().decode(off[i])).toBe(new TextDecoder().decode(encodeJson(computeJob(job))));
    expect(pool.size).toBe(0);
  });

  it("a job the worker cannot compute rejects with the error this thread would raise, and the worker goes on", async () => {
    const broken = {
      kind: "prospect",
      model: { ...model(1_000), segments: undefined },
      licenses: [],
      version: 1,
    } as unknown as AggregationJob;
    const failure = await pool.run(broken).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DerrickError);
    expect((failure as DerrickError).status).toBe(500);
    expect((await pool.run({ kind: "prospect", model: model(1_000), licenses: [], version: 1 })).length).toBeGreaterThan(0);
  });

  it("a worker that exits fails the jobs it held instead of leaving them waiting", async () => {
    const crashing = new ComputePool(new URL("data:text/javascript,self.onmessage = () => process.exit(3);"));
    await expect(crashing.run({ kind: "prospect", model: model(1_000), licenses: [], version: 1 })).rejects.toThrow(/worker/);
    crashing.stop();
  });
});
