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

export const DEMO: DemoItem[] = [
  {
    collection: "segmentanalyses",
    id: "seg-alpha-rogn",
    body: {
      name: "Alpha Upper Jurassic (Rogn Fm)",
      prospectId: "p-alpha",
      status: "approved",
      properties: properties("Rogn", 2350),
      riskFactors: [
        { name: "reservoir", probability: 0.8 },
        { name: "trap", probability: 0.625 },
      ],
      volumes: {
        oil: { unit: "MMbbl", p90: 20, p10: 180 },
        gas: { unit: "Bcf", p90: 10, p10: 95 },
        oilEquivalent: { unit: "MMboe", p90: 22, p10: 196 },
      },
      entitlement,
    },
  },
  {
    collection: "segmentanalyses",
    id: "seg-alpha-garn",
    body: {
      name: "Alpha Middle Jurassic (Garn Fm)",
      prospectId: "p-alpha",
      status: "approved",
      properties: properties("Garn", 2610),
      riskFactors: [
        { name: "reservoir", probability: 0.5 },
        { name: "trap", probability: 0.8 },
      ],
      volumes: {
        oil: { unit: "MMbbl", p90: 8, p10: 60 },
        gas: { unit: "Bcf", p90: 5, p10: 40 },
        oilEquivalent: { unit: "MMboe", p90: 9, p10: 67 },
      },
      entitlement,
    },
  },
  {
    collection: "segmentanalyses",
    id: "seg-alpha-tilje",
    body: {
      name: "Alpha Lower Jurassic (Tilje Fm)",
      prospectId: "p-alpha",
      status: "test",
      properties: properties("Tilje", 2890),
      riskFactors: [
        { name: "reservoir", probability: 0.6 },
        { name: "trap", probability: 0.5 },
      ],
      volumes: {
        oil: { unit: "MMbbl", p90: 5, p10: 35 },
        gas: { unit: "Bcf", mean: 12 },
        oilEquivalent: { unit: "MMboe", p90: 7, p10: 37 },
      },
      entitlement,
    },
  },
  {
    collection: "prospectanalyses",
    id: "pa-alpha-oil",
    body: {
      prospect: { id: "p-alpha", name: "Alpha" },
      status: "approved",
      licenseIds: ["pl-123"],
      segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-garn", "seg-alpha-tilje"],
      dependency: {
        model: "commonFactor",
        commonFactors: [
          { name: "source", probability: 0.8 },
          { name: "migration", probability: 0.75 },
        ],
      },
      simulation: { trials: 20000, seed: 42 },
      mefs: { value: 15, unit: "MMboe" },
      entitlement: { companyId: "c-nordic", workingInterest: 0.4 },
    },
  },
  // The license as first awarded, then its second version (an area relinquishment and a new operator):
  // two upserts, and the license keeps both versions.
  {
    collection: "licenses",
    id: "pl-123",
    body: {
      name: "PL 123",
      nation: { code: "NO", name: "Norway" },
      versions: [
        {
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
        },
      ],
    },
  },
  {
    collection: "licenses",
    id: "pl-123",
    body: {
      name: "PL 123",
      nation: { code: "NO", name: "Norway" },
      versions: [
        {
          versionNumber: 2,
          status: "approved",
          validFrom: "2023-01-01",
          validTo: null,
          dateGranted: "2019-02-05",
          dateExpires: "2029-02-05",
          phase: "INITIAL",
          licenseStatus: "ACTIVE",
          licensingRound: "APA 2018",
          areaKm2: { original: 812.4, current: 640.1 },
          blocks: [{ blockId: "6407/9", quadrant: "6407", partial: true }],
          licensees: licensees("c-nordic"),
          prospectIds: ["p-alpha", "p-beta"],
        },
      ],
    },
  },
  {
    collection: "fullcycleanalyses",
    id: "fc-alpha-mean",
    body: {
      prospectAnalysisId: "pa-alpha-oil",
      name: "Alpha mean case, subsea tie-back",
      resourceCase: "mean",
      setup: { startYear: 2026, npvYear: 2026, discountRate: 0.08, discounting: "endOfYear", moneyTerms: "real", requiredIrr: 0.12 },
      assumptions: {
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
      },
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
  {
    collection: "segmentanalyses",
    id: "seg-alpha-gas-upper",
    body: {
      name: "Alpha gas case, upper closure",
      prospectId: "p-alpha",
      status: "test",
      riskFactors: [
        { name: "reservoir", probability: 0.7 },
        { name: "seal", probability: 0.6 },
      ],
      volumes: { gas: { unit: "Bcf", p90: 60, p10: 520 }, oilEquivalent: { unit: "MMboe", p90: 10, p10: 90 } },
    },
  },
  {
    collection: "segmentanalyses",
    id: "seg-alpha-gas-lower",
    body: {
      name: "Alpha gas case, lower closure",
      prospectId: "p-alpha",
      status: "test",
      riskFactors: [
        { name: "reservoir", probability: 0.5 },
        { name: "seal", probability: 0.6 },
      ],
      volumes: { gas: { unit: "Bcf", p90: 30, p10: 260 }, oilEquivalent: { unit: "MMboe", p90: 5, p10: 45 } },
    },
  },
  {
    collection: "prospectanalyses",
    id: "pa-alpha-gas",
    body: {
      prospect: { id: "p-alpha", name: "Alpha" },
      status: "test",
      licenseIds: ["pl-123"],
      segmentAnalysisIds: ["seg-alpha-gas-upper", "seg-alpha-gas-lower"],
      dependency: { model: "fullyDependent", commonFactors: [{ name: "source", probability: 0.8 }] },
      simulation: { trials: 20000, seed: 43 },
    },
  },
  {
    collection: "multiplescenarioanalyses",
    id: "msa-alpha",
    body: {
      prospectId: "p-alpha",
      name: "Alpha: oil case versus gas case",
      scenarios: [
        { scenarioId: "sc-oil", name: "Oil case", probability: 0.7, prospectAnalysisId: "pa-alpha-oil" },
        { scenarioId: "sc-gas", name: "Gas case", probability: 0.3, prospectAnalysisId: "pa-alpha-gas" },
      ],
      simulation: { trials: 20000, seed: 7 },
      polygon: {
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
      },
    },
  },
];

/** Loads the demo through any PUT function (HTTP or NATS); returns the statuses in order. */
export async function loadDemo(put: (item: DemoItem) => Promise<number>): Promise<Array<{ item: DemoItem; status: number }>> {
  const out: Array<{ item: DemoItem; status: number }> = [];
  for (const item of DEMO) out.push({ item, status: await put(item) });
  return out;
}
