/** The order statistics of quantiles.ts: the selection by buckets gives exactly what a sort of every value gives. */
import { describe, expect, it } from "vitest";
import { createRandom } from "./prng.ts";
import { quantileOf, quantileSorted, rankedValues, ranksOf } from "./quantiles.ts";

const QUANTILES = [0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1];

/** Each quantile and how many values lie below it, by a sort of every value. */
function bySort(values: Float64Array) {
  const sorted = Float64Array.from(values).sort();
  return QUANTILES.map((q) => {
    const v = quantileSorted(sorted, q);
    let below = 0;
    while (below < sorted.length && sorted[below]! < v) below++;
    return { v, below };
  });
}

function bySelection(values: Float64Array) {
  const ranked = rankedValues(Float64Array.from(values), ranksOf(values.length, QUANTILES));
  return QUANTILES.map((q) => {
    const v = quantileOf(ranked, q);
    return { v, below: ranked.countBelow(v) };
  });
}

describe("reporting quantiles - selection", () => {
  const rng = createRandom(11);
  const cases: Array<[string, Float64Array]> = [
    [
      "lognormal sums, 200,000 values",
      Float64Array.from({ length: 200_000 }, () => Math.exp(3 + rng.normal()) + Math.exp(2 + rng.normal())),
    ],
    [
      "a third zeros and many ties (fixed volumes)",
      Float64Array.from({ length: 120_000 }, (_, i) => (i % 3 === 0 ? 0 : 10 * (1 + (i % 7)))),
    ],
    ["values packed in one bucket", Float64Array.from({ length: 80_000 }, () => 1 + rng.uniform() * 1e-6)],
    ["few values (one sort)", Float64Array.from({ length: 999 }, () => rng.uniform())],
    ["some negative values (one sort)", Float64Array.from({ length: 60_000 }, () => rng.normal())],
  ];
  for (const [name, values] of cases)
    it(`the quantiles and the counts below them are those of a sort: ${name}`, () => {
      expect(bySelection(values)).toEqual(bySort(values));
    });

  it("an empty set has quantile 0", () => {
    expect(quantileOf(rankedValues(new Float64Array(0), []), 0.5)).toBe(0);
  });
});
