/** Percentiles in the exceedance convention (P90 = the low case = the 10th percentile of the values). */

/** Linear interpolation between order statistics (type 7, as numpy and R default) of sorted values. */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return 0;
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, n - 1);
  return sorted[lo]! + (h - lo) * (sorted[hi]! - sorted[lo]!);
}

export type Percentiles = { p90: number; p50: number; p10: number };

/** P90 ≤ P50 ≤ P10 of the values (sorted in place). */
export function exceedancePercentiles(values: Float64Array): Percentiles {
  values.sort();
  return { p90: quantileSorted(values, 0.1), p50: quantileSorted(values, 0.5), p10: quantileSorted(values, 0.9) };
}
