/**
 * Success-case volume distributions. A volume given as P90 and P10 (exceedance convention: P90 is
 * the low case) is a lognormal fitted through the two percentiles; a volume given as a mean is a
 * fixed value with no spread.
 */

/** z such that Φ(z) = 0.9. */
export const Z90 = 1.2815515655446004;

export type Lognormal = { mu: number; sigma: number; p90: number; p50: number; p10: number; mean: number; mode: number };

/** Lognormal through P90 < P10 (both > 0): P50 = √(P90·P10), σ = ln(P10/P90) / (2·z0.9). */
export function fitLognormal(p90: number, p10: number): Lognormal {
  if (!(p90 > 0) || !(p10 > p90)) throw new RangeError("a lognormal needs 0 < p90 < p10");
  const mu = (Math.log(p90) + Math.log(p10)) / 2;
  const sigma = Math.log(p10 / p90) / (2 * Z90);
  const p50 = Math.exp(mu);
  return { mu, sigma, p90, p50, p10, mean: p50 * Math.exp((sigma * sigma) / 2), mode: p50 * Math.exp(-sigma * sigma) };
}

/** Swanson's rule: 0.3·P90 + 0.4·P50 + 0.3·P10 (biased low for skewed lognormals). */
export const swansonMean = (p90: number, p50: number, p10: number) => 0.3 * p90 + 0.4 * p50 + 0.3 * p10;

/** P(V ≥ v) of the lognormal. */
export function lognormalSurvival(dist: Pick<Lognormal, "mu" | "sigma">, v: number): number {
  if (v <= 0) return 1;
  return 1 - normalCdf((Math.log(v) - dist.mu) / dist.sigma);
}

/** Φ(x) via erfc (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7). */
export function normalCdf(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.5 * z);
  const erfc =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? 1 - erfc / 2 : erfc / 2;
}

/** A success-case volume as stored: lognormal from two percentiles, or a fixed mean. */
export type VolumeInput = { p90?: number; p10?: number; mean?: number };

/** The distribution the simulation draws from and the exact figures reported for it. */
export type VolumeModel =
  | { kind: "lognormal"; dist: Lognormal; mean: number; p90: number; p50: number; p10: number }
  | { kind: "fixed"; mean: number; p90: number; p50: number; p10: number };

export function volumeModel(input: VolumeInput): VolumeModel {
  if (input.p90 !== undefined && input.p10 !== undefined) {
    const dist = fitLognormal(input.p90, input.p10);
    return { kind: "lognormal", dist, mean: dist.mean, p90: dist.p90, p50: dist.p50, p10: dist.p10 };
  }
  const mean = input.mean ?? 0;
  return { kind: "fixed", mean, p90: mean, p50: mean, p10: mean };
}
