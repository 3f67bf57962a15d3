/**
 * Volumes an aggregation adds together must be comparable: one unit per product and one basis within a prospect
 * analysis and across a multiple scenario analysis, MEFS in a product's unit, a full cycle's product among the volumes.
 * Entities are upserted one at a time, so this runs where volumes combine: on the write (400) and when an aggregation
 * runs (409) (docs/reporting.md#entities). Pure: each problem names where.
 */
import type { Product, Volumes } from "../../subjects/reporting.ts";

export type Problem = { pointer: string; message: string };

type SegmentVolumes = { segmentAnalysisId: string; volumes: Volumes };

const basisOf = (v: { basis?: string }) => v.basis ?? "recoverable";

/** The unit of each product, as the first segment holding it has it. */
export function unitsOf(segments: readonly Pick<SegmentVolumes, "volumes">[]): Partial<Record<Product, string>> {
  const units: Partial<Record<Product, string>> = {};
  for (const s of segments) for (const [product, v] of Object.entries(s.volumes)) if (v) units[product as Product] ??= v.unit;
  return units;
}

/** Problems of one analysis's segments; `at(i)` points at the i-th enrolled segment. */
export function analysisProblems(
  segments: readonly SegmentVolumes[],
  mefs: { unit: string } | undefined,
  at: (i: number) => string,
  mefsAt: string,
): Problem[] {
  const problems: Problem[] = [];
  const units = new Map<string, { unit: string; from: string }>();
  let basis: { basis: string; from: string } | undefined;
  segments.forEach((s, i) => {
    for (const [product, v] of Object.entries(s.volumes)) {
      if (!v) continue;
      const seen = units.get(product);
      if (seen && seen.unit !== v.unit)
        problems.push({
          pointer: at(i),
          message: `${product} of segment analysis ${s.segmentAnalysisId} is in ${v.unit}, but in ${seen.unit} in ${seen.from}: volumes of a product must share a unit`,
        });
      else if (!seen) units.set(product, { unit: v.unit, from: s.segmentAnalysisId });
      if (basis && basis.basis !== basisOf(v))
        problems.push({
          pointer: at(i),
          message: `${product} of segment analysis ${s.segmentAnalysisId} is ${basisOf(v)}, but ${basis.from} is ${basis.basis}: the volumes of an analysis share one basis`,
        });
      else basis ??= { basis: basisOf(v), from: s.segmentAnalysisId };
    }
  });
  if (mefs && segments.length > 0 && ![...units.values()].some((u) => u.unit === mefs.unit)) {
    problems.push({
      pointer: mefsAt,
      message: `no enrolled volume is in ${mefs.unit}; the MEFS must be in the unit of one of the products (${[...new Set([...units.values()].map((u) => u.unit))].join(", ") || "none"})`,
    });
  }
  return problems;
}

/** Problems across scenarios: a product in different units or bases cannot be weighted together. */
export function scenarioProblems(
  scenarios: ReadonlyArray<{ scenarioId: string; units: Partial<Record<Product, string>>; basis: string }>,
  at: (i: number) => string,
): Problem[] {
  const problems: Problem[] = [];
  const units = new Map<string, { unit: string; from: string }>();
  scenarios.forEach((s, i) => {
    if (i > 0 && s.basis !== scenarios[0]!.basis)
      problems.push({
        pointer: at(i),
        message: `scenario ${s.scenarioId} is ${s.basis}, but scenario ${scenarios[0]!.scenarioId} is ${scenarios[0]!.basis}`,
      });
    for (const [product, unit] of Object.entries(s.units)) {
      const seen = units.get(product);
      if (seen && seen.unit !== unit)
        problems.push({
          pointer: at(i),
          message: `${product} of scenario ${s.scenarioId} is in ${unit}, but in ${seen.unit} in scenario ${seen.from}`,
        });
      else if (!seen) units.set(product, { unit: unit!, from: s.scenarioId });
    }
  });
  return problems;
}

/**
 * The product a production model draws its recoverable volume from, or a problem (`at`: the
 * production model's pointer). In-place volumes are not produced: without a recovery factor they
 * overstate every flow, so the model must then give its recoverable volume.
 */
export function productionProblem(
  production: { product?: string; recoverable?: number } | undefined,
  units: Partial<Record<Product, string>>,
  basis: string,
  at: string,
): Problem | undefined {
  if (!production || production.recoverable !== undefined) return undefined;
  const product = (production.product ?? "oil") as Product;
  if (!units[product] && !units.oilEquivalent) {
    const held = Object.keys(units);
    return {
      pointer: `${at}/product`,
      message: `the prospect analysis has no ${product} (nor oilEquivalent) volume to produce${held.length ? `; it has ${held.join(", ")}` : ""}: name one of those, or give production.recoverable`,
    };
  }
  if (basis === "inPlace")
    return {
      pointer: `${at}/recoverable`,
      message:
        "is required: the prospect analysis's volumes are in place, not recoverable, and in-place volumes are not what a field produces",
    };
  return undefined;
}

/** The basis of an analysis's volumes (the first given; analysisProblems keeps them one). */
export const basisOfSegments = (segments: readonly Pick<SegmentVolumes, "volumes">[]): string =>
  segments.flatMap((s) => Object.values(s.volumes)).find((v) => v?.basis)?.basis ?? "recoverable";

/**
 * The most simulation work one multiple scenario aggregation may take, Σ over its scenarios of segments ×
 * trials: that of the largest prospect analysis the limits allow (docs/reporting.md#limits).
 */
export const SCENARIO_WORK_MAX = 64_000_000;

/** The problem when the scenarios' segments × `trials` exceed SCENARIO_WORK_MAX; `at` points at the trials. */
export function scenarioWorkProblem(segmentsPerScenario: readonly number[], trials: number, at: string): Problem | undefined {
  const segments = segmentsPerScenario.reduce((a, n) => a + n, 0);
  if (segments * trials <= SCENARIO_WORK_MAX) return undefined;
  const most = Math.floor(SCENARIO_WORK_MAX / segments);
  return {
    pointer: at,
    message: `the scenarios enroll ${segments} segments in all; ${segments} × ${trials} trials is more simulation than one aggregation may take (${SCENARIO_WORK_MAX.toLocaleString("en")} segment-trials): at most ${most.toLocaleString("en")} trials for these scenarios`,
  };
}
