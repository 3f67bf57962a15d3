/**
 * The demo data set loaded by `derrick seed` (and used by tests and the bench): the Alpha prospect
 * in license PL 123 (two versions), three segments under a common charge risk, a mean-case full
 * cycle analysis under Norwegian-style royalty/tax terms, and a two-scenario (oil case / gas case)
 * analysis with the prospect outline. Volumes in MMbbl / Bcf / MMboe, money in MUSD.
 */
import type { Collection } from "./reporting.ts";

export type DemoItem = { collection: Collection; id: string; body: Record<string, unknown> };

const properties = (formation: string, depth: number) => [
  { name: "Reservoir formation", type: "closedList", value: formation },
  { name: "Reservoir age", type: "closedList", value: "Jurassic" },
  { name: "Water depth", type: "float", value: 350, unit: "m" },
  { name: "Top reservoir depth", type: "integer", value: depth, unit: "m" },
  { name: "Evaluated", type: "date", value: "2026-03-15" },
];

const entitlement = [
  { companyId: "c-nordic", share: 0.4 },
  { companyId: "c-fjord", share: 0.35 },
  { companyId: "c-polar", share: 0.25 },
];

const licensees = (operator: string) => [
  { companyId: "c-nordic", companyName: "Nordic Energy AS", interest: 0.4, isOperator: operator === "c-nordic" },
  { companyId: "c-fjord", companyName: "Fjord Petroleum ASA", interest: 0.35, isOperator: operator === "c-fjord" },
  { companyId: "c-polar", companyName: "Polar Resources AS", interest: 0.25, isOperator: operator === "c-polar" },
];

const riskFactors = (chances: Record<string, number>) => Object.entries(chances).map(([name, probability]) => ({ name, probability }));

const range = (unit: string, p90: number, p10: number) => ({ unit, p90, p10 });

const segment = (id: string, name: string, status: string, analysis: Record<string, unknown>): DemoItem => ({
  collection: "segmentanalyses",
  id,
  body: { name, prospectId: "p-alpha", status, ...analysis },
});

const prospectAnalysis = (id: string, status: string, analysis: Record<string, unknown>): DemoItem => ({
  collection: "prospectanalyses",
  id,
  body: { prospect: { id: "p-alpha", name: "Alpha" }, status, licenseIds: ["pl-123"], ...analysis },
});

// Each upsert carries one version, and the license keeps every version it was sent.
const license = (version: Record<string, unknown>): DemoItem => ({
  collection: "licenses",
  id: "pl-123",
  body: { name: "PL 123", nation: { code: "NO", name: "Norway" }, versions: [version] },
});

const firstVersion = {
  versionNumber: 1,
  status: "historical",
  validFrom: "2019-02-05",
  validTo: "2023-01-01",
  dateGranted: "2019-02-05",
  dateExpires: "2029-02-05",
  phase: "INITIAL",
  licenseStatus: "ACTIVE",
  licensingRound: "APA 2018",
  areaKm2: { original: 812.4, current: 812.4 },
  blocks: [{ blockId: "6407/9" }, { blockId: "6407/12", partial: true }],
  licensees: licensees("c-fjord"),
  prospectIds: ["p-alpha"],
};

/** License PL 123 as first awarded, then after an area relinquishment and a change of operator. */
export const LICENSE_VERSIONS = [
  firstVersion,
  {
    ...firstVersion,
    versionNumber: 2,
    status: "approved",
    validFrom: "2023-01-01",
    validTo: null,
    areaKm2: { original: 812.4, current: 640.1 },
    blocks: [{ blockId: "6407/9", quadrant: "6407", partial: true }],
    licensees: licensees("c-nordic"),
    prospectIds: ["p-alpha", "p-beta"],
  },
];

export const OIL_CASE_DEPENDENCY = {
  model: "commonFactor",
  commonFactors: [
    { name: "source", probability: 0.8 },
    { name: "migration", probability: 0.75 },
  ],
};

export const GAS_CASE_DEPENDENCY = { model: "fullyDependent", commonFactors: [{ name: "source", probability: 0.8 }] };

export const FULL_CYCLE_SETUP = {
  startYear: 2026,
  npvYear: 2026,
  discountRate: 0.08,
  discounting: "endOfYear",
  moneyTerms: "real",
  requiredIrr: 0.12,
};

export const FULL_CYCLE_ASSUMPTIONS = {
  prices: [
    {
      product: "oil",
      unit: "USD/bbl",
      series: [
        { year: 2026, value: 70 },
        { year: 2032, value: 72 },
      ],
    },
    { product: "gas", unit: "USD/Mcf", series: [{ year: 2026, value: 8 }] },
  ],
  fiscal: { type: "royaltyTax", royaltyRate: 0, incomeTaxRate: 0.78 },
  workingInterest: 0.4,
  dryHoleCost: 45,
};

export const SCENARIOS = [
  { scenarioId: "sc-oil", name: "Oil case", probability: 0.7, prospectAnalysisId: "pa-alpha-oil" },
  { scenarioId: "sc-gas", name: "Gas case", probability: 0.3, prospectAnalysisId: "pa-alpha-gas" },
];

export const ALPHA_OUTLINE = {
  type: "Feature",
  geometry: {
    type: "Polygon",
    coordinates: [
      [
        [7.1, 64.1],
        [7.35, 64.1],
        [7.35, 64.22],
        [7.1, 64.22],
        [7.1, 64.1],
      ],
    ],
  },
  properties: { name: "Alpha closure outline, top Rogn Fm" },
};

export const DEMO: DemoItem[] = [
  segment("seg-alpha-rogn", "Alpha Upper Jurassic (Rogn Fm)", "approved", {
    properties: properties("Rogn", 2350),
    riskFactors: riskFactors({ reservoir: 0.8, trap: 0.625 }),
    volumes: { oil: range("MMbbl", 20, 180), gas: range("Bcf", 10, 95), oilEquivalent: range("MMboe", 22, 196) },
    entitlement,
  }),
  segment("seg-alpha-garn", "Alpha Middle Jurassic (Garn Fm)", "approved", {
    properties: properties("Garn", 2610),
    riskFactors: riskFactors({ reservoir: 0.5, trap: 0.8 }),
    volumes: { oil: range("MMbbl", 8, 60), gas: range("Bcf", 5, 40), oilEquivalent: range("MMboe", 9, 67) },
    entitlement,
  }),
  segment("seg-alpha-tilje", "Alpha Lower Jurassic (Tilje Fm)", "test", {
    properties: properties("Tilje", 2890),
    riskFactors: riskFactors({ reservoir: 0.6, trap: 0.5 }),
    volumes: { oil: range("MMbbl", 5, 35), gas: { unit: "Bcf", mean: 12 }, oilEquivalent: range("MMboe", 7, 37) },
    entitlement,
  }),
  prospectAnalysis("pa-alpha-oil", "approved", {
    segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-garn", "seg-alpha-tilje"],
    dependency: OIL_CASE_DEPENDENCY,
    simulation: { trials: 20000, seed: 42 },
    mefs: { value: 15, unit: "MMboe" },
    entitlement: { companyId: "c-nordic", workingInterest: 0.4 },
  }),
  ...LICENSE_VERSIONS.map(license),
  {
    collection: "fullcycleanalyses",
    id: "fc-alpha-mean",
    body: {
      prospectAnalysisId: "pa-alpha-oil",
      name: "Alpha mean case, subsea tie-back",
      resourceCase: "mean",
      setup: FULL_CYCLE_SETUP,
      assumptions: FULL_CYCLE_ASSUMPTIONS,
      production: {
        product: "oil",
        firstYear: 2030,
        wellsPerYear: 4,
        wellRatePerYear: 1.8,
        plateauFraction: 0.13,
        declineStartRemaining: 0.5,
        declineRate: 0.18,
        economicLimit: 0.5,
        maxYears: 30,
        gasOilRatio: 0.2,
        gasUnit: "Bcf",
      },
      costs: {
        capex: [
          { year: 2027, value: 60 },
          { year: 2028, value: 900 },
          { year: 2029, value: 1100 },
          { year: 2031, value: 150 },
        ],
        opexFixed: 60,
        opexPerUnit: 6,
      },
    },
  },
  // The gas-case interpretation of the same closure: two segments, gas-prone, fully dependent.
  segment("seg-alpha-gas-upper", "Alpha gas case, upper closure", "test", {
    riskFactors: riskFactors({ reservoir: 0.7, seal: 0.6 }),
    volumes: { gas: range("Bcf", 60, 520), oilEquivalent: range("MMboe", 10, 90) },
  }),
  segment("seg-alpha-gas-lower", "Alpha gas case, lower closure", "test", {
    riskFactors: riskFactors({ reservoir: 0.5, seal: 0.6 }),
    volumes: { gas: range("Bcf", 30, 260), oilEquivalent: range("MMboe", 5, 45) },
  }),
  prospectAnalysis("pa-alpha-gas", "test", {
    segmentAnalysisIds: ["seg-alpha-gas-upper", "seg-alpha-gas-lower"],
    dependency: GAS_CASE_DEPENDENCY,
    simulation: { trials: 20000, seed: 43 },
  }),
  {
    collection: "multiplescenarioanalyses",
    id: "msa-alpha",
    body: {
      prospectId: "p-alpha",
      name: "Alpha: oil case versus gas case",
      scenarios: SCENARIOS,
      simulation: { trials: 20000, seed: 7 },
      polygon: ALPHA_OUTLINE,
    },
  },
];

/** Loads the demo through any PUT function (HTTP or NATS); returns the statuses in order. */
export async function loadDemo(put: (item: DemoItem) => Promise<number>): Promise<Array<{ item: DemoItem; status: number }>> {
  const out: Array<{ item: DemoItem; status: number }> = [];
  for (const item of DEMO) out.push({ item, status: await put(item) });
  return out;
}
