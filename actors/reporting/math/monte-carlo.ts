/**
 * Seeded Monte Carlo of a prospect's success case: every trial draws the segments' outcomes *given that at
 * least one succeeds*, so the percentiles never rest on the few successes a low chance leaves; what is
 * risked is the exact `pSuccess` × the success-case fraction (docs/reporting.md#how-the-numbers-are-computed).
 * The products of one segment share one normal draw: a larger trap holds more oil and more gas.
 */
import { DependencyModel } from "./chance.ts";
import type { VolumeModel } from "./lognormal.ts";
import { createRandom, type Random } from "./prng.ts";
import { quantileOf, rankedValues, ranksOf, type Percentiles } from "./quantiles.ts";

export type SimSegment = {
  /** Segment-specific chance ps_i. */
  ps: number;
  /** Success-case volume per product (absent: the segment holds none of it). */
  volumes: Partial<Record<string, VolumeModel>>;
};

export type SimInput = {
  model: DependencyModel;
  pc: number;
  segments: readonly SimSegment[];
  products: readonly string[];
  trials: number;
  seed: number;
};

export type Simulation = {
  trials: number;
  /** P(at least one segment succeeds), exact: the weight of the success case. */
  pSuccess: number;
  /** 1 where at least one segment succeeded: every trial, unless no success is possible. */
  anySuccess: Uint8Array;
  /** Total volume per product and trial (0 on failure). */
  totals: Record<string, Float64Array>;
};

/**
 * Fills `out` with the success (1) or failure (0) of every segment for one trial; returns whether
 * the common factors held (always true for `independent`, where they are drawn per segment).
 */
export function drawSuccesses(rng: Random, model: DependencyModel, pc: number, ps: readonly number[], out: Uint8Array): boolean {
  const n = ps.length;
  if (model === DependencyModel.independent) {
    for (let i = 0; i < n; i++) out[i] = rng.uniform() < pc * ps[i]! ? 1 : 0;
    return true;
  }
  const u = rng.uniform();
  if (u >= pc) {
    out.fill(0);
    return false;
  }
  if (model === DependencyModel.fullyDependent) {
    // One uniform for everything: given common success u/pc is uniform, and segment i succeeds
    // when it is below ps_i, so the outcomes are nested (comonotone).
    const v = u / pc;
    for (let i = 0; i < n; i++) out[i] = v < ps[i]! ? 1 : 0;
  } else {
    for (let i = 0; i < n; i++) out[i] = rng.uniform() < ps[i]! ? 1 : 0;
  }
  return true;
}

/** P(at least one of chances[i..]) for each i (out[n] = 0), exact for tiny chances. */
function atLeastOneFrom(chances: readonly number[]): Float64Array {
  const out = new Float64Array(chances.length + 1);
  let logNone = 0;
  for (let i = chances.length - 1; i >= 0; i--) {
    logNone += Math.log1p(-chances[i]!);
    out[i] = -Math.expm1(logNone);
  }
  return out;
}

/**
 * Draws the segments' outcomes given at least one success, exactly: while none has succeeded yet, segment i succeeds
 * with q_i / P(≥1 among i..n), afterwards with q_i; fullyDependent's one uniform lies below the largest ps_i
 * (docs/reporting.md#how-the-numbers-are-computed). `pSuccess` is P(≥1).
 */
export function successCaseDrawer(
  model: DependencyModel,
  pc: number,
  ps: readonly number[],
): { pSuccess: number; draw: (rng: Random, out: Uint8Array) => void } {
  const n = ps.length;
  if (model === DependencyModel.fullyDependent) {
    const top = n ? Math.max(...ps) : 0;
    return {
      pSuccess: pc * top,
      draw: (rng, out) => {
        const v = rng.uniform() * top;
        for (let i = 0; i < n; i++) out[i] = v < ps[i]! ? 1 : 0;
      },
    };
  }
  const q = model === DependencyModel.independent ? ps.map((p) => pc * p) : [...ps];
  const rest = atLeastOneFrom(q);
  const pSuccess = model === DependencyModel.independent ? rest[0]! : pc * rest[0]!;
  // Chance of segment i while none has succeeded yet (nothing after i can succeed: i must, if it
  // can at all), and once one has.
  const whileNone = new Float64Array(n);
  const after = Float64Array.from(q);
  for (let i = 0; i < n; i++) whileNone[i] = rest[i + 1]! > 0 ? q[i]! / rest[i]! : q[i]! > 0 ? 1 : 0;
  return {
    pSuccess,
    draw: (rng, out) => {
      let chance = whileNone;
      for (let i = 0; i < n; i++) {
        const success = rng.uniform() < chance[i]! ? 1 : 0;
        out[i] = success;
        if (success) chance = after;
      }
    },
  };
}

export function simulate(input: SimInput): Simulation {
  const { model, pc, segments, products, trials, seed } = input;
  const rng = createRandom(seed);
  const ps = segments.map((s) => s.ps);
  const n = segments.length;
  const { pSuccess, draw } = successCaseDrawer(model, pc, ps);
  const state = new Uint8Array(n);
  const anySuccess = new Uint8Array(trials);
  const totals: Record<string, Float64Array> = {};
  // Flattened segment × product table of draw parameters, so the hot loop touches no objects.
  const np = products.length;
  const kind = new Uint8Array(n * np); // 0 none, 1 fixed, 2 lognormal
  const a = new Float64Array(n * np); // fixed value or mu
  const b = new Float64Array(n * np); // sigma
  const columns: Float64Array[] = [];
  for (let j = 0; j < np; j++) {
    const column = new Float64Array(trials);
    totals[products[j]!] = column;
    columns.push(column);
    for (let i = 0; i < n; i++) {
      const v = segments[i]!.volumes[products[j]!];
      if (!v) continue;
      if (v.kind === "lognormal") {
        kind[i * np + j] = 2;
        a[i * np + j] = v.dist.mu;
        b[i * np + j] = v.dist.sigma;
      } else {
        kind[i * np + j] = 1;
        a[i * np + j] = v.mean;
      }
    }
  }
  const lognormal = new Uint8Array(n); // 1 when some product of the segment needs a normal draw
  const sums = new Float64Array(np);
  for (let i = 0; i < n; i++) for (let j = 0; j < np; j++) if (kind[i * np + j] === 2) lognormal[i] = 1;
  // No success possible: no success case (every total 0, no trial a success).
  for (let t = 0; t < trials && pSuccess > 0; t++) {
    draw(rng, state);
    let any = 0;
    // The trial's totals in locals, added in segment order as before, written once: no column lookups per success.
    sums.fill(0);
    for (let i = 0; i < n; i++) {
      if (!state[i]) continue;
      any = 1;
      const z = lognormal[i] ? rng.normal() : 0;
      const base = i * np;
      for (let j = 0; j < np; j++) {
        const k = kind[base + j];
        if (k === 1) sums[j] = sums[j]! + a[base + j]!;
        else if (k === 2) sums[j] = sums[j]! + Math.exp(a[base + j]! + b[base + j]! * z);
      }
    }
    if (any) for (let j = 0; j < np; j++) columns[j]![t] = sums[j]!;
    anySuccess[t] = any;
  }
  return { trials, pSuccess, anySuccess, totals };
}

/** Percentiles of one product over the trials where the prospect succeeded (≥ 1 segment). */
export function successCasePercentiles(sim: Pick<Simulation, "anySuccess" | "totals" | "pSuccess">, product: string): Percentiles {
  return successCaseSummary(sim, product).percentiles;
}

/** P90, P50, P10 in the exceedance convention: the 10th, 50th and 90th percentiles of the values. */
const PERCENTILE_QUANTILES = [0.1, 0.5, 0.9];
/** Success-case quantiles at which the risked exceedance curve is sampled. */
const CURVE_QUANTILES = [0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99];

export type ExceedancePoint = { volume: number; probability: number };

/**
 * Success-case percentiles and the risked exceedance curve P(V ≥ v) = pSuccess × the fraction of
 * successful trials reaching v (it starts at the chance of success, not at 1), from the order statistics of the
 * successful trials.
 */
export function successCaseSummary(
  sim: Pick<Simulation, "anySuccess" | "totals" | "pSuccess">,
  product: string,
): { percentiles: Percentiles; riskedExceedance: ExceedancePoint[] } {
  const column = sim.totals[product]!;
  let count = 0;
  for (let t = 0; t < column.length; t++) count += sim.anySuccess[t]!;
  const values = new Float64Array(count);
  let k = 0;
  for (let t = 0; t < column.length; t++) if (sim.anySuccess[t]) values[k++] = column[t]!;
  // The numbers a sort of every value gives, from the ranks read alone (quantiles.ts rankedValues).
  const ranked = rankedValues(values, ranksOf(count, [...PERCENTILE_QUANTILES, ...CURVE_QUANTILES]));
  const percentiles = { p90: quantileOf(ranked, 0.1), p50: quantileOf(ranked, 0.5), p10: quantileOf(ranked, 0.9) };
  const riskedExceedance: ExceedancePoint[] = [];
  if (count === 0) return { percentiles, riskedExceedance };
  for (const q of CURVE_QUANTILES) {
    const volume = quantileOf(ranked, q);
    riskedExceedance.push({ volume, probability: (sim.pSuccess * (count - ranked.countBelow(volume))) / count });
  }
  return { percentiles, riskedExceedance };
}

/** P(total of the product ≥ `threshold`) (risked): pSuccess × the fraction of successful trials reaching it. */
export function exceedanceFraction(
  sim: Pick<Simulation, "totals" | "anySuccess" | "pSuccess">,
  product: string,
  threshold: number,
): number {
  const column = sim.totals[product]!;
  let hits = 0;
  let count = 0;
  for (let t = 0; t < column.length; t++) {
    if (!sim.anySuccess[t]) continue;
    count++;
    if (column[t]! >= threshold && column[t]! > 0) hits++;
  }
  return count ? (sim.pSuccess * hits) / count : 0;
}

/**
 * Splits `total` trials in proportion to `weights` (Hamilton's largest remainder): the counts sum to
 * `total` exactly, unlike shares rounded each on its own, and each is its floor share or one more; ties go
 * to the earlier part, and zero weights (or all zero) get nothing.
 */
export function apportion(weights: readonly number[], total: number): number[] {
  const sum = weights.reduce((a, w) => a + Math.max(0, w), 0);
  if (!(sum > 0)) return weights.map(() => 0);
  const exact = weights.map((w) => (Math.max(0, w) / sum) * total);
  const counts = exact.map(Math.floor);
  let left = total - counts.reduce((a, c) => a + c, 0);
  const byRemainder = [...exact.keys()]
    .filter((i) => exact[i]! > 0)
    .sort((a, b) => exact[b]! - counts[b]! - (exact[a]! - counts[a]!) || a - b);
  for (let k = 0; left > 0 && k < byRemainder.length; k++, left--) counts[byRemainder[k]!]!++;
  return counts;
}

/**
 * Concatenates simulations (stratified scenario mixtures): totals and success flags side by side;
 * `pSuccess` is the mixture's (the parts' trials must be in proportion to their weight in it).
 */
export function concatSimulations(
  parts: readonly Omit<Simulation, "pSuccess">[],
  products: readonly string[],
  pSuccess: number,
): Simulation {
  const trials = parts.reduce((acc, p) => acc + p.trials, 0);
  const anySuccess = new Uint8Array(trials);
  const totals: Record<string, Float64Array> = {};
  for (const product of products) totals[product] = new Float64Array(trials);
  let offset = 0;
  for (const part of parts) {
    anySuccess.set(part.anySuccess, offset);
    for (const product of products) if (part.totals[product]) totals[product]!.set(part.totals[product]!, offset);
    offset += part.trials;
  }
  return { trials, pSuccess, anySuccess, totals };
}
