/**
 * Answers of the reporting aggregations over the demo data set (`derrick seed`), as a run gave them,
 * shortened for the API document: numbers to four significant digits and long series cut to their
 * first entries. Shown as the examples of their operations (edge/openapi/examples.ts).
 */
import {
  ALPHA_OUTLINE,
  FULL_CYCLE_ASSUMPTIONS,
  FULL_CYCLE_SETUP,
  GAS_CASE_DEPENDENCY,
  LICENSE_VERSIONS,
  OIL_CASE_DEPENDENCY,
  SCENARIOS,
} from "../../subjects/reporting-demo.ts";
import type { AggregationTask } from "../../subjects/reporting.ts";

type Percentiles = { p90: number; p50: number; p10: number; mean: number };
type Result = { unit: string; successCase: Percentiles; riskedMean: number };
type Products = { oil: Result; gas: Result; oilEquivalent: Result };
type Chances = { pgAtLeastOne: number; pgAll: number; pCommonSuccess: number; expectedSuccessfulSegments: number };

const GENERATOR = "xoshiro128** (seeded by splitmix32)";

/** The chances of the two prospect analyses, pa-alpha-oil and pa-alpha-gas. */
const OIL_CASE_CHANCES: Chances = { pgAtLeastOne: 0.474, pgAll: 0.036, pCommonSuccess: 0.6, expectedSuccessfulSegments: 0.72 };
const GAS_CASE_CHANCES: Chances = { pgAtLeastOne: 0.336, pgAll: 0.24, pCommonSuccess: 0.8, expectedSuccessfulSegments: 0.576 };

/** Risked products whose exceedance curves, cut to their first two points, share these probabilities. */
const riskedProducts =
  (probabilities: [number, number]) =>
  (unit: string, successCase: Percentiles, meanGivenCommonSuccess: number, riskedMean: number, volumes: [number, number]) => ({
    unit,
    successCase,
    successCaseGivenCommonSuccess: { mean: meanGivenCommonSuccess },
    riskedMean,
    riskedExceedance: volumes.map((volume, i) => ({ volume, probability: probabilities[i] })),
  });

const result = (unit: string, successCase: Percentiles, riskedMean: number): Result => ({ unit, successCase, riskedMean });

/** The primary product's PRMS class: low, best and high are its success case's P90, P50 and P10. */
function prmsCategory(product: string, { unit, successCase }: Result) {
  const { p90: lowValue, p50: bestValue, p10: highValue } = successCase;
  return { class: "ProspectiveResources", low: "1U", best: "2U", high: "3U", product, unit, lowValue, bestValue, highValue };
}

const onRecoverableBasis = ({ unit, ...rest }: Result) => ({ unit, basis: "recoverable", ...rest });

/** An approved segment's line in the prospect aggregation: its recoverable results, the oil equivalent's also at the top. */
function segmentLine(segmentAnalysisId: string, name: string, pg: number, pgConditionalOnCommon: number, results: Products) {
  const { unit, successCase, riskedMean } = results.oilEquivalent;
  const products = {
    oil: onRecoverableBasis(results.oil),
    gas: onRecoverableBasis(results.gas),
    oilEquivalent: onRecoverableBasis(results.oilEquivalent),
  };
  const primary = { product: "oilEquivalent", unit, riskedMean, successCase };
  return { segmentAnalysisId, name, status: "approved", pg, pgConditionalOnCommon, ...primary, products };
}

const ROGN_RESULTS: Products = {
  oil: result("MMbbl", { p90: 20, p50: 60, p10: 180, mean: 86.64 }, 25.99),
  gas: result("Bcf", { p90: 10, p50: 30.82, p10: 95, mean: 45.33 }, 13.6),
  oilEquivalent: result("MMboe", { p90: 22, p50: 65.67, p10: 196, mean: 94.5 }, 28.35),
};

const GARN_RESULTS: Products = {
  oil: result("MMbbl", { p90: 8, p50: 21.91, p10: 60, mean: 29.84 }, 7.162),
  gas: result("Bcf", { p90: 5, p50: 14.14, p10: 40, mean: 19.65 }, 4.717),
  oilEquivalent: result("MMboe", { p90: 9, p50: 24.56, p10: 67, mean: 33.37 }, 8.009),
};

const alpha = {
  prospectId: "p-alpha",
  name: "Alpha",
  prospectAnalyses: [
    { prospectAnalysisId: "pa-alpha-gas", status: "test", version: 1, pg: 0.336, pgAll: 0.24, dependencyModel: "fullyDependent" },
    { prospectAnalysisId: "pa-alpha-oil", status: "approved", version: 1, pg: 0.474, pgAll: 0.036, dependencyModel: "commonFactor" },
  ],
};

/** GET /assessments/v1/licenseaggregation/pl-123 (both versions, the linked prospects' analyses). */
export const LICENSE_AGGREGATION = {
  licenseId: "pl-123",
  name: "PL 123",
  nation: { code: "NO", name: "Norway" },
  versions: [
    { versionId: "pl-123-v1", ...LICENSE_VERSIONS[0], prospects: [alpha] },
    { versionId: "pl-123-v2", ...LICENSE_VERSIONS[1], prospects: [alpha, { prospectId: "p-beta", name: null, prospectAnalyses: [] }] },
  ],
};

const alphaOilProduct = riskedProducts([0.474, 0.4693]);
/** The risked products of pa-alpha-oil as its own analysis ran it. */
const ALPHA_OIL_PRODUCTS = {
  oil: alphaOilProduct("MMbbl", { p90: 12.13, p50: 52.67, p10: 166.9, mean: 76.65 }, 60.55, 36.33, [1.112, 4.269]),
  gas: alphaOilProduct("Bcf", { p90: 11.23, p50: 29.86, p10: 92.08, mean: 43.2 }, 34.13, 20.48, [1.006, 3.712]),
  oilEquivalent: alphaOilProduct("MMboe", { p90: 14.19, p50: 58.2, p10: 182.2, mean: 84.26 }, 66.56, 39.94, [1.913, 5.524]),
};

/** GET /assessments/v1/prospectanalysisaggregation/pa-alpha-oil (two of three segments, two exceedance points per product). */
export const PROSPECT_AGGREGATION = {
  prospectAnalysisId: "pa-alpha-oil",
  prospect: { id: "p-alpha", name: "Alpha" },
  status: "approved",
  version: 1,
  licenses: [{ licenseId: "pl-123", name: "PL 123" }],
  simulation: { method: "MonteCarlo", trials: 20000, seed: 42, generator: GENERATOR },
  dependency: OIL_CASE_DEPENDENCY,
  chanceOfSuccess: { ...OIL_CASE_CHANCES, pCommercial: 0.422, mefs: { value: 15, unit: "MMboe" } },
  resources: { basis: "recoverable", primaryProduct: "oilEquivalent", products: ALPHA_OIL_PRODUCTS },
  prmsCategory: prmsCategory("oilEquivalent", ALPHA_OIL_PRODUCTS.oilEquivalent),
  entitlement: {
    companyId: "c-nordic",
    workingInterest: 0.4,
    product: "oilEquivalent",
    unit: "MMboe",
    netRiskedMean: 15.97,
    netSuccessMean: 33.7,
  },
  segments: [
    segmentLine("seg-alpha-rogn", "Alpha Upper Jurassic (Rogn Fm)", 0.3, 0.5, ROGN_RESULTS),
    segmentLine("seg-alpha-garn", "Alpha Middle Jurassic (Garn Fm)", 0.24, 0.4, GARN_RESULTS),
  ],
};

/** GET …/prospectanalysisaggregation/pa-alpha-oil/details (one of three segments). */
export const PROSPECT_DETAILS = {
  prospectAnalysisId: "pa-alpha-oil",
  segments: [
    {
      segmentAnalysisId: "seg-alpha-rogn",
      name: "Alpha Upper Jurassic (Rogn Fm)",
      status: "approved",
      prospectId: "p-alpha",
      properties: [{ name: "Reservoir formation", type: "closedList", value: "Rogn" }],
      riskFactors: [{ name: "source", group: "common", probability: 0.8, shared: true }],
      pg: 0.3,
      pgConditionalOnCommon: 0.5,
      volumes: {
        oil: { unit: "MMbbl", p90: 20, p10: 180 },
        gas: { unit: "Bcf", p90: 10, p10: 95 },
        oilEquivalent: { unit: "MMboe", p90: 22, p10: 196 },
      },
      results: { recoverable: ROGN_RESULTS },
      entitlement: [
        { companyId: "c-nordic", share: 0.4, netSuccessMean: 37.8, netRiskedMean: 11.34, product: "oilEquivalent", unit: "MMboe" },
      ],
    },
  ],
};

/** POST /assessments/v1/fullcycleanalysisaggregation (the first years of each series). */
export const FULL_CYCLE_AGGREGATION = {
  currency: "USD",
  prospectAnalysisId: "pa-alpha-oil",
  levels: ["project", "workingInterest"],
  pg: 0.474,
  fullCycleAnalyses: [
    {
      fullCycleAnalysisId: "fc-alpha-mean",
      name: "Alpha mean case, subsea tie-back",
      resourceCase: "mean",
      version: 1,
      setup: FULL_CYCLE_SETUP,
      assumptions: FULL_CYCLE_ASSUMPTIONS,
      pg: 0.474,
      recoverable: { product: "oil", unit: "MMbbl", value: 76.65, source: "prospect mean success case" },
      hydrocarbonFlows: [
        { year: 2030, oil: 7.2, unitOil: "MMbbl", gas: 1.44, unitGas: "Bcf" },
        { year: 2031, oil: 9.964, unitOil: "MMbbl", gas: 1.993, unitGas: "Bcf" },
      ],
      cumulativeProduction: { oil: 76.65, gas: 15.33 },
      cashFlows: {
        project: [
          { year: 2027, revenue: 0, royalty: 0, opex: 0, capex: 60, tax: 0, governmentTake: 0, netCashFlow: -60 },
          { year: 2028, revenue: 0, royalty: 0, opex: 0, capex: 900, tax: 0, governmentTake: 0, netCashFlow: -900 },
        ],
        workingInterest: [
          { year: 2027, revenue: 0, royalty: 0, opex: 0, capex: 24, tax: 0, governmentTake: 0, netCashFlow: -24 },
          { year: 2028, revenue: 0, royalty: 0, opex: 0, capex: 360, tax: 0, governmentTake: 0, netCashFlow: -360 },
        ],
      },
      indicators: {
        project: {
          npv: 712.7,
          irr: 0.1634,
          payoutYear: 2033,
          maxExposure: -2060,
          profitToInvestment: 1.03,
          emv: 314.2,
          breakevenPg: 0.05939,
          breakevenPrice: 54.7,
          meetsRequiredIrr: true,
        },
        workingInterest: {
          npv: -50.91,
          irr: 0.05777,
          payoutYear: 2033,
          maxExposure: -824,
          profitToInvestment: 0.2267,
          emv: -33.6,
          breakevenPg: null,
          breakevenPrice: 82.47,
          meetsRequiredIrr: false,
          governmentTake: 710.4,
        },
      },
    },
  ],
};

const [oilCase, gasCase] = SCENARIOS;
const oilScenario = { ...oilCase, segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-garn"], dependency: OIL_CASE_DEPENDENCY };
const gasScenario = { ...gasCase, segmentAnalysisIds: ["seg-alpha-gas-upper", "seg-alpha-gas-lower"], dependency: GAS_CASE_DEPENDENCY };
const alphaGasProduct = riskedProducts([0.336, 0.3326]);
// The two scenarios' mixture: the gas case brings no oil, so its oil curve's first two points both lie at zero volume.
const mixtureProduct = riskedProducts([0.4326, 0.4283]);
const mixtureOilProduct = riskedProducts([0.4326, 0.4326]);

/** A scenario's line in the answer: the scenario as set up, with its prospect analysis' chances and recoverable products. */
function scenarioLine(
  { dependency, segmentAnalysisIds, ...scenario }: typeof oilScenario,
  chanceOfSuccess: Chances,
  products: Record<string, unknown>,
) {
  const pg = chanceOfSuccess.pgAtLeastOne;
  return {
    ...scenario,
    dependencyModel: dependency.model,
    segmentAnalysisIds,
    pg,
    chanceOfSuccess,
    resources: { basis: "recoverable", products },
  };
}

/** GET …/prospectmultiplescenarioanalysisaggregation/msa-alpha (two nodes of the outcome tree, two exceedance points). */
export const SCENARIO_AGGREGATION = {
  multipleScenarioAnalysisId: "msa-alpha",
  prospectId: "p-alpha",
  name: "Alpha: oil case versus gas case",
  setup: { scenarios: [oilScenario, gasScenario], simulation: { method: "MonteCarlo", trials: 20000, seed: 7, generator: GENERATOR } },
  results: {
    chanceOfSuccess: { pgAtLeastOne: 0.4326, expectedSuccessfulSegments: 0.6768 },
    resources: {
      primaryProduct: "oilEquivalent",
      products: {
        oil: mixtureOilProduct("MMbbl", { p90: 0, p50: 34.03, p10: 150.6, mean: 58.79 }, 42.39, 25.43, [0, 0]),
        gas: mixtureProduct("Bcf", { p90: 12, p50: 42.24, p10: 308.2, mean: 112.8 }, 66.96, 48.79, [0.9614, 3.811]),
        oilEquivalent: mixtureProduct("MMboe", { p90: 14.56, p50: 53.41, p10: 171.7, mean: 78.32 }, 54, 33.88, [1.832, 5.61]),
      },
    },
    byScenario: [
      scenarioLine(oilScenario, OIL_CASE_CHANCES, {
        oil: alphaOilProduct("MMbbl", { p90: 11.94, p50: 51.64, p10: 170.7, mean: 76.65 }, 60.55, 36.33, [1.472, 3.993]),
        gas: alphaOilProduct("Bcf", { p90: 10.86, p50: 29.45, p10: 94.06, mean: 43.2 }, 34.13, 20.48, [0.9614, 3.418]),
        oilEquivalent: alphaOilProduct("MMboe", { p90: 13.97, p50: 57.17, p10: 186.5, mean: 84.26 }, 66.56, 39.94, [1.832, 5.227]),
      }),
      scenarioLine(gasScenario, GAS_CASE_CHANCES, {
        gas: alphaGasProduct("Bcf", { p90: 100.3, p50: 267.8, p10: 660.3, mean: 341.9 }, 143.6, 114.9, [4.843, 39.02]),
        oilEquivalent: alphaGasProduct("MMboe", { p90: 16.85, p50: 45.63, p10: 114.4, mean: 58.79 }, 24.69, 19.75, [0.7724, 6.424]),
      }),
    ],
  },
  outcomeTree: {
    rootId: "n0",
    method: "exact",
    primaryProduct: "oilEquivalent",
    nodes: [
      { nodeId: "n0", parentId: null, kind: "root", jointProbability: 1 },
      {
        nodeId: "n1",
        parentId: "n0",
        kind: "scenario",
        scenarioId: "sc-oil",
        name: "Oil case",
        branchProbability: 0.7,
        jointProbability: 0.7,
      },
    ],
  },
  polygon: {
    type: "Feature",
    bbox: [7.1, 64.1, 7.35, 64.22],
    geometry: ALPHA_OUTLINE.geometry,
    properties: { ...ALPHA_OUTLINE.properties, crs: "EPSG:4326", areaKm2: 162 },
  },
};

const TASK_ID = "atk_2bT0kQ9w5ZxV7mN3pL1sRd";
const taskResult = `/assessments/v1/aggregationtasks/${TASK_ID}/result`;

/** The 202 of a large aggregation: its task, queued. */
export const AGGREGATION_TASK_ACCEPTED = {
  taskId: TASK_ID,
  aggregation: "scenarios",
  id: "msa-alpha",
  state: "queued",
  work: 230_554_432,
  createdAt: "2026-11-28T10:00:00.000Z",
  result: taskResult,
} satisfies AggregationTask;

/** The same task once it succeeded: its result is kept until expiresAt. */
export const AGGREGATION_TASK_SUCCEEDED = {
  ...AGGREGATION_TASK_ACCEPTED,
  state: "succeeded",
  startedAt: "2026-11-28T10:00:00.004Z",
  completedAt: "2026-11-28T10:00:03.212Z",
  expiresAt: "2026-11-28T10:01:03.212Z",
} satisfies AggregationTask;
