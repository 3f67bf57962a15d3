/** Reference cases G1–G15 of docs/reporting.md and the invariants of the aggregation math. */
import { describe, expect, it } from "vitest";
import { chanceOfSuccess, jointProbabilityPartial, riskedMean, DependencyModel } from "./chance.ts";
import { fitLognormal, swansonMean, volumeModel } from "./lognormal.ts";
import {
  apportion,
  drawSuccesses,
  exceedanceFraction,
  simulate,
  successCaseDrawer,
  successCasePercentiles,
  successCaseSummary,
} from "./monte-carlo.ts";
import { EXACT_MAX_SEGMENTS, OutcomeCounts, allotOutcomes, outcomeTree, type TreeInput } from "./outcome-tree.ts";
import { breakevenPg, breakevenPrice, emv, irr, maxExposure, npv, payoutYear, profitToInvestment } from "./indicators.ts";
import { cashFlows, priceAt, productionProfile } from "./cashflow.ts";
import { areaKm2, bbox, geometryProblems } from "./polygon.ts";
import { createRandom } from "./prng.ts";

/** A field of 100 units: two wells a year at 3, a 13% plateau, decline from half produced at 18% a year. */
const FIELD = {
  firstYear: 2030,
  recoverable: 100,
  wellsPerYear: 2,
  wellRatePerYear: 3,
  plateauFraction: 0.13,
  declineStartRemaining: 0.5,
  declineRate: 0.18,
  economicLimit: 0,
  maxYears: 200,
};

/** A closed ring around a rectangle, counter-clockwise from its lower-left corner. */
const rectangle = (x0: number, y0: number, x1: number, y1: number) => [
  [x0, y0],
  [x1, y0],
  [x1, y1],
  [x0, y1],
  [x0, y0],
];

/** Values of consecutive years from `from`: a cash-flow series as the indicators take it. */
const yearly = (values: number[], from = 2026) => values.map((value, i) => ({ year: from + i, value }));

const MODELS = [DependencyModel.independent, DependencyModel.commonFactor, DependencyModel.fullyDependent] as const;
const G3 = { pc: 0.6, ps: [0.5, 0.4, 0.3], means: [100, 50, 30] };

describe("reporting math - chance of success", () => {
  it("G1 - two independent segments 0.30 and 0.60: both 0.18, A only 0.12, B only 0.42, none 0.28, at least one 0.72", () => {
    const chance = chanceOfSuccess({ model: "independent", pc: 1, ps: [0.3, 0.6] });
    expect(chance.pgAtLeastOne).toBeCloseTo(0.72, 12);
    expect(chance.pgAll).toBeCloseTo(0.18, 12);
    const tree = outcomeTree({ model: "independent", pc: 1, ps: [0.3, 0.6], means: [1, 1], trials: 0, seed: 1 });
    const leaf = (a: boolean, b: boolean) => tree.leaves.find((l) => l.states[0] === a && l.states[1] === b)!.probability;
    expect(leaf(true, true)).toBeCloseTo(0.18, 12);
    expect(leaf(true, false)).toBeCloseTo(0.12, 12);
    expect(leaf(false, true)).toBeCloseTo(0.42, 12);
    expect(leaf(false, false)).toBeCloseTo(0.28, 12);
  });

  it("G2 - a zone with Pg 0.30 and success mean 60 has a risked mean of 18", () => {
    expect(riskedMean([0.3], [60])).toBeCloseTo(18, 12);
  });

  it("G3 - Pg_i, the risked mean under every model, P(≥1) and the success-case mean per model", () => {
    const expected = {
      independent: { p: 0.56376, mean: 84.078 },
      commonFactor: { p: 0.474, mean: 100.0 },
      fullyDependent: { p: 0.3, mean: 158.0 },
    };
    for (const model of MODELS) {
      const chance = chanceOfSuccess({ model, pc: G3.pc, ps: G3.ps });
      chance.pg.forEach((p, i) => expect(p).toBeCloseTo([0.3, 0.24, 0.18][i]!, 12));
      const risked = riskedMean(chance.pg, G3.means);
      expect(risked).toBeCloseTo(47.4, 10);
      expect(chance.pgAtLeastOne).toBeCloseTo(expected[model].p, 10);
      expect(risked / chance.pgAtLeastOne).toBeCloseTo(expected[model].mean, 2);
    }
  });

  it("chance - the success-case drawer gives every outcome its exact probability given at least one success, for every model", () => {
    for (const model of MODELS) {
      const { pSuccess, draw } = successCaseDrawer(model, G3.pc, G3.ps);
      const rng = createRandom(3);
      const out = new Uint8Array(3);
      const counts = new Map<string, number>();
      const trials = 200_000;
      for (let t = 0; t < trials; t++) {
        draw(rng, out);
        const key = out.join("");
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      expect(counts.get("000")).toBeUndefined();
      for (const leaf of outcomeTree({ model, pc: G3.pc, ps: G3.ps, means: G3.means, trials: 0, seed: 1 }).leaves) {
        const key = leaf.states.map((s) => (s ? 1 : 0)).join("");
        if (key === "000") continue;
        expect(Math.abs((counts.get(key) ?? 0) / trials - leaf.probability / pSuccess)).toBeLessThan(0.004);
      }
    }
  });

  it("G8 - partial dependency d = 0.5 of two 0.5 outcomes: both 0.375, at least one 0.625, B given A 0.75", () => {
    const joint = jointProbabilityPartial(0.5, 0.5, 0.5);
    expect(joint.both).toBeCloseTo(0.375, 12);
    expect(joint.atLeastOne).toBeCloseTo(0.625, 12);
    expect(joint.bGivenA).toBeCloseTo(0.75, 12);
  });

  it("chance - the success-case draws reproduce every model's Pg_i and risked mean within 2%; the chance of success is exact", () => {
    // The trials are drawn given at least one success (the success case), so P(≥1) is not sampled but exact.
    for (const model of MODELS) {
      const segments = G3.ps.map((ps, i) => ({ ps, volumes: { oil: volumeModel({ mean: G3.means[i]! }) } }));
      const sim = simulate({ model, pc: G3.pc, segments, products: ["oil"], trials: 100_000, seed: 7 });
      const exact = chanceOfSuccess({ model, pc: G3.pc, ps: G3.ps }).pgAtLeastOne;
      expect(sim.pSuccess).toBeCloseTo(exact, 12);
      expect(sim.anySuccess.every((s) => s === 1)).toBe(true);
      // Segment i alone holds G3.means[i]: recover how often it succeeded from the totals.
      const mean = sim.totals.oil!.reduce((a, b) => a + b, 0) / sim.trials;
      expect(Math.abs(mean * sim.pSuccess - 47.4) / 47.4).toBeLessThan(0.02);
      expect(Math.abs(mean - 47.4 / exact) / (47.4 / exact)).toBeLessThan(0.02);
      const withFirst = sim.totals.oil!.filter((v) => v >= 100).length / sim.trials;
      expect(Math.abs(withFirst * sim.pSuccess - 0.3) / 0.3).toBeLessThan(0.02);
    }
  });
});

describe("reporting math - volumes", () => {
  it("G4 - lognormal from P90 20 and P10 180: P50 60, σ 0.857252, mean 86.642, mode 28.774, Swanson 84.0", () => {
    const d = fitLognormal(20, 180);
    expect(d.p50).toBeCloseTo(60, 10);
    expect(d.sigma).toBeCloseTo(0.857252, 6);
    expect(d.mean).toBeCloseTo(86.642, 3);
    expect(d.mode).toBeCloseTo(28.774, 3);
    expect(swansonMean(20, d.p50, 180)).toBeCloseTo(84.0, 10);
  });

  it("G4 - sampled percentiles of the fitted lognormal land within 2% of P90, P50 and P10", () => {
    const sim = simulate({
      model: "independent",
      pc: 1,
      segments: [{ ps: 1, volumes: { oil: volumeModel({ p90: 20, p10: 180 }) } }],
      products: ["oil"],
      trials: 100_000,
      seed: 3,
    });
    const p = successCasePercentiles(sim, "oil");
    expect(Math.abs(p.p90 - 20) / 20).toBeLessThan(0.02);
    expect(Math.abs(p.p50 - 60) / 60).toBeLessThan(0.02);
    expect(Math.abs(p.p10 - 180) / 180).toBeLessThan(0.02);
  });

  it("volumes - a rare success still has its success-case distribution: Pg 1e-4 over 20,000 trials gives the lognormal's P90, P50, P10 within 3%", () => {
    // Drawn unconditionally, ~2 of the trials succeed (none, about one run in seven): the success case was 2 values, or all 0 with a mean of 86.6.
    for (const model of MODELS)
      for (const seed of [1, 2, 3]) {
        const sim = simulate({
          model,
          pc: 0.01,
          segments: [{ ps: 0.01, volumes: { oil: volumeModel({ p90: 20, p10: 180 }) } }],
          products: ["oil"],
          trials: 20_000,
          seed,
        });
        const p = successCasePercentiles(sim, "oil");
        expect(Math.abs(p.p90 - 20) / 20).toBeLessThan(0.03);
        expect(Math.abs(p.p50 - 60) / 60).toBeLessThan(0.03);
        expect(Math.abs(p.p10 - 180) / 180).toBeLessThan(0.03);
        // The risked exceedance starts at the chance of success, exactly.
        expect(successCaseSummary(sim, "oil").riskedExceedance[0]!.probability).toBeCloseTo(1e-4, 15);
      }
  });

  it("G15 - percentiles do not add: the stochastic sum of independent volumes has P90 above and P10 below the column sums, the same mean", () => {
    const inputs = [
      { p90: 1, p10: 6 },
      { p90: 2, p10: 7 },
      { p90: 1.5, p10: 6.5 },
    ];
    const segments = inputs.map((v) => ({ ps: 1, volumes: { oil: volumeModel(v) } }));
    const sim = simulate({ model: "independent", pc: 1, segments, products: ["oil"], trials: 200_000, seed: 11 });
    const sum = successCasePercentiles(sim, "oil");
    const columnP90 = inputs.reduce((a, v) => a + v.p90, 0);
    const columnP10 = inputs.reduce((a, v) => a + v.p10, 0);
    expect(sum.p90).toBeGreaterThan(columnP90);
    expect(sum.p10).toBeLessThan(columnP10);
    const exactMean = segments.reduce((a, s) => a + s.volumes.oil.mean, 0);
    const sampledMean = sim.totals.oil!.reduce((a, b) => a + b, 0) / sim.trials;
    expect(Math.abs(sampledMean - exactMean) / exactMean).toBeLessThan(0.01);
  });

  it("volumes - p90 ≤ p50 ≤ p10 for every model and seed", () => {
    for (const model of MODELS)
      for (const seed of [1, 2, 3]) {
        const segments = G3.ps.map((ps, i) => ({ ps, volumes: { oil: volumeModel({ p90: G3.means[i]! / 3, p10: G3.means[i]! * 2 }) } }));
        const p = successCasePercentiles(simulate({ model, pc: G3.pc, segments, products: ["oil"], trials: 20_000, seed }), "oil");
        expect(p.p90).toBeLessThanOrEqual(p.p50);
        expect(p.p50).toBeLessThanOrEqual(p.p10);
      }
  });

  it("volumes - the same seed gives the same numbers, another seed different ones", () => {
    const run = (seed: number) => {
      const segments = [{ ps: 0.5, volumes: { oil: volumeModel({ p90: 20, p10: 180 }) } }];
      return successCasePercentiles(simulate({ model: "commonFactor", pc: 0.8, segments, products: ["oil"], trials: 10_000, seed }), "oil");
    };
    expect(run(42)).toEqual(run(42));
    expect(run(42)).not.toEqual(run(43));
    const a = createRandom(9);
    const b = createRandom(9);
    for (let i = 0; i < 100; i++) expect(a.uniform()).toBe(b.uniform());
  });

  it("prng - the generator is xoshiro128**: state {1, 2, 3, 4} gives the reference outputs", () => {
    const rng = createRandom(0) as unknown as { s0: number; s1: number; s2: number; s3: number; uniform(): number };
    Object.assign(rng, { s0: 1, s1: 2, s2: 3, s3: 4 });
    expect(Array.from({ length: 5 }, () => Math.round(rng.uniform() * 2 ** 32))).toEqual([11520, 0, 5927040, 70819200, 2031721883]);
  });

  it("volumes - the risked exceedance curve starts at the chance of success and never rises", () => {
    const segments = G3.ps.map((ps, i) => ({ ps, volumes: { oil: volumeModel({ p90: G3.means[i]! / 3, p10: G3.means[i]! * 2 }) } }));
    const sim = simulate({ model: "commonFactor", pc: G3.pc, segments, products: ["oil"], trials: 50_000, seed: 4 });
    const { riskedExceedance: curve } = successCaseSummary(sim, "oil");
    expect(Math.abs(curve[0]!.probability - 0.474) / 0.474).toBeLessThan(0.02);
    for (let i = 1; i < curve.length; i++) {
      expect(curve[i]!.volume).toBeGreaterThanOrEqual(curve[i - 1]!.volume);
      expect(curve[i]!.probability).toBeLessThanOrEqual(curve[i - 1]!.probability);
    }
  });

  it("volumes - the commercial chance is the fraction of trials reaching the MEFS", () => {
    const segments = [{ ps: 1, volumes: { oil: volumeModel({ mean: 10 }) } }];
    const sim = simulate({ model: "commonFactor", pc: 0.5, segments, products: ["oil"], trials: 50_000, seed: 5 });
    expect(exceedanceFraction(sim, "oil", 5)).toBeCloseTo(0.5, 1);
    expect(exceedanceFraction(sim, "oil", 11)).toBe(0);
  });
});

describe("reporting math - scenario mixtures", () => {
  it("apportion - scenario shares of the trials add up to the trials exactly (largest remainder), in proportion, none negative", () => {
    expect(apportion([1, 1, 1], 100)).toEqual([34, 33, 33]);
    expect(apportion([0.5, 0.5], 101)).toEqual([51, 50]);
    expect(apportion([0.7 * 0.3, 0.3 * 0.6], 20_000)).toEqual([10769, 9231]);
    expect(apportion([0, 2, 0], 7)).toEqual([0, 7, 0]);
    expect(apportion([0, 0], 10)).toEqual([0, 0]);
    const rng = createRandom(5);
    const random = () => rng.uniform();
    for (let run = 0; run < 200; run++) {
      const weights = Array.from({ length: 1 + Math.floor(random() * 50) }, () => (random() < 0.1 ? 0 : random()));
      const total = 100 + Math.floor(random() * 1_000_000);
      const counts = apportion(weights, total);
      const sum = weights.reduce((a, b) => a + b, 0);
      if (sum === 0) continue;
      expect(counts.reduce((a, b) => a + b, 0)).toBe(total);
      counts.forEach((c, i) => expect(Math.abs(c - (weights[i]! / sum) * total)).toBeLessThan(1));
    }
  });
});

describe("reporting math - outcome trees", () => {
  const sumOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  it("trees - leaf probabilities and common failure sum to 1 and Σ joint × volume is the risked mean, for every model", () => {
    for (const model of MODELS) {
      const tree = outcomeTree({ model, pc: G3.pc, ps: G3.ps, means: G3.means, trials: 0, seed: 1 });
      expect(sumOf(tree.leaves.map((l) => l.probability)) + (tree.commonFailure ?? 0)).toBeCloseTo(1, 12);
      expect(sumOf(tree.leaves.map((l) => l.probability * l.volumeMean))).toBeCloseTo(47.4, 10);
    }
  });

  it("trees - a common factor gives 1 + 2^n outcomes, full dependence n + 1 nested ones", () => {
    expect(outcomeTree({ model: "commonFactor", pc: 0.6, ps: G3.ps, means: G3.means, trials: 0, seed: 1 }).leaves).toHaveLength(8);
    const nested = outcomeTree({ model: "fullyDependent", pc: 0.6, ps: G3.ps, means: G3.means, trials: 0, seed: 1 });
    expect(nested.leaves).toHaveLength(4);
    expect(nested.commonFailure).toBeCloseTo(0.4, 12);
  });

  it("trees - branches with probability zero are pruned", () => {
    const tree = outcomeTree({ model: "commonFactor", pc: 1, ps: [1, 0.5], means: [10, 20], trials: 0, seed: 1 });
    expect(tree.commonFailure).toBeUndefined();
    expect(tree.leaves).toHaveLength(2);
    expect(tree.leaves.every((l) => l.states[0] === true && l.probability > 0)).toBe(true);
  });

  it("trees - beyond 16 segments the tree is sampled: frequencies sum to 1 and the risked mean holds within 2%", () => {
    const n = EXACT_MAX_SEGMENTS + 2;
    const ps = Array.from({ length: n }, (_, i) => 0.2 + (i % 5) * 0.1);
    const means = Array.from({ length: n }, (_, i) => 10 + i);
    const tree = outcomeTree({ model: "commonFactor", pc: 0.7, ps, means, trials: 50_000, seed: 2 });
    expect(tree.method).toBe("MonteCarlo");
    // Tens of thousands of leaves of Pc × count / trials: rounding of the sum only.
    expect(sumOf(tree.leaves.map((l) => l.probability)) + (tree.commonFailure ?? 0)).toBeCloseTo(1, 10);
    const exact = riskedMean(
      ps.map((p) => 0.7 * p),
      means,
    );
    expect(Math.abs(sumOf(tree.leaves.map((l) => l.probability * l.volumeMean)) - exact) / exact).toBeLessThan(0.02);
    // The common branch is known exactly: only the combinations under it are sampled (all trials of them).
    expect(tree.commonFailure).toBe(1 - 0.7);
    expect(tree.commonSuccess).toBe(0.7);
    expect(sumOf(tree.leaves.map((l) => l.branchProbability))).toBeCloseTo(1, 10);
  });

  it("trees - full dependence stays exact beyond 16 segments: n + 1 nested outcomes, the risked mean exactly", () => {
    const n = 40;
    const ps = Array.from({ length: n }, (_, i) => 0.1 + (i % 9) * 0.1);
    const means = Array.from({ length: n }, (_, i) => 10 + i);
    const tree = outcomeTree({ model: "fullyDependent", pc: 0.7, ps, means, trials: 1000, seed: 2 });
    expect(tree.method).toBe("exact");
    expect(tree.leaves).toHaveLength(10); // 9 distinct chances + none
    expect(sumOf(tree.leaves.map((l) => l.probability * l.volumeMean))).toBeCloseTo(
      riskedMean(
        ps.map((p) => 0.7 * p),
        means,
      ),
      10,
    );
  });
});

describe("reporting math - outcome tree size", () => {
  const sumOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  it("trees - beyond its allotment a tree keeps its most likely outcomes and folds the rest into one, exactly", () => {
    // G3 commonFactor has 8 outcomes; allotted 4: the 3 most likely stay, 5 are folded.
    const tree = outcomeTree({ model: "commonFactor", pc: G3.pc, ps: G3.ps, means: G3.means, trials: 0, seed: 1 }, 4);
    expect(tree.leaves).toHaveLength(3);
    expect(tree.other!.outcomes).toBe(5);
    const kept = Math.min(...tree.leaves.map((l) => l.probability));
    expect(tree.other!.probability / 5).toBeLessThanOrEqual(kept);
    expect(sumOf(tree.leaves.map((l) => l.probability)) + tree.other!.probability + tree.commonFailure!).toBeCloseTo(1, 12);
    expect(sumOf(tree.leaves.map((l) => l.probability * l.volumeMean)) + tree.other!.probability * tree.other!.volumeMean).toBeCloseTo(
      47.4,
      10,
    );
    expect(sumOf(tree.leaves.map((l) => l.branchProbability)) + tree.other!.branchProbability).toBeCloseTo(1, 12);
    expect(outcomeTree({ model: "commonFactor", pc: G3.pc, ps: G3.ps, means: G3.means, trials: 0, seed: 1 }, 8).other).toBeUndefined();
  });

  it("trees - a sampled tree is bounded by its allotment, not by the trials (64 segments, 100,000 trials: one distinct outcome per trial)", () => {
    const n = 64;
    const ps = Array.from({ length: n }, () => 0.5);
    const means = Array.from({ length: n }, (_, i) => 1 + i);
    const tree = outcomeTree({ model: "independent", pc: 1, ps, means, trials: 100_000, seed: 5 }, 1000);
    expect(tree.method).toBe("MonteCarlo");
    expect(tree.leaves.length).toBeLessThan(1000);
    expect(sumOf(tree.leaves.map((l) => l.probability)) + (tree.other?.probability ?? 0)).toBeCloseTo(1, 12);
    const exact = riskedMean(ps, means);
    const sampled =
      sumOf(tree.leaves.map((l) => l.probability * l.volumeMean)) + (tree.other?.probability ?? 0) * (tree.other?.volumeMean ?? 0);
    expect(Math.abs(sampled - exact) / exact).toBeLessThan(0.02);
  });

  it("trees - a sampled tree is what counting drawSuccesses' outcomes gives: most frequent first, ties as first seen, the rest folded", () => {
    // The plain way (a string key per trial, a stable sort by count), against which the typed-array counting is held.
    const reference = ({ model, pc, ps, means, trials, seed }: TreeInput, maxLeaves: number) => {
      const rng = createRandom(seed);
      const state = new Uint8Array(ps.length);
      const counts = new Map<string, number>();
      for (let t = 0; t < trials; t++) {
        drawSuccesses(rng, model, model === "independent" ? pc : 1, ps, state);
        const key = [...state].join("");
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      const sorted = [...counts].sort((x, y) => y[1] - x[1]);
      const keep = sorted.length > maxLeaves ? maxLeaves - 1 : sorted.length;
      const parent = model === "independent" ? 1 : pc;
      const volume = (key: string) => [...key].reduce((acc, c, i) => (c === "1" ? acc + means[i]! : acc), 0);
      const folded = sorted.slice(keep);
      const foldedCount = sumOf(folded.map(([, c]) => c));
      let weighted = 0;
      for (const [key, count] of folded) for (let i = 0; i < key.length; i++) if (key[i] === "1") weighted += count * means[i]!;
      return {
        leaves: sorted.slice(0, keep).map(([key, count]) => ({
          states: [...key].map((c) => c === "1"),
          branchProbability: count / trials,
          probability: (parent * count) / trials,
          volumeMean: volume(key),
        })),
        other: folded.length
          ? {
              outcomes: folded.length,
              branchProbability: foldedCount / trials,
              probability: (parent * foldedCount) / trials,
              volumeMean: weighted / foldedCount,
            }
          : undefined,
      };
    };
    const cases: Array<[TreeInput, number]> = [
      [
        { model: "commonFactor", pc: 0.7, ps: Array.from({ length: 20 }, (_, i) => (i % 4 ? 0.9 : 0.2)), means: [], trials: 5000, seed: 3 },
        300,
      ],
      [{ model: "independent", pc: 0.9, ps: Array.from({ length: 40 }, (_, i) => 0.3 + i / 100), means: [], trials: 4000, seed: 8 }, 1000],
      [
        {
          model: "commonFactor",
          pc: 0.5,
          ps: Array.from({ length: 64 }, (_, i) => (i > 48 ? 0.97 : 0.02)),
          means: [],
          trials: 3000,
          seed: 1,
        },
        50,
      ],
    ];
    for (const [input, maxLeaves] of cases) {
      const means = input.ps.map((_, i) => 1.25 + 0.37 * i);
      const tree = outcomeTree({ ...input, means }, maxLeaves);
      const expected = reference({ ...input, means }, maxLeaves);
      expect(tree.leaves).toEqual(expected.leaves);
      expect(tree.other).toEqual(expected.other);
    }
  });

  it("trees - OutcomeCounts tells outcomes apart by all 64 bits and orders them by count, ties as first seen", () => {
    const seen = new OutcomeCounts(64, 10);
    const add = (lo: number, hi: number, times = 1) => {
      for (let k = 0; k < times; k++) seen.add(lo, hi);
    };
    add(1, 0);
    add(0, 1, 3);
    add(1, 1 << 31);
    add(-1, -1, 3);
    add(0, 0, 2);
    expect(seen.size).toBe(5);
    expect([...seen.byCount()]).toEqual([1, 3, 4, 0, 2]);
    expect(seen.states(2).flatMap((s, i) => (s ? [i] : []))).toEqual([0, 63]);
    expect(seen.states(3).every(Boolean)).toBe(true);
    expect(seen.count(3)).toBe(3);
    expect(() => new OutcomeCounts(65, 1)).toThrow(RangeError);
  });

  it("trees - the outcome budget is shared across scenarios: small trees keep all theirs, the rest split what is left", () => {
    expect(allotOutcomes([8, 100, 100], 100)).toEqual([8, 46, 46]);
    expect(allotOutcomes([8, 10], 100)).toEqual([8, 10]);
    expect(
      sumOf(
        allotOutcomes(
          Array.from({ length: 50 }, () => 2 ** 16),
          2 ** 16,
        ),
      ),
    ).toBeLessThanOrEqual(2 ** 16);
  });
});

describe("reporting math - economics", () => {
  const G13 = yearly([-1000, 300, 300, 300, 300, 300]);

  it("G13 - −1000 then +300 × 5 at 10% end-of-year: NPV 137.236, IRR 15.238%", () => {
    expect(npv(G13, 0.1, 2026)).toBeCloseTo(137.236, 3);
    expect(irr(G13)!).toBeCloseTo(0.15238, 5);
    expect(npv(G13, irr(G13)!, 2026)).toBeCloseTo(0, 8);
  });

  it("G13 - payout in the fifth year, exposure −1000, profit-to-investment 0.5, mid-year discounting worth more", () => {
    expect(payoutYear(G13)).toBe(2030);
    expect(maxExposure(G13)).toBe(-1000);
    expect(profitToInvestment(G13, 1000)).toBeCloseTo(0.5, 12);
    expect(npv(G13, 0.1, 2026, "midYear")).toBeCloseTo(137.236 * Math.sqrt(1.1), 3);
  });

  it("indicators - IRR and payout are null when the flows never change sign or never pay out", () => {
    expect(irr(yearly([-10, -5]))).toBeNull();
    expect(irr([{ year: 2026, value: 10 }])).toBeNull();
    // All-zero flows: NPV is 0 at every rate, no rate is "the" IRR (not the scan's first rate, −99%).
    expect(irr(yearly([0, 0]))).toBeNull();
    expect(payoutYear(yearly([-10, 5]))).toBeNull();
  });

  it("indicators - IRR finds two roots closer than the scan's step, the lowest first, and rates beyond 10,000%", () => {
    // NPV(r) = −1 + 2.21/(1+r) − 1.221016/(1+r)²: roots at 10.2% and 10.8%, NPV < 0 on both sides.
    const close = yearly([-1, 2.21, -1.221016]);
    expect(irr(close)!).toBeCloseTo(0.102, 9);
    expect(npv(close, irr(close)!, 2026)).toBeCloseTo(0, 12);
    expect(irr(yearly([-1, 200]))!).toBeCloseTo(199, 6);
    // A dip that stays below zero is not a root.
    expect(irr(yearly([-1, 2.2, -1.3]))).toBeNull();
  });

  it("indicators - payout is the year cumulative NCF turns positive: exactly 0 has not paid out", () => {
    const flows = yearly([-100, 100, 50]);
    expect(payoutYear(flows)).toBe(2028);
    expect(payoutYear(yearly([-100, 100]))).toBeNull();
  });

  it("indicators - break-even Pg is null when the success case is worth nothing or less (no Pg in [0, 1] breaks even)", () => {
    expect(breakevenPg(-20, 100)).toBeNull();
    expect(breakevenPg(0, 100)).toBeNull();
    expect(breakevenPg(100, 0)).toBe(0);
    expect(breakevenPg(100, 100)).toBe(0.5);
  });

  it("indicators - break-even price: the root of NPV(price), 0 when profitable at no price, null when never", () => {
    expect(breakevenPrice((p) => 10 * p - 500, 70)).toBeCloseTo(50, 6);
    expect(breakevenPrice((p) => 10 * p - 5000, 1)).toBeCloseTo(500, 6);
    expect(breakevenPrice((p) => 10 * p + 1, 70)).toBe(0);
    expect(breakevenPrice(() => -1, 70)).toBeNull();
  });

  it("G9 - EMV with Ps 0.80, NPV 1,015,600 and dry-hole cost 495,000 is 713,480; break-even Ps 0.3277", () => {
    expect(emv(0.8, 1_015_600, 495_000)).toBeCloseTo(713_480, 6);
    expect(breakevenPg(1_015_600, 495_000)!).toBeCloseTo(0.3277, 4);
    expect(emv(breakevenPg(1_015_600, 495_000)!, 1_015_600, 495_000)).toBeCloseTo(0, 6);
  });

  it("cash flows - the production profile builds up, holds the plateau, declines and produces exactly the recoverable volume", () => {
    const profile = productionProfile(FIELD);
    expect(profile[0]).toEqual({ year: 2030, volume: 6 });
    expect(profile[2]!.volume).toBeCloseTo(13, 12);
    const total = profile.reduce((a, p) => a + p.volume, 0);
    expect(total).toBeCloseTo(100, 9);
    const last = profile.length - 1;
    expect(profile[last - 1]!.volume).toBeLessThan(13);
  });

  it("cash flows - decline from the start (declineStartRemaining 1) declines from the first year's rate, as 0.99 does, instead of producing nothing", () => {
    const all = productionProfile({ ...FIELD, declineStartRemaining: 1 });
    expect(all.slice(0, 3).map((p) => p.volume)).toEqual([6, expect.closeTo(4.92, 12), expect.closeTo(4.0344, 12)]);
    expect(all).toEqual(productionProfile({ ...FIELD, declineStartRemaining: 0.99 }));
  });

  it("cash flows - the economic limit ends the decline, not the build-up: a first year below it still ramps up", () => {
    // One well a year at 0.4: 0.4, 0.8, 1.2, … — a limit of 0.5 ended the field before its first year.
    const profile = productionProfile({ ...FIELD, wellsPerYear: 1, wellRatePerYear: 0.4, plateauFraction: 0.1, economicLimit: 0.5 });
    expect(profile.slice(0, 3).map((p) => p.volume)).toEqual([0.4, 0.8, expect.closeTo(1.2, 12)]);
    // In decline the limit still ends production: a fast decline stops once the rate falls below it.
    const fast = productionProfile({
      ...FIELD,
      wellsPerYear: 10,
      wellRatePerYear: 1,
      plateauFraction: 0.1,
      declineStartRemaining: 0.9,
      declineRate: 0.5,
      economicLimit: 2,
    });
    expect(fast.map((p) => p.volume)).toEqual([10, 5, 2.5]);
  });

  it("cash flows - royalty/tax and PSC take: contractor flows never exceed the project's, WI scales the contractor's", () => {
    const years = [
      { year: 2026, revenue: 0, opex: 0, capex: 500 },
      { year: 2027, revenue: 400, opex: 50, capex: 0 },
      { year: 2028, revenue: 400, opex: 50, capex: 0 },
    ];
    const tax = cashFlows(years, { type: "royaltyTax", royaltyRate: 0.1, incomeTaxRate: 0.3 }, 0.4);
    expect(tax.contractor[1]!.royalty).toBeCloseTo(40, 12);
    // 2027: 400 − 40 − 50 − 500 carried = −190 → no tax; 2028: 310 − 190 = 120 → 36.
    expect(tax.contractor[1]!.tax).toBe(0);
    expect(tax.contractor[2]!.tax).toBeCloseTo(36, 9);
    expect(tax.workingInterest[2]!.netCashFlow).toBeCloseTo(0.4 * tax.contractor[2]!.netCashFlow, 12);
    const psc = cashFlows(
      years,
      { type: "psc", royaltyRate: 0.1, incomeTaxRate: 0.3, costRecoveryCeiling: 0.45, contractorProfitShare: 0.35 },
      1,
    );
    for (let i = 0; i < 3; i++) {
      const row = psc.contractor[i]!;
      expect(row.netCashFlow).toBeLessThanOrEqual(psc.project[i]!.netCashFlow + 1e-9);
      expect(row.revenue - row.opex - row.capex).toBeCloseTo(row.netCashFlow + row.governmentTake, 9);
    }
    expect(psc.contractor[1]!.costRecovery).toBeCloseTo(0.45 * 360, 9);
    const deck = [
      { year: 2026, value: 60 },
      { year: 2030, value: 70 },
    ];
    expect(priceAt(deck, 2029)).toBe(60);
    expect(priceAt(deck, 2040)).toBe(70);
  });
});

describe("reporting math - polygons", () => {
  const square = {
    type: "Polygon" as const,
    coordinates: [
      [
        [2.1, 60.1],
        [2.3, 60.1],
        [2.3, 60.2],
        [2.1, 60.2],
        [2.1, 60.1],
      ],
    ],
  };

  it("polygons - area of a 0.2° × 0.1° cell at 60°N is about 124 km², bbox is its corners", () => {
    // 0.2° lon × cos(60.15°) × 111.32 km × 0.1° lat × 111.2 km ≈ 123.5 km².
    expect(areaKm2(square)).toBeGreaterThan(122);
    expect(areaKm2(square)).toBeLessThan(125);
    expect(bbox(square)).toEqual([2.1, 60.1, 2.3, 60.2]);
    expect(geometryProblems(square)).toEqual([]);
  });

  it("polygons - open rings, short rings and out-of-range positions are named", () => {
    expect(
      // Open: the last position is not the first.
      geometryProblems({ type: "Polygon", coordinates: [rectangle(0, 0, 1, 1).slice(0, -1)] })[0]!.pointer,
    ).toBe("/coordinates/0");
    // A hole must lie inside the exterior ring; a valid hole reduces the area, and the area never goes negative.
    const outer = rectangle(0, 0, 1, 1);
    const hole = rectangle(0.25, 0.25, 0.75, 0.75);
    const farHole = rectangle(10, 10, 12, 12);
    expect(geometryProblems({ type: "Polygon", coordinates: [outer, hole] })).toEqual([]);
    expect(areaKm2({ type: "Polygon", coordinates: [outer, hole] })).toBeCloseTo(
      areaKm2({ type: "Polygon", coordinates: [outer] }) * 0.75,
      0,
    );
    expect(geometryProblems({ type: "Polygon", coordinates: [outer, farHole] })).toEqual([
      { pointer: "/coordinates/1/0", message: "a hole (interior ring) must lie inside the exterior ring" },
    ]);
    expect(areaKm2({ type: "Polygon", coordinates: [outer, farHole] })).toBe(0);
    // A hole touching the exterior at a vertex is inside.
    expect(
      geometryProblems({
        type: "Polygon",
        coordinates: [
          outer,
          [
            [0, 0],
            [0.5, 0.1],
            [0.1, 0.5],
            [0, 0],
          ],
        ],
      }),
    ).toEqual([]);
    expect(
      geometryProblems({
        type: "Polygon",
        coordinates: [
          [
            [0, 0],
            [1, 0],
            [0, 0],
          ],
        ],
      })[0]!.pointer,
    ).toBe("/coordinates/0");
    expect(
      geometryProblems({
        type: "Polygon",
        coordinates: [
          [
            [0, 0],
            [200, 0],
            [1, 1],
            [0, 0],
          ],
        ],
      })[0]!.pointer,
    ).toBe("/coordinates/0/1/0");
  });
});
