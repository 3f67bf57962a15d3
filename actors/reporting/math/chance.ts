/**
 * Chance of geological success of a prospect from its segments, exactly, under the API's three dependency models
 * (docs/contract.md). Every model shares Pg_i = Pc · ps_i and decides only the joint behaviour: independent (common
 * factors drawn per segment), commonFactor (one draw for all), fullyDependent (nested: P(i and j) = min(Pg_i, Pg_j)).
 */

export const DependencyModel = { independent: "independent", commonFactor: "commonFactor", fullyDependent: "fullyDependent" } as const;
export type DependencyModel = (typeof DependencyModel)[keyof typeof DependencyModel];

/** Product of risk-factor probabilities (1 for none). */
export const productOf = (probabilities: readonly number[]) => probabilities.reduce((acc, p) => acc * p, 1);

export type ChanceInput = { model: DependencyModel; pc: number; ps: readonly number[] };

export type Chance = {
  /** Pg_i = Pc · ps_i. */
  pg: number[];
  pgAtLeastOne: number;
  pgAll: number;
  pCommonSuccess: number;
  expectedSuccessfulSegments: number;
};

export function chanceOfSuccess({ model, pc, ps }: ChanceInput): Chance {
  const pg = ps.map((p) => pc * p);
  const expectedSuccessfulSegments = pg.reduce((a, b) => a + b, 0);
  if (ps.length === 0) return { pg, pgAtLeastOne: 0, pgAll: 0, pCommonSuccess: pc, expectedSuccessfulSegments };
  let pgAtLeastOne: number;
  let pgAll: number;
  switch (model) {
    case DependencyModel.independent:
      pgAtLeastOne = 1 - productOf(pg.map((p) => 1 - p));
      pgAll = productOf(pg);
      break;
    case DependencyModel.commonFactor:
      pgAtLeastOne = pc * (1 - productOf(ps.map((p) => 1 - p)));
      pgAll = pc * productOf(ps);
      break;
    case DependencyModel.fullyDependent:
      pgAtLeastOne = Math.max(...pg);
      pgAll = Math.min(...pg);
      break;
  }
  return { pg, pgAtLeastOne, pgAll, pCommonSuccess: pc, expectedSuccessfulSegments };
}

/** Risked mean Σ Pg_i · M_i: the same under every dependency model (linearity of expectation). */
export const riskedMean = (pg: readonly number[], means: readonly number[]) => pg.reduce((acc, p, i) => acc + p * (means[i] ?? 0), 0);

/**
 * Partial dependency between two outcomes (the shared-uniform mixture): with
 * probability d the second outcome reuses the first's uniform. d = 0 independent, d = 1 nested.
 */
export function jointProbabilityPartial(pA: number, pB: number, d: number): { both: number; atLeastOne: number; bGivenA: number } {
  const both = d * Math.min(pA, pB) + (1 - d) * pA * pB;
  return { both, atLeastOne: pA + pB - both, bGivenA: pA > 0 ? both / pA : 0 };
}
