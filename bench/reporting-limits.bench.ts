/**
 * Every reporting aggregation at its input limits, cold: the computation as a function call (models built from the
 * stored entities, the aggregation, its JSON), each run from nothing cached. Beside each case, a plain loop drawing
 * as many uniforms from the same generator as the case's estimated work (work.ts: per trial, a draw per segment and
 * per product it holds, ...): the ratio is the cost of one unit of work in uniforms, whatever the machine's load, and
 * should be alike across cases when the estimate that decides 200 or 202 is sound.
 *
 * BENCH_LIMITS_RUNS (default 2) runs per case; BENCH_LIMITS_CASES=a,b picks cases by key.
 */
import { createRandom } from "../actors/reporting/math/prng.ts";
import {
  fullCycle,
  licenseAggregation,
  prospectAggregation,
  prospectDetails,
  prospectModel,
  scenarioAggregation,
  simulateProspect,
} from "../actors/reporting/aggregate.ts";
import { aggregationWork, ASYNC_WORK_MIN } from "../actors/reporting/work.ts";
import { validateEntity } from "../actors/reporting/validate.ts";
import { report, type LoadResult } from "./lib.ts";

const RUNS = Number(process.env.BENCH_LIMITS_RUNS ?? 2);
const PICK = process.env.BENCH_LIMITS_CASES?.split(",");
const UNITS = { oil: "MMbbl", gas: "Bcf", condensate: "MMbbl", ngl: "MMbbl", totalLiquids: "MMbbl", oilEquivalent: "MMboe" } as const;
type ProductName = keyof typeof UNITS;

const segment = (key: string, i: number, products: readonly ProductName[]) =>
  validateEntity("segmentanalyses", `${key}${i}`, "segmentAnalysisId", {
    name: `${key} segment ${i}`,
    prospectId: `p-${key}`,
    riskFactors: [{ name: "trap", probability: 0.3 + (i % 16) / 40 }],
    volumes: Object.fromEntries(products.map((p, k) => [p, { unit: UNITS[p], p90: 5 + i + k, p10: 50 + 5 * i + k }])),
  }) as never;

const analysis = (key: string, segments: number, model: string, trials: number, products: readonly ProductName[]) => {
  const segs = Array.from({ length: segments }, (_, i) => segment(key, i, products));
  const pa = validateEntity("prospectanalyses", `pa-${key}-${model}`, "prospectAnalysisId", {
    prospect: { id: `p-${key}`, name: key },
    segmentAnalysisIds: Array.from({ length: segments }, (_, i) => `${key}${i}`),
    dependency: { model, commonFactors: [{ name: "charge", probability: 0.8 }] },
    simulation: { trials, seed: 3 },
    mefs: { value: 40, unit: UNITS[products[0]!] },
  }) as never;
  return () => prospectModel(pa, segs);
};

const scenarios = (key: string, count: number, segments: number, model: string, trials: number) => {
  const models = Array.from({ length: count }, (_, s) => analysis(`${key}${s}x`, segments, model, trials, ["oil"]));
  const msa = validateEntity("multiplescenarioanalyses", `msa-${key}`, "multipleScenarioAnalysisId", {
    prospectId: `p-${key}`,
    scenarios: models.map((_, s) => ({ scenarioId: `sc${s}`, name: `case ${s}`, probability: 1 / count, prospectAnalysisId: `pa-${s}` })),
    simulation: { trials, seed: 3 },
  }) as never as Parameters<typeof scenarioAggregation>[0];
  return () => {
    const inputs = msa.scenarios.map((scenario, s) => ({ scenario, model: models[s]!() }));
    return { msa, inputs };
  };
};

const fullCycleAnalysis = validateEntity("fullcycleanalyses", "fc-limits", "fullCycleAnalysisId", {
  prospectAnalysisId: "pa-fc-commonFactor",
  name: "Development",
  resourceCase: "p10",
  setup: { startYear: 2027, npvYear: 2027, discountRate: 0.08 },
  assumptions: {
    prices: [{ product: "oil", unit: "USD/bbl", series: [{ year: 2027, value: 70 }] }],
    fiscal: { type: "royaltyTax", royaltyRate: 0.1, incomeTaxRate: 0.5 },
    workingInterest: 0.4,
    dryHoleCost: 50,
  },
  production: {
    firstYear: 2030,
    wellsPerYear: 2,
    wellRatePerYear: 3,
    plateauFraction: 0.1,
    declineStartRemaining: 0.5,
    declineRate: 0.12,
  },
  costs: { capex: [{ year: 2028, value: 400 }], opexFixed: 20, opexPerUnit: 5 },
}) as never;

type Case = { key: string; name: string; work: number; run: () => unknown };

const limits = {
  segments: 64,
  trials: 1_000_000,
};
const pa2 = analysis("p2", limits.segments, "commonFactor", limits.trials, ["oil", "oilEquivalent"]);
const pa6 = analysis("p6", limits.segments, "commonFactor", limits.trials, Object.keys(UNITS) as ProductName[]);
const paFc = analysis("fc", limits.segments, "commonFactor", limits.trials, ["oil", "oilEquivalent"]);
const tree16 = (() => {
  const a = analysis("t16a", 16, "commonFactor", 1000, ["oil"]);
  const b = analysis("t16b", 16, "independent", 1000, ["oil"]);
  const msa = validateEntity("multiplescenarioanalyses", "msa-t16", "multipleScenarioAnalysisId", {
    prospectId: "p-t16",
    scenarios: [
      { scenarioId: "sc0", name: "commonFactor", probability: 0.6, prospectAnalysisId: "pa-a" },
      { scenarioId: "sc1", name: "independent", probability: 0.4, prospectAnalysisId: "pa-b" },
    ],
    simulation: { trials: 1000, seed: 3 },
  }) as never as Parameters<typeof scenarioAggregation>[0];
  return () => ({ msa, inputs: [a(), b()].map((model, s) => ({ scenario: msa.scenarios[s]!, model })) });
})();
const wide = scenarios("w", 1, limits.segments, "commonFactor", limits.trials);
const many = scenarios("m", 50, 1, "commonFactor", limits.trials);
// A license at its limits: 500 linked prospects, each with one 64-segment analysis (chances only: no simulation).
const linked = Array.from({ length: 500 }, (_, p) => analysis(`l${p}x`, limits.segments, "independent", 10_000, ["oil"]));
const license = validateEntity("licenses", "lic-limits", "licenseId", {
  name: "PL 999",
  nation: { code: "NO", name: "Norway" },
  versions: [
    {
      versionNumber: 1,
      validFrom: "2020-01-01",
      blocks: [{ blockId: "15/9" }],
      licensees: [{ companyId: "c1", companyName: "Nordic", interest: 1, isOperator: true }],
      prospectIds: linked.map((_, p) => `p-l${p}x`),
    },
  ],
}) as never;

const workOf = (make: () => { msa: Parameters<typeof scenarioAggregation>[0]; inputs: Parameters<typeof scenarioAggregation>[1] }) => {
  const { msa, inputs } = make();
  return aggregationWork.scenarios(
    inputs.map((i) => i.model),
    msa.simulation.trials,
  );
};

function scenarioCase(key: string, name: string, make: Parameters<typeof workOf>[0]): Case {
  return {
    key,
    name,
    work: workOf(make),
    run: () => {
      const { msa, inputs } = make();
      return scenarioAggregation(msa, inputs);
    },
  };
}

const cases: Case[] = [
  {
    key: "license",
    name: "license: 500 linked prospects × one 64-segment analysis",
    work: 0,
    run: () => licenseAggregation(license, new Map(linked.map((make, p) => [`p-l${p}x`, [{ model: make(), version: 1 }]]))),
  },
  {
    key: "details",
    name: "details: 64 segments, 6 products",
    work: 0,
    run: () => prospectDetails(pa6()),
  },
  {
    key: "prospect2",
    name: "prospect: 64 segments × 1,000,000 trials, 2 products",
    work: aggregationWork.prospect(pa2()),
    run: () => prospectAggregation(pa2(), [], 1),
  },
  {
    key: "prospect6",
    name: "prospect: 64 segments × 1,000,000 trials, 6 products",
    work: aggregationWork.prospect(pa6()),
    run: () => prospectAggregation(pa6(), [], 1),
  },
  {
    key: "fullcycle",
    name: "full cycle: p10 case of 64 segments × 1,000,000 trials",
    work: aggregationWork.fullcycle(paFc(), true),
    run: () => {
      const m = paFc();
      return fullCycle(
        { fc: fullCycleAnalysis, version: 1 },
        m,
        simulateProspect(m),
        ["project", "contractor", "workingInterest"],
        undefined,
      );
    },
  },
  scenarioCase("tree16", "scenarios: two 16-segment scenarios (2^16-outcome tree), 1,000 trials", tree16),
  scenarioCase("wide", "scenarios: one of 64 segments × 1,000,000 trials", wide),
  scenarioCase("many", "scenarios: 50 of one segment × 1,000,000 trials", many),
].filter((c) => !PICK || PICK.includes(c.key));

/** The baseline: `draws` uniforms from the same seeded generator, summed so none is optimized away. */
function drawLoop(draws: number): number {
  const rng = createRandom(3);
  let sum = 0;
  for (let i = 0; i < draws; i++) sum += rng.uniform();
  return sum;
}

const timed = (run: () => unknown) => {
  const t0 = performance.now();
  const result = run();
  const bytes = JSON.stringify(result).length;
  return { ms: performance.now() - t0, bytes };
};

const results: LoadResult[] = [];
const ratios: Record<string, number> = {};
const rows: Array<Record<string, string | number>> = [];
for (const c of cases) {
  const runs: number[] = [];
  const baselines: number[] = [];
  let bytes = 0;
  for (let r = 0; r < RUNS; r++) {
    Bun.gc(true);
    const t = timed(c.run);
    runs.push(t.ms);
    bytes = t.bytes;
    if (c.work > 0) {
      const t0 = performance.now();
      drawLoop(c.work);
      baselines.push(performance.now() - t0);
    }
  }
  runs.sort((a, b) => a - b);
  baselines.sort((a, b) => a - b);
  const median = runs[Math.floor((runs.length - 1) / 2)]!;
  const base = baselines.length ? baselines[Math.floor((baselines.length - 1) / 2)]! : Number.NaN;
  results.push({
    name: `${c.name} (${(bytes / 1e6).toFixed(1)} MB of JSON)`,
    count: runs.length,
    errors: 0,
    seconds: runs.reduce((a, b) => a + b, 0) / 1000,
    opsPerSec: runs.length / (runs.reduce((a, b) => a + b, 0) / 1000),
    p50Ms: median,
    p99Ms: runs.at(-1)!,
    maxMs: runs.at(-1)!,
  });
  if (c.work > 0) ratios[`${c.key} ÷ as many uniforms as its work (${c.work.toLocaleString("en")})`] = median / base;
  rows.push({
    case: c.key,
    "compute + JSON s": (median / 1000).toFixed(2),
    "baseline (work uniforms) s": Number.isFinite(base) ? (base / 1000).toFixed(3) : "-",
    ratio: Number.isFinite(base) ? (median / base).toFixed(1) : "-",
    work: c.work.toLocaleString("en"),
    answer: c.work >= ASYNC_WORK_MIN ? "202 + task" : "200",
  });
}
console.table(rows);
report({
  bench: "reporting-limits",
  results,
  ratios,
  notes: [
    `${RUNS} runs per case, each computed from nothing cached (models, aggregation, JSON); p50 is the median`,
    `work: the estimate the actor decides 200 or 202 by (actors/reporting/work.ts); ${ASYNC_WORK_MIN.toLocaleString("en")} and above answer 202 with a task`,
  ],
});
process.exit(0);
