/**
 * The five aggregations as pure functions of their loaded inputs (no NATS, no KV): output names
 * follow docs/reporting.md. Exact formulas wherever they exist (chance of success, risked
 * and success-case means, segment percentiles, outcome trees up to 16 segments); seeded Monte Carlo
 * (math/monte-carlo.ts) for the percentiles of sums and the commercial chance.
 */
import {
  PRODUCTS,
  type FullCycleAnalysis,
  type Level,
  type License,
  type MultipleScenarioAnalysis,
  type Product,
  type ProspectAnalysis,
  type SegmentAnalysis,
  type Simulation as SimulationSpec,
} from "../../subjects/reporting.ts";
import { chanceOfSuccess, productOf, riskedMean, type Chance } from "./math/chance.ts";
import { volumeModel, type VolumeModel } from "./math/lognormal.ts";
import {
  apportion,
  concatSimulations,
  exceedanceFraction,
  simulate,
  successCasePercentiles,
  successCaseSummary,
  type ExceedancePoint,
  type Simulation,
} from "./math/monte-carlo.ts";
import { MAX_TREE_OUTCOMES, allotOutcomes, outcomeBound, outcomeTree } from "./math/outcome-tree.ts";
import { prospectiveResources } from "./math/prms.ts";
import { segmentEntitlement } from "./math/entitlement.ts";
import { cashFlows, priceAt, productionProfile, type CashFlowRow, type Fiscal } from "./math/cashflow.ts";
import {
  breakevenPg,
  breakevenPrice,
  emv,
  irr,
  maxExposure,
  npv,
  payoutYear,
  profitToInvestment,
  type YearValue,
} from "./math/indicators.ts";
import { areaKm2, bbox, type PolygonGeometry } from "./math/polygon.ts";
import { basisOfSegments, unitsOf } from "./consistency.ts";

export const GENERATOR = "xoshiro128** (seeded by splitmix32)";

/** Stored entities carry their id and defaults (validate.ts). */
export type Stored<T> = T & { version?: number };
type Segment = SegmentAnalysis & { segmentAnalysisId: string };
type Analysis = ProspectAnalysis & { prospectAnalysisId: string; simulation: SimulationSpec };

// ---- the model of one prospect analysis --------------------------------------------------------

export type ProspectModel = {
  pa: Analysis;
  segments: Segment[];
  pc: number;
  ps: number[];
  chance: Chance;
  products: Product[];
  /** The product trees, entitlement and PRMS figures speak about: oilEquivalent when present, else the first. */
  primary: Product | undefined;
  volumes: Array<Partial<Record<Product, VolumeModel>>>;
  units: Partial<Record<Product, string>>;
  basis: "recoverable" | "inPlace";
};

export function prospectModel(pa: Analysis, segments: Segment[]): ProspectModel {
  const pc = productOf((pa.dependency.commonFactors ?? []).map((f) => f.probability));
  const ps = segments.map((s) => productOf(s.riskFactors.map((f) => f.probability)));
  const products = PRODUCTS.filter((p) => segments.some((s) => s.volumes[p]));
  const units = unitsOf(segments);
  const volumes = segments.map((s) => {
    const out: Partial<Record<Product, VolumeModel>> = {};
    for (const p of products) if (s.volumes[p]) out[p] = volumeModel(s.volumes[p]!);
    return out;
  });
  const basis = basisOfSegments(segments) as ProspectModel["basis"];
  return {
    pa,
    segments,
    pc,
    ps,
    chance: chanceOfSuccess({ model: pa.dependency.model, pc, ps }),
    products,
    primary: products.includes("oilEquivalent") ? "oilEquivalent" : products[0],
    volumes,
    units,
    basis,
  };
}

const meansOf = (m: ProspectModel, product: Product | undefined) => m.volumes.map((v) => (product && v[product] ? v[product]!.mean : 0));

export function simulateProspect(m: ProspectModel, trials = m.pa.simulation.trials, seed = m.pa.simulation.seed): Simulation {
  return simulate({
    model: m.pa.dependency.model,
    pc: m.pc,
    segments: m.ps.map((ps, i) => ({ ps, volumes: m.volumes[i]! })),
    products: m.products,
    trials,
    seed,
  });
}

type ProductResult = {
  unit: string;
  successCase: { p90: number; p50: number; p10: number; mean: number };
  successCaseGivenCommonSuccess: { mean: number };
  riskedMean: number;
  /** P(V ≥ volume) over all trials: starts at the chance of success. */
  riskedExceedance: ExceedancePoint[];
};

function productResults(
  m: ProspectModel,
  sim: Simulation,
  pgAtLeastOne: number,
  weight?: { riskedMean: (p: Product) => number; givenCommon: (p: Product) => number },
) {
  const out: Partial<Record<Product, ProductResult>> = {};
  for (const p of m.products) {
    const risked = weight ? weight.riskedMean(p) : riskedMean(m.chance.pg, meansOf(m, p));
    const givenCommon = weight ? weight.givenCommon(p) : riskedMean(m.ps, meansOf(m, p));
    const { percentiles, riskedExceedance } = successCaseSummary(sim, p);
    out[p] = {
      unit: m.units[p]!,
      successCase: { ...percentiles, mean: pgAtLeastOne > 0 ? risked / pgAtLeastOne : 0 },
      successCaseGivenCommonSuccess: { mean: givenCommon },
      riskedMean: risked,
      riskedExceedance,
    };
  }
  return out;
}

function segmentSummary(m: ProspectModel, i: number) {
  const s = m.segments[i]!;
  const products: Record<
    string,
    { unit: string; basis: string; successCase: { p90: number; p50: number; p10: number; mean: number }; riskedMean: number }
  > = {};
  for (const p of m.products) {
    const v = m.volumes[i]![p];
    if (!v) continue;
    products[p] = {
      unit: s.volumes[p]!.unit,
      basis: s.volumes[p]!.basis ?? "recoverable",
      successCase: { p90: v.p90, p50: v.p50, p10: v.p10, mean: v.mean },
      riskedMean: m.chance.pg[i]! * v.mean,
    };
  }
  const primary = m.primary && products[m.primary] ? m.primary : (Object.keys(products)[0] as Product | undefined);
  return { s, products, primary };
}

// ---- prospect analysis aggregation -------------------------------------------------------------

export function prospectAggregation(m: ProspectModel, licenses: Array<{ licenseId: string; name: string }>, version: number) {
  const { pa, chance } = m;
  const sim = simulateProspect(m);
  const resources = productResults(m, sim, chance.pgAtLeastOne);
  let pCommercial: number | undefined;
  if (pa.mefs) {
    // The handlers refuse an MEFS in a unit no product has (consistency.ts).
    const product =
      m.products.find((p) => p === m.primary && m.units[p] === pa.mefs!.unit) ?? m.products.find((p) => m.units[p] === pa.mefs!.unit);
    pCommercial = product ? exceedanceFraction(sim, product, pa.mefs.value) : 0;
  }
  const primary = m.primary ? resources[m.primary] : undefined;
  return {
    prospectAnalysisId: pa.prospectAnalysisId,
    prospect: pa.prospect,
    status: pa.status,
    version: pa.version ?? version,
    licenses,
    simulation: { method: "MonteCarlo", trials: pa.simulation.trials, seed: pa.simulation.seed, generator: GENERATOR },
    dependency: { model: pa.dependency.model, commonFactors: pa.dependency.commonFactors ?? [] },
    chanceOfSuccess: {
      pgAtLeastOne: chance.pgAtLeastOne,
      pgAll: chance.pgAll,
      pCommonSuccess: chance.pCommonSuccess,
      expectedSuccessfulSegments: chance.expectedSuccessfulSegments,
      ...(pa.mefs ? { pCommercial, mefs: pa.mefs } : {}),
    },
    resources: { basis: m.basis, primaryProduct: m.primary ?? null, products: resources },
    prmsCategory: {
      ...prospectiveResources(),
      ...(primary
        ? {
            product: m.primary,
            unit: primary.unit,
            lowValue: primary.successCase.p90,
            bestValue: primary.successCase.p50,
            highValue: primary.successCase.p10,
          }
        : {}),
    },
    ...(pa.entitlement && primary
      ? {
          entitlement: {
            companyId: pa.entitlement.companyId,
            workingInterest: pa.entitlement.workingInterest,
            product: m.primary,
            unit: primary.unit,
            netRiskedMean: primary.riskedMean * pa.entitlement.workingInterest,
            netSuccessMean: primary.successCase.mean * pa.entitlement.workingInterest,
          },
        }
      : {}),
    segments: m.segments.map((_, i) => {
      const { s, products, primary: segPrimary } = segmentSummary(m, i);
      const main = segPrimary ? products[segPrimary]! : undefined;
      return {
        segmentAnalysisId: s.segmentAnalysisId,
        name: s.name,
        status: s.status,
        pg: chance.pg[i]!,
        pgConditionalOnCommon: m.ps[i]!,
        product: segPrimary ?? null,
        unit: main?.unit ?? null,
        riskedMean: main?.riskedMean ?? 0,
        successCase: main?.successCase ?? null,
        products,
      };
    }),
  };
}

// ---- details ----------------------------------------------------------------------------------

export function prospectDetails(m: ProspectModel) {
  const common = (m.pa.dependency.commonFactors ?? []).map((f) => ({
    name: f.name,
    group: "common",
    probability: f.probability,
    shared: true,
  }));
  return {
    prospectAnalysisId: m.pa.prospectAnalysisId,
    segments: m.segments.map((_, i) => {
      const { s, products, primary } = segmentSummary(m, i);
      const byBasis: Record<string, Record<string, unknown>> = {};
      for (const [p, r] of Object.entries(products))
        (byBasis[r.basis] ??= {})[p] = { unit: r.unit, successCase: r.successCase, riskedMean: r.riskedMean };
      const main = primary ? products[primary]! : undefined;
      return {
        segmentAnalysisId: s.segmentAnalysisId,
        name: s.name,
        status: s.status,
        ...(s.prospectId ? { prospectId: s.prospectId } : {}),
        properties: s.properties ?? [],
        riskFactors: [
          ...common,
          ...s.riskFactors.map((f) => ({ name: f.name, group: "segment", probability: f.probability, shared: false })),
        ],
        pg: m.chance.pg[i]!,
        pgConditionalOnCommon: m.ps[i]!,
        volumes: s.volumes,
        results: byBasis,
        entitlement: main
          ? segmentEntitlement(s.entitlement ?? [], main.successCase.mean, main.riskedMean).map((e) => ({
              ...e,
              product: primary,
              unit: main.unit,
            }))
          : [],
      };
    }),
  };
}

// ---- license aggregation ----------------------------------------------------------------------

/** An analysis linked through its prospect: its model, or what is missing to build one. */
export type LinkedAnalysis =
  | { model: ProspectModel; version: number }
  | { broken: { pa: ProspectAnalysis & { prospectAnalysisId: string }; version: number; missingSegmentAnalysisIds: string[] } };

function linkedSummary(linked: LinkedAnalysis) {
  if ("broken" in linked) {
    const { pa, version, missingSegmentAnalysisIds } = linked.broken;
    // Still listed: a license view should show the analysis and why it has no chance of success.
    return {
      prospectAnalysisId: pa.prospectAnalysisId,
      status: pa.status,
      version: pa.version ?? version,
      pg: null,
      pgAll: null,
      dependencyModel: pa.dependency.model,
      missingSegmentAnalysisIds,
    };
  }
  const { model, version } = linked;
  return {
    prospectAnalysisId: model.pa.prospectAnalysisId,
    status: model.pa.status,
    version: model.pa.version ?? version,
    pg: model.chance.pgAtLeastOne,
    pgAll: model.chance.pgAll,
    dependencyModel: model.pa.dependency.model,
  };
}

export function licenseAggregation(license: Stored<License> & { licenseId: string }, analysesByProspect: Map<string, LinkedAnalysis[]>) {
  return {
    licenseId: license.licenseId,
    name: license.name,
    nation: license.nation,
    versions: [...license.versions]
      .sort((a, b) => a.versionNumber - b.versionNumber)
      .map((v) => ({
        versionId: `${license.licenseId}-v${v.versionNumber}`,
        ...v,
        validTo: v.validTo ?? null,
        prospects: v.prospectIds.map((prospectId) => {
          const analyses = analysesByProspect.get(prospectId) ?? [];
          const first = analyses[0];
          return {
            prospectId,
            name: first ? ("broken" in first ? first.broken.pa.prospect.name : first.model.pa.prospect.name) : null,
            prospectAnalyses: analyses.map(linkedSummary),
          };
        }),
      })),
  };
}

// ---- full cycle aggregation -------------------------------------------------------------------

type LevelIndicators = {
  npv: number;
  irr: number | null;
  payoutYear: number | null;
  maxExposure: number;
  profitToInvestment: number | null;
  emv: number;
  breakevenPg: number | null;
  /** Flat price of the produced product (its price unit) at which this level's NPV is 0; null without a production model. */
  breakevenPrice: number | null;
  meetsRequiredIrr?: boolean | null;
  governmentTake?: number;
};

export type FullCycleInput = { fc: Stored<FullCycleAnalysis> & { fullCycleAnalysisId: string }; version: number };

/**
 * One full cycle analysis: the recoverable volume of the resource case (from the prospect's
 * success case unless given), the production profile, cash flows per level and indicators with
 * the prospect's Pg. `workingInterest` overrides the analysis's when the request names a company.
 */
export function fullCycle(
  input: FullCycleInput,
  m: ProspectModel,
  sim: Simulation | undefined,
  levels: readonly Level[],
  workingInterestOverride: number | undefined,
) {
  const { fc } = input;
  const wi = workingInterestOverride ?? fc.assumptions.workingInterest;
  const pg = m.chance.pgAtLeastOne;
  const discounting = fc.setup.discounting ?? "endOfYear";
  let flows: Record<Level, CashFlowRow[] | Array<{ year: number; netCashFlow: number }> | undefined>;
  let hydrocarbonFlows: Array<Record<string, number | string>> = [];
  const cumulativeProduction: Record<string, number> = {};
  let investment: Record<Level, number> = { project: 0, contractor: 0, workingInterest: 0 };
  let recoverable: { product: string; unit: string; value: number; source: string } | undefined;
  let breakevenPriceOf: (level: Level) => number | null = () => null;
  if (fc.production && fc.costs) {
    const prod = fc.production;
    const product = (prod.product ?? "oil") as Product;
    const unit = m.units[product] ?? m.units.oilEquivalent ?? "";
    const value = prod.recoverable ?? resourceCaseVolume(m, sim, m.units[product] ? product : "oilEquivalent", fc.resourceCase ?? "mean");
    recoverable = {
      product,
      unit,
      value,
      source: prod.recoverable !== undefined ? "given" : `prospect ${fc.resourceCase ?? "mean"} success case`,
    };
    const profile = productionProfile({
      firstYear: prod.firstYear,
      recoverable: value,
      wellsPerYear: prod.wellsPerYear,
      wellRatePerYear: prod.wellRatePerYear,
      plateauFraction: prod.plateauFraction,
      declineStartRemaining: prod.declineStartRemaining,
      declineRate: prod.declineRate,
      economicLimit: prod.economicLimit ?? 0,
      maxYears: prod.maxYears ?? 50,
    });
    const gor = prod.gasOilRatio;
    const price = (p: string) => fc.assumptions.prices.find((x) => x.product === p)?.series;
    const capexByYear = new Map(fc.costs.capex.map((c) => [c.year, c.value]));
    const produced = new Map(profile.map((p) => [p.year, p.volume]));
    const years = [...new Set([...capexByYear.keys(), ...produced.keys()])].sort((a, b) => a - b);
    const unitKey = `unit${product[0]!.toUpperCase()}${product.slice(1)}`;
    hydrocarbonFlows = profile.map(({ year, volume }) => ({
      year,
      [product]: volume,
      [unitKey]: unit,
      ...(gor !== undefined ? { gas: volume * gor, unitGas: prod.gasUnit ?? "gas units" } : {}),
    }));
    cumulativeProduction[product] = profile.reduce((a, p) => a + p.volume, 0);
    if (gor !== undefined) cumulativeProduction.gas = cumulativeProduction[product]! * gor;
    const mainSeries = price(product)!;
    const gasSeries = price("gas");
    const rowsAt = (mainPrice: (year: number) => number) =>
      years.map((year) => {
        const volume = produced.get(year) ?? 0;
        const revenue = volume * mainPrice(year) + (gor !== undefined && gasSeries ? volume * gor * priceAt(gasSeries, year) : 0);
        const opex = volume > 0 ? (fc.costs!.opexFixed ?? 0) + (fc.costs!.opexPerUnit ?? 0) * volume : 0;
        return { year, revenue, opex, capex: capexByYear.get(year) ?? 0 };
      });
    const rows = rowsAt((year) => priceAt(mainSeries, year));
    const levelFlows = cashFlows(rows, fc.assumptions.fiscal as Fiscal, wi);
    flows = levelFlows;
    const npvAtFlatPrice = (level: Level, flat: number) => {
      const series = cashFlows(
        rowsAt(() => flat),
        fc.assumptions.fiscal as Fiscal,
        wi,
      )[level].map((r) => ({ year: r.year, value: r.netCashFlow }));
      return npv(series, fc.setup.discountRate, fc.setup.npvYear, fc.setup.discounting ?? "endOfYear");
    };
    breakevenPriceOf = (level) => breakevenPrice((flat) => npvAtFlatPrice(level, flat), Math.max(1, ...mainSeries.map((p) => p.value)));
    const capex = rows.reduce((a, r) => a + r.capex, 0);
    investment = { project: capex, contractor: capex, workingInterest: capex * wi };
  } else {
    const given = fc.cashFlows!;
    const contractor = given.contractor;
    const assumed = fc.assumptions.workingInterest;
    const scaled = (rows: ReadonlyArray<{ year: number; netCashFlow: number }>, factor: number) =>
      rows.map((r) => ({ year: r.year, netCashFlow: r.netCashFlow * factor }));
    // Explicit working-interest flows are the analysis's own interest: for a company holding
    // another, the contractor's flows × its interest, else those flows rescaled (they answered
    // unchanged while the dry-hole cost and the echoed interest were the company's).
    let workingInterest = given.workingInterest;
    if (!workingInterest || wi !== assumed)
      workingInterest = contractor
        ? scaled(contractor, wi)
        : workingInterest && assumed > 0
          ? scaled(workingInterest, wi / assumed)
          : undefined;
    flows = { project: given.project, contractor, workingInterest };
    for (const level of ["project", "contractor", "workingInterest"] as const)
      investment[level] = -(flows[level] ?? []).reduce((a, r) => a + Math.min(0, r.netCashFlow), 0);
  }
  const indicators: Partial<Record<Level, LevelIndicators | null>> = {};
  const cashFlowsOut: Partial<Record<Level, unknown[] | null>> = {};
  for (const level of levels) {
    const rows = flows[level];
    cashFlowsOut[level] = rows ? [...rows].sort((a, b) => a.year - b.year) : null;
    if (!rows) {
      indicators[level] = null;
      continue;
    }
    const series: YearValue[] = rows.map((r) => ({ year: r.year, value: r.netCashFlow }));
    const value = npv(series, fc.setup.discountRate, fc.setup.npvYear, discounting);
    const dry = fc.assumptions.dryHoleCost * (level === "workingInterest" ? wi : 1);
    const rate = irr(series);
    indicators[level] = {
      npv: value,
      irr: rate,
      payoutYear: payoutYear(series),
      maxExposure: maxExposure(series),
      profitToInvestment: profitToInvestment(series, investment[level]),
      emv: emv(pg, value, dry),
      breakevenPg: breakevenPg(value, dry),
      breakevenPrice: breakevenPriceOf(level),
      ...(fc.setup.requiredIrr !== undefined ? { meetsRequiredIrr: rate === null ? null : rate >= fc.setup.requiredIrr } : {}),
      ...(level !== "project" && rows.length && "governmentTake" in rows[0]!
        ? { governmentTake: (rows as CashFlowRow[]).reduce((a, r) => a + r.governmentTake, 0) }
        : {}),
    };
  }
  return {
    fullCycleAnalysisId: fc.fullCycleAnalysisId,
    name: fc.name,
    resourceCase: fc.resourceCase ?? "mean",
    version: input.version,
    setup: { ...fc.setup, discounting },
    assumptions: { ...fc.assumptions, workingInterest: wi },
    pg,
    ...(recoverable ? { recoverable } : {}),
    hydrocarbonFlows,
    cumulativeProduction,
    cashFlows: cashFlowsOut,
    indicators,
  };
}

/** The success-case volume of a product at a resource case (mean exact; percentiles simulated). */
function resourceCaseVolume(m: ProspectModel, sim: Simulation | undefined, product: Product, resourceCase: string): number {
  if (!m.units[product]) return 0;
  const risked = riskedMean(m.chance.pg, meansOf(m, product));
  if (resourceCase === "mean" || !sim) return m.chance.pgAtLeastOne > 0 ? risked / m.chance.pgAtLeastOne : 0;
  const pct = successCasePercentiles(sim, product);
  return pct[resourceCase as "p90" | "p50" | "p10"];
}

// ---- multiple scenario aggregation ------------------------------------------------------------

export type ScenarioInput = { scenario: MultipleScenarioAnalysis["scenarios"][number]; model: ProspectModel };

/**
 * Bytes the outcome nodes of a scenario aggregation may take, leaving the rest of the reply (≤ 1 MB at the limits) well
 * within the 64 MiB a reply may take: 64 segments with 128-character ids would need ~600 MB for 2^16 outcomes.
 */
export const MAX_TREE_BYTES = 48 * 1024 * 1024;

/** An upper estimate of one outcome node's JSON: its other fields (units ≤ 32 characters) and `"<id>":false,` per segment (ids are ASCII). */
export const outcomeNodeBytes = (segmentIds: readonly string[]): number => 250 + segmentIds.reduce((sum, id) => sum + id.length + 9, 0);

/** Seeds of the scenarios' simulations: distinct, derived from the analysis seed. */
const scenarioSeed = (seed: number, index: number) => (seed + Math.imul(index + 1, 0x9e3779b9)) >>> 0;

export function scenarioAggregation(
  msa: Stored<MultipleScenarioAnalysis> & { multipleScenarioAnalysisId: string; simulation: SimulationSpec },
  scenarios: ScenarioInput[],
) {
  const { trials, seed } = msa.simulation;
  const products = PRODUCTS.filter((p) => scenarios.some((s) => s.model.units[p]));
  const primary = products.includes("oilEquivalent") ? "oilEquivalent" : products[0];
  const units: Partial<Record<Product, string>> = {};
  for (const p of products) units[p] = scenarios.find((s) => s.model.units[p])!.model.units[p];

  const scenarioResult = (scenario: ScenarioInput["scenario"], model: ProspectModel, sim: Simulation) => ({
    scenarioId: scenario.scenarioId,
    name: scenario.name,
    probability: scenario.probability,
    prospectAnalysisId: scenario.prospectAnalysisId,
    dependencyModel: model.pa.dependency.model,
    segmentAnalysisIds: model.segments.map((s) => s.segmentAnalysisId),
    pg: model.chance.pgAtLeastOne,
    chanceOfSuccess: {
      pgAtLeastOne: model.chance.pgAtLeastOne,
      pgAll: model.chance.pgAll,
      pCommonSuccess: model.chance.pCommonSuccess,
      expectedSuccessfulSegments: model.chance.expectedSuccessfulSegments,
    },
    resources: { basis: model.basis, products: productResults(model, sim, model.chance.pgAtLeastOne) },
  });
  // Overall: exact mixtures of the means; percentiles from a stratified mixture of the scenarios'
  // success-case trials, each scenario weighted by its share of the success, p_s·Pg_s / Σ p·Pg (the
  // first share·N trials of its N-trial run, split by largest remainder so they add up to N).
  const pgAtLeastOne = scenarios.reduce((a, s) => a + s.scenario.probability * s.model.chance.pgAtLeastOne, 0);
  const expectedSuccessfulSegments = scenarios.reduce((a, s) => a + s.scenario.probability * s.model.chance.expectedSuccessfulSegments, 0);
  // One scenario's run at a time: only the prefix the mixture takes is kept (a copy), so memory
  // does not grow with the scenarios (docs/reporting.md#how-the-numbers-are-computed).
  const parts: Array<Omit<Simulation, "pSuccess">> = [];
  const takes = apportion(
    scenarios.map(({ scenario, model }) => scenario.probability * model.chance.pgAtLeastOne),
    trials,
  );
  const byScenario = scenarios.map(({ scenario, model }, i) => {
    const sim = simulateProspect(model, trials, scenarioSeed(seed, i));
    const take = takes[i]!;
    const totals: Record<string, Float64Array> = {};
    for (const p of products) totals[p] = sim.totals[p] ? sim.totals[p]!.slice(0, take) : new Float64Array(take);
    parts.push({ trials: take, anySuccess: sim.anySuccess.slice(0, take), totals });
    return scenarioResult(scenario, model, sim);
  });

  const mixture = concatSimulations(parts, products, pgAtLeastOne);
  parts.length = 0;
  const overall: Partial<Record<Product, ProductResult>> = {};
  for (const p of products) {
    const risked = scenarios.reduce((a, s) => a + s.scenario.probability * riskedMean(s.model.chance.pg, meansOf(s.model, p)), 0);
    const givenCommon = scenarios.reduce((a, s) => a + s.scenario.probability * riskedMean(s.model.ps, meansOf(s.model, p)), 0);
    const { percentiles, riskedExceedance } = successCaseSummary(mixture, p);
    overall[p] = {
      unit: units[p]!,
      successCase: { ...percentiles, mean: pgAtLeastOne > 0 ? risked / pgAtLeastOne : 0 },
      successCaseGivenCommonSuccess: { mean: givenCommon },
      riskedMean: risked,
      riskedExceedance,
    };
  }

  // Outcome tree: root → scenarios → [common failure | common success] → segment combinations.
  type Node = Record<string, unknown> & { nodeId: string; parentId: string | null; kind: string };
  const nodes: Node[] = [{ nodeId: "n0", parentId: null, kind: "root", jointProbability: 1 }];
  let next = 1;
  const id = () => `n${next++}`;
  let method: "exact" | "MonteCarlo" = "exact";
  // One budget of outcomes for the whole tree (outcome-tree.ts): a scenario beyond its share keeps
  // its most likely outcomes and folds the rest into one `otherOutcomes` node.
  const treeInputs = scenarios.map(({ model }, i) => ({
    model: model.pa.dependency.model,
    pc: model.pc,
    ps: model.ps,
    means: meansOf(model, primary),
    trials,
    seed: scenarioSeed(seed, i),
  }));
  const nodeBytes = Math.max(...scenarios.map(({ model }) => outcomeNodeBytes(model.segments.map((s) => s.segmentAnalysisId))));
  const allotted = allotOutcomes(
    treeInputs.map((input, i) => (scenarios[i]!.scenario.probability > 0 ? outcomeBound(input) : 0)),
    Math.min(MAX_TREE_OUTCOMES, Math.floor(MAX_TREE_BYTES / nodeBytes)),
  );
  scenarios.forEach(({ scenario, model }, i) => {
    if (!(scenario.probability > 0)) return;
    const scenarioNode = id();
    nodes.push({
      nodeId: scenarioNode,
      parentId: "n0",
      kind: "scenario",
      scenarioId: scenario.scenarioId,
      name: scenario.name,
      branchProbability: scenario.probability,
      jointProbability: scenario.probability,
    });
    const tree = outcomeTree(treeInputs[i]!, allotted[i]!);
    if (tree.method === "MonteCarlo") method = "MonteCarlo";
    let parent = scenarioNode;
    if (tree.commonFailure !== undefined)
      nodes.push({
        nodeId: id(),
        parentId: scenarioNode,
        kind: "commonFailure",
        branchProbability: tree.commonFailure,
        jointProbability: scenario.probability * tree.commonFailure,
        volume: { mean: 0, unit: primary ? units[primary] : null },
      });
    if (tree.commonSuccess !== undefined) {
      parent = id();
      nodes.push({
        nodeId: parent,
        parentId: scenarioNode,
        kind: "commonSuccess",
        branchProbability: tree.commonSuccess,
        jointProbability: scenario.probability * tree.commonSuccess,
      });
    }
    for (const leaf of tree.leaves) {
      const segmentStates: Record<string, boolean> = {};
      model.segments.forEach((s, k) => (segmentStates[s.segmentAnalysisId] = leaf.states[k]!));
      nodes.push({
        nodeId: id(),
        parentId: parent,
        kind: "outcome",
        segmentStates,
        branchProbability: leaf.branchProbability,
        jointProbability: scenario.probability * leaf.probability,
        volume: { mean: leaf.volumeMean, unit: primary ? units[primary] : null, product: primary ?? null },
      });
    }
    if (tree.other)
      nodes.push({
        nodeId: id(),
        parentId: parent,
        kind: "otherOutcomes",
        outcomes: tree.other.outcomes,
        branchProbability: tree.other.branchProbability,
        jointProbability: scenario.probability * tree.other.probability,
        volume: { mean: tree.other.volumeMean, unit: primary ? units[primary] : null, product: primary ?? null },
      });
  });

  return {
    multipleScenarioAnalysisId: msa.multipleScenarioAnalysisId,
    prospectId: msa.prospectId,
    ...(msa.name ? { name: msa.name } : {}),
    setup: {
      scenarios: scenarios.map(({ scenario, model }) => ({
        ...scenario,
        segmentAnalysisIds: model.segments.map((s) => s.segmentAnalysisId),
        dependency: { model: model.pa.dependency.model, commonFactors: model.pa.dependency.commonFactors ?? [] },
      })),
      simulation: { method: "MonteCarlo", trials, seed, generator: GENERATOR },
    },
    results: {
      chanceOfSuccess: { pgAtLeastOne, expectedSuccessfulSegments },
      resources: { primaryProduct: primary ?? null, products: overall },
      byScenario,
    },
    outcomeTree: { rootId: "n0", method, primaryProduct: primary ?? null, nodes },
    polygon: msa.polygon ? polygonOut(msa.polygon) : null,
  };
}

function polygonOut(polygon: NonNullable<MultipleScenarioAnalysis["polygon"]>) {
  const geometry = (
    polygon.type === "Feature" ? polygon.geometry : { type: polygon.type, coordinates: polygon.coordinates }
  ) as PolygonGeometry;
  const given = polygon.type === "Feature" && polygon.properties ? polygon.properties : {};
  return {
    type: "Feature",
    ...(polygon.type === "Feature" && polygon.id !== undefined ? { id: polygon.id } : {}),
    bbox: bbox(geometry),
    geometry,
    properties: { ...given, crs: "EPSG:4326", areaKm2: areaKm2(geometry) },
  };
}
