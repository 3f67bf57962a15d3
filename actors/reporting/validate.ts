/**
 * The rules of the input entities that a schema cannot say, each failure a 400 naming the field:
 * volumes (p90 < p10, or a mean), property values by type, licensee interests summing to 1 with one
 * operator, non-overlapping license versions, unique ids in lists, scenario probabilities summing
 * to 1, PSC terms, one cash-flow source per full cycle analysis, GeoJSON structure. References to
 * other entities are checked by the handlers (they need the store).
 */
import type { Static } from "@sinclair/typebox";
import { DerrickError, check, type FieldError } from "../../subjects/index.ts";
import {
  DEFAULT_SIMULATION,
  ENTITY_SCHEMAS,
  type Collection,
  type FullCycleAnalysis,
  type License,
  type LicenseVersion,
  type MultipleScenarioAnalysis,
  type ProspectAnalysis,
  type SegmentAnalysis,
  type Volumes,
} from "../../subjects/reporting.ts";
import { fitLognormal } from "./math/lognormal.ts";
import { geometryProblems, type PolygonGeometry } from "./math/polygon.ts";

/** Tolerance of sums that must equal 1. */
export const SUM_TOLERANCE = 1e-6;

class Problems {
  readonly list: FieldError[] = [];
  add(pointer: string, message: string) {
    this.list.push({ pointer, message });
  }
  throwIfAny() {
    if (!this.list.length) return;
    const first = this.list[0]!;
    throw new DerrickError(400, `${first.pointer}: ${first.message}${this.list.length > 1 ? ` (and ${this.list.length - 1} more)` : ""}`, {
      type: "validation",
      errors: this.list,
    });
  }
}

function uniqueIds(problems: Problems, values: readonly string[], pointer: (i: number) => string, what: string) {
  const seen = new Set<string>();
  values.forEach((v, i) => {
    if (seen.has(v)) problems.add(pointer(i), `duplicate ${what} ${v}`);
    seen.add(v);
  });
}

function checkVolumes(problems: Problems, volumes: Volumes, base: string) {
  for (const [product, v] of Object.entries(volumes)) {
    if (!v) continue;
    const at = `${base}/${product}`;
    const spread = v.p90 !== undefined || v.p10 !== undefined;
    if (spread && v.mean !== undefined) problems.add(at, "give either p90 and p10 (lognormal) or mean (fixed), not both");
    else if (spread && (v.p90 === undefined || v.p10 === undefined))
      problems.add(`${at}/${v.p90 === undefined ? "p90" : "p10"}`, "is required with the other percentile");
    else if (spread && !(v.p90! < v.p10!)) problems.add(`${at}/p10`, "must be greater than p90 (p90 is the low case)");
    else if (spread && !Number.isFinite(fitLognormal(v.p90!, v.p10!).mean))
      problems.add(`${at}/p10`, "is too far above p90: the fitted lognormal has no finite mean");
    else if (!spread && v.mean === undefined) problems.add(at, "needs p90 and p10, or mean");
  }
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const validDate = (v: string) =>
  DATE.test(v) && !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().startsWith(v);

function checkSegment(problems: Problems, s: SegmentAnalysis) {
  if (Object.values(s.volumes).every((v) => v === undefined)) problems.add("/body/volumes", "needs at least one product");
  checkVolumes(problems, s.volumes, "/body/volumes");
  s.properties?.forEach((p, i) => {
    const at = `/body/properties/${i}/value`;
    if (p.type === "float" && typeof p.value !== "number") problems.add(at, "must be a number for type float");
    if (p.type === "integer" && !Number.isInteger(p.value)) problems.add(at, "must be an integer for type integer");
    if (p.type === "date" && (typeof p.value !== "string" || !validDate(p.value)))
      problems.add(at, "must be a date (YYYY-MM-DD) for type date");
    if (["text", "closedList", "openList"].includes(p.type) && typeof p.value !== "string")
      problems.add(at, `must be a string for type ${p.type}`);
  });
  uniqueIds(
    problems,
    s.riskFactors.map((f) => f.name),
    (i) => `/body/riskFactors/${i}/name`,
    "risk factor",
  );
  if (s.entitlement) {
    uniqueIds(
      problems,
      s.entitlement.map((e) => e.companyId),
      (i) => `/body/entitlement/${i}/companyId`,
      "company",
    );
    const total = s.entitlement.reduce((a, e) => a + e.share, 0);
    if (total > 1 + SUM_TOLERANCE) problems.add("/body/entitlement", `shares sum to ${total}, more than 1`);
  }
}

function checkProspectAnalysis(problems: Problems, pa: ProspectAnalysis) {
  uniqueIds(problems, pa.segmentAnalysisIds, (i) => `/body/segmentAnalysisIds/${i}`, "segment analysis");
  if (pa.licenseIds) uniqueIds(problems, pa.licenseIds, (i) => `/body/licenseIds/${i}`, "license");
  pa.dependency.commonFactors &&
    uniqueIds(
      problems,
      pa.dependency.commonFactors.map((f) => f.name),
      (i) => `/body/dependency/commonFactors/${i}/name`,
      "common factor",
    );
}

function checkLicenseVersions(problems: Problems, versions: readonly LicenseVersion[], pointerOf: (i: number) => string) {
  versions.forEach((v, i) => {
    const at = pointerOf(i);
    for (const field of ["validFrom", "validTo", "dateGranted", "dateExpires"] as const) {
      const value = v[field];
      if (typeof value === "string" && !validDate(value)) problems.add(`${at}/${field}`, "is not a calendar date");
    }
    if (v.validTo && v.validTo < v.validFrom) problems.add(`${at}/validTo`, "is before validFrom");
    const total = v.licensees.reduce((a, l) => a + l.interest, 0);
    if (Math.abs(total - 1) > SUM_TOLERANCE) problems.add(`${at}/licensees`, `interests sum to ${total}, not 1`);
    const operators = v.licensees.filter((l) => l.isOperator).length;
    if (operators !== 1) problems.add(`${at}/licensees`, `needs exactly one operator (found ${operators})`);
    uniqueIds(
      problems,
      v.licensees.map((l) => l.companyId),
      (k) => `${at}/licensees/${k}/companyId`,
      "licensee",
    );
    uniqueIds(
      problems,
      v.blocks.map((b) => b.blockId),
      (k) => `${at}/blocks/${k}/blockId`,
      "block",
    );
    uniqueIds(problems, v.prospectIds, (k) => `${at}/prospectIds/${k}`, "prospect");
  });
  // Versions must not overlap in time: sort by validFrom, each must end (validTo) before the next starts.
  const order = versions.map((v, i) => ({ v, i })).sort((a, b) => a.v.validFrom.localeCompare(b.v.validFrom));
  for (let k = 1; k < order.length; k++) {
    const prev = order[k - 1]!;
    const next = order[k]!;
    if (!prev.v.validTo || prev.v.validTo > next.v.validFrom)
      problems.add(
        `${pointerOf(next.i)}/validFrom`,
        `overlaps version ${prev.v.versionNumber} (valid ${prev.v.validFrom} to ${prev.v.validTo ?? "open"})`,
      );
  }
}

function checkLicense(problems: Problems, license: License) {
  uniqueIds(
    problems,
    license.versions.map((v) => String(v.versionNumber)),
    (i) => `/body/versions/${i}/versionNumber`,
    "version number",
  );
  checkLicenseVersions(problems, license.versions, (i) => `/body/versions/${i}`);
}

/** Overlaps and sums over the merged versions (stored + new): the new versions are named. */
export function checkMergedLicense(merged: readonly LicenseVersion[], bodyIndexOf: (versionNumber: number) => number | undefined): void {
  const problems = new Problems();
  checkLicenseVersions(problems, merged, (i) => {
    const inBody = bodyIndexOf(merged[i]!.versionNumber);
    return inBody === undefined ? `/stored/versions/${merged[i]!.versionNumber}` : `/body/versions/${inBody}`;
  });
  problems.throwIfAny();
}

function checkFullCycle(problems: Problems, fc: FullCycleAnalysis) {
  const hasModel = fc.production !== undefined;
  const hasFlows = fc.cashFlows !== undefined;
  if (hasModel === hasFlows)
    problems.add(
      hasModel ? "/body/cashFlows" : "/body/production",
      "give either a production model (production, costs) or explicit cashFlows, exactly one",
    );
  if (hasModel && !fc.costs) problems.add("/body/costs", "is required with a production model");
  if (hasFlows && fc.costs) problems.add("/body/costs", "applies only to a production model");
  if (fc.assumptions.fiscal.type === "psc") {
    if (fc.assumptions.fiscal.costRecoveryCeiling === undefined)
      problems.add("/body/assumptions/fiscal/costRecoveryCeiling", "is required for a psc");
    if (fc.assumptions.fiscal.contractorProfitShare === undefined)
      problems.add("/body/assumptions/fiscal/contractorProfitShare", "is required for a psc");
  }
  uniqueIds(
    problems,
    fc.assumptions.prices.map((p) => p.product),
    (i) => `/body/assumptions/prices/${i}/product`,
    "price of product",
  );
  fc.assumptions.prices.forEach((p, i) =>
    uniqueIds(
      problems,
      p.series.map((s) => String(s.year)),
      (k) => `/body/assumptions/prices/${i}/series/${k}/year`,
      "year",
    ),
  );
  if (hasModel && !fc.assumptions.prices.some((p) => p.product === (fc.production!.product ?? "oil")))
    problems.add("/body/assumptions/prices", `needs a price for the produced product ${fc.production!.product ?? "oil"}`);
  if (hasModel && fc.production!.gasOilRatio !== undefined && !fc.assumptions.prices.some((p) => p.product === "gas"))
    problems.add(
      "/body/assumptions/prices",
      "needs a price for gas: production.gasOilRatio gives associated gas (price it 0 if it is not sold)",
    );
  if (fc.costs)
    uniqueIds(
      problems,
      fc.costs.capex.map((c) => String(c.year)),
      (i) => `/body/costs/capex/${i}/year`,
      "year",
    );
  for (const level of ["project", "contractor", "workingInterest"] as const) {
    const rows = fc.cashFlows?.[level];
    if (rows)
      uniqueIds(
        problems,
        rows.map((r) => String(r.year)),
        (i) => `/body/cashFlows/${level}/${i}/year`,
        "year",
      );
  }
  if (hasFlows && !fc.cashFlows!.project && !fc.cashFlows!.contractor && !fc.cashFlows!.workingInterest)
    problems.add("/body/cashFlows", "needs at least one level");
}

function checkPolygon(problems: Problems, polygon: NonNullable<MultipleScenarioAnalysis["polygon"]>) {
  const base = "/body/polygon";
  let geometry: unknown;
  let at = base;
  if (polygon.type === "Feature") {
    if (polygon.coordinates !== undefined) problems.add(`${base}/coordinates`, "a Feature holds its coordinates in geometry");
    geometry = polygon.geometry;
    at = `${base}/geometry`;
  } else {
    if (polygon.geometry !== undefined || polygon.properties !== undefined)
      problems.add(`${base}/${polygon.geometry !== undefined ? "geometry" : "properties"}`, "only a Feature has this member");
    geometry = { type: polygon.type, coordinates: polygon.coordinates };
  }
  const g = geometry as { type?: unknown; coordinates?: unknown } | null;
  if (!g || typeof g !== "object") return problems.add(at, "must be a Polygon or MultiPolygon geometry");
  if (g.type !== "Polygon" && g.type !== "MultiPolygon") return problems.add(`${at}/type`, "must be Polygon or MultiPolygon");
  const depth = g.type === "Polygon" ? 3 : 4;
  const shape = shapeProblem(g.coordinates, depth, `${at}/coordinates`);
  if (shape) return problems.add(shape.pointer, shape.message);
  for (const p of geometryProblems(g as PolygonGeometry)) problems.add(`${at}${p.pointer}`, p.message);
}

/** Nested arrays of numbers of the given depth (positions at the innermost level). */
function shapeProblem(value: unknown, depth: number, pointer: string): FieldError | undefined {
  if (depth === 0) return typeof value === "number" && Number.isFinite(value) ? undefined : { pointer, message: "must be a number" };
  if (!Array.isArray(value)) return { pointer, message: "must be an array" };
  if (depth > 1 && value.length === 0) return { pointer, message: "must not be empty" };
  for (let i = 0; i < value.length; i++) {
    const problem = shapeProblem(value[i], depth - 1, `${pointer}/${i}`);
    if (problem) return problem;
  }
  return undefined;
}

function checkScenarios(problems: Problems, m: MultipleScenarioAnalysis) {
  const total = m.scenarios.reduce((a, s) => a + s.probability, 0);
  if (Math.abs(total - 1) > SUM_TOLERANCE) problems.add("/body/scenarios", `probabilities sum to ${total}, not 1`);
  uniqueIds(
    problems,
    m.scenarios.map((s) => s.scenarioId),
    (i) => `/body/scenarios/${i}/scenarioId`,
    "scenario",
  );
  if (m.polygon) checkPolygon(problems, m.polygon);
}

/** Each collection's rules, then the defaults its entities get (the compiler wants an entry for every collection). */
const RULES: { [C in Collection]: (problems: Problems, entity: Static<(typeof ENTITY_SCHEMAS)[C]>) => void } = {
  segmentanalyses: (problems, segment) => {
    checkSegment(problems, segment);
    segment.status ??= "test";
  },
  prospectanalyses: (problems, analysis) => {
    checkProspectAnalysis(problems, analysis);
    analysis.status ??= "test";
    analysis.simulation = { ...DEFAULT_SIMULATION, ...analysis.simulation };
  },
  licenses: (problems, license) => {
    checkLicense(problems, license);
    for (const v of license.versions) v.status ??= "test";
  },
  fullcycleanalyses: (problems, analysis) => {
    checkFullCycle(problems, analysis);
    analysis.resourceCase ??= "mean";
  },
  multiplescenarioanalyses: (problems, analysis) => {
    checkScenarios(problems, analysis);
    analysis.simulation = { ...DEFAULT_SIMULATION, ...analysis.simulation };
  },
};

/**
 * The body checked against its schema and the rules above, with defaults applied and the path id
 * filled in (a different id in the body is a 400).
 */
export function validateEntity(collection: Collection, id: string, idField: string, body: unknown): Record<string, unknown> {
  const entity = { ...(check(ENTITY_SCHEMAS[collection], body) as Record<string, unknown>) };
  const problems = new Problems();
  if (entity[idField] !== undefined && entity[idField] !== id) problems.add(`/body/${idField}`, "differs from the id in the path");
  entity[idField] = id;
  (RULES[collection] as (problems: Problems, entity: Record<string, unknown>) => void)(problems, entity);
  problems.throwIfAny();
  return entity;
}
