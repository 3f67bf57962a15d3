/**
 * Answers of the reporting aggregations over the demo data set (`derrick seed`), as a run gave them,
 * shortened for the API document: numbers to four significant digits and long series cut to their
 * first entries. Shown as the examples of their operations (edge/openapi/examples.ts).
 */

/** GET /assessments/v1/licenseaggregation/pl-123 (both versions, the linked prospects' analyses). */
export const LICENSE_AGGREGATION = {
  licenseId: "pl-123",
  name: "PL 123",
  nation: { code: "NO", name: "Norway" },
  versions: [
    {
      versionId: "pl-123-v1",
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
      licensees: [
        { companyId: "c-nordic", companyName: "Nordic Energy AS", interest: 0.4, isOperator: false },
        { companyId: "c-fjord", companyName: "Fjord Petroleum ASA", interest: 0.35, isOperator: true },
        { companyId: "c-polar", companyName: "Polar Resources AS", interest: 0.25, isOperator: false },
      ],
      prospectIds: ["p-alpha"],
      prospects: [
        {
          prospectId: "p-alpha",
          name: "Alpha",
          prospectAnalyses: [
            { prospectAnalysisId: "pa-alpha-gas", status: "test", version: 1, pg: 0.336, pgAll: 0.24, dependencyModel: "fullyDependent" },
            {
              prospectAnalysisId: "pa-alpha-oil",
              status: "approved",
              version: 1,
              pg: 0.474,
              pgAll: 0.036,
              dependencyModel: "commonFactor",
            },
          ],
        },
      ],
    },
    {
      versionId: "pl-123-v2",
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
      licensees: [
        { companyId: "c-nordic", companyName: "Nordic Energy AS", interest: 0.4, isOperator: true },
        { companyId: "c-fjord", companyName: "Fjord Petroleum ASA", interest: 0.35, isOperator: false },
        { companyId: "c-polar", companyName: "Polar Resources AS", interest: 0.25, isOperator: false },
      ],
      prospectIds: ["p-alpha", "p-beta"],
      prospects: [
        {
          prospectId: "p-alpha",
          name: "Alpha",
          prospectAnalyses: [
            { prospectAnalysisId: "pa-alpha-gas", status: "test", version: 1, pg: 0.336, pgAll: 0.24, dependencyModel: "fullyDependent" },
            {
              prospectAnalysisId: "pa-alpha-oil",
              status: "approved",
              version: 1,
              pg: 0.474,
              pgAll: 0.036,
              dependencyModel: "commonFactor",
            },
          ],
        },
        { prospectId: "p-beta", name: null, prospectAnalyses: [] },
      ],
    },
  ],
};

/** GET /assessments/v1/prospectanalysisaggregation/pa-alpha-oil (two of three segments, two exceedance points per product). */
export const PROSPECT_AGGREGATION = {
  prospectAnalysisId: "pa-alpha-oil",
  prospect: { id: "p-alpha", name: "Alpha" },
  status: "approved",
  version: 1,
  licenses: [{ licenseId: "pl-123", name: "PL 123" }],
  simulation: { method: "MonteCarlo", trials: 20000, seed: 42, generator: "xoshiro128** (seeded by splitmix32)" },
  dependency: {
    model: "commonFactor",
    commonFactors: [
      { name: "source", probability: 0.8 },
      { name: "migration", probability: 0.75 },
    ],
  },
  chanceOfSuccess: {
    pgAtLeastOne: 0.474,
    pgAll: 0.036,
    pCommonSuccess: 0.6,
    expectedSuccessfulSegments: 0.72,
    pCommercial: 0.422,
    mefs: { value: 15, unit: "MMboe" },
  },
  resources: {
    basis: "recoverable",
    primaryProduct: "oilEquivalent",
    products: {
      oil: {
        unit: "MMbbl",
        successCase: { p90: 12.13, p50: 52.67, p10: 166.9, mean: 76.65 },
        successCaseGivenCommonSuccess: { mean: 60.55 },
        riskedMean: 36.33,
        riskedExceedance: [
          { volume: 1.112, probability: 0.474 },
          { volume: 4.269, probability: 0.4693 },
        ],
      },
      gas: {
        unit: "Bcf",
        successCase: { p90: 11.23, p50: 29.86, p10: 92.08, mean: 43.2 },
        successCaseGivenCommonSuccess: { mean: 34.13 },
        riskedMean: 20.48,
        riskedExceedance: [
          { volume: 1.006, probability: 0.474 },
          { volume: 3.712, probability: 0.4693 },
        ],
      },
      oilEquivalent: {
        unit: "MMboe",
        successCase: { p90: 14.19, p50: 58.2, p10: 182.2, mean: 84.26 },
        successCaseGivenCommonSuccess: { mean: 66.56 },
        riskedMean: 39.94,
        riskedExceedance: [
          { volume: 1.913, probability: 0.474 },
          { volume: 5.524, probability: 0.4693 },
        ],
      },
    },
  },
  prmsCategory: {
    class: "ProspectiveResources",
    low: "1U",
    best: "2U",
    high: "3U",
    product: "oilEquivalent",
    unit: "MMboe",
    lowValue: 14.19,
    bestValue: 58.2,
    highValue: 182.2,
  },
  entitlement: {
    companyId: "c-nordic",
    workingInterest: 0.4,
    product: "oilEquivalent",
    unit: "MMboe",
    netRiskedMean: 15.97,
    netSuccessMean: 33.7,
  },
  segments: [
    {
      segmentAnalysisId: "seg-alpha-rogn",
      name: "Alpha Upper Jurassic (Rogn Fm)",
      status: "approved",
      pg: 0.3,
      pgConditionalOnCommon: 0.5,
      product: "oilEquivalent",
      unit: "MMboe",
      riskedMean: 28.35,
      successCase: { p90: 22, p50: 65.67, p10: 196, mean: 94.5 },
      products: {
        oil: { unit: "MMbbl", basis: "recoverable", successCase: { p90: 20, p50: 60, p10: 180, mean: 86.64 }, riskedMean: 25.99 },
        gas: { unit: "Bcf", basis: "recoverable", successCase: { p90: 10, p50: 30.82, p10: 95, mean: 45.33 }, riskedMean: 13.6 },
        oilEquivalent: {
          unit: "MMboe",
          basis: "recoverable",
          successCase: { p90: 22, p50: 65.67, p10: 196, mean: 94.5 },
          riskedMean: 28.35,
        },
      },
    },
    {
      segmentAnalysisId: "seg-alpha-garn",
      name: "Alpha Middle Jurassic (Garn Fm)",
      status: "approved",
      pg: 0.24,
      pgConditionalOnCommon: 0.4,
      product: "oilEquivalent",
      unit: "MMboe",
      riskedMean: 8.009,
      successCase: { p90: 9, p50: 24.56, p10: 67, mean: 33.37 },
      products: {
        oil: { unit: "MMbbl", basis: "recoverable", successCase: { p90: 8, p50: 21.91, p10: 60, mean: 29.84 }, riskedMean: 7.162 },
        gas: { unit: "Bcf", basis: "recoverable", successCase: { p90: 5, p50: 14.14, p10: 40, mean: 19.65 }, riskedMean: 4.717 },
        oilEquivalent: {
          unit: "MMboe",
          basis: "recoverable",
          successCase: { p90: 9, p50: 24.56, p10: 67, mean: 33.37 },
          riskedMean: 8.009,
        },
      },
    },
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
      results: {
        recoverable: {
          oil: { unit: "MMbbl", successCase: { p90: 20, p50: 60, p10: 180, mean: 86.64 }, riskedMean: 25.99 },
          gas: { unit: "Bcf", successCase: { p90: 10, p50: 30.82, p10: 95, mean: 45.33 }, riskedMean: 13.6 },
          oilEquivalent: { unit: "MMboe", successCase: { p90: 22, p50: 65.67, p10: 196, mean: 94.5 }, riskedMean: 28.35 },
        },
      },
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

/** GET …/prospectmultiplescenarioanalysisaggregation/msa-alpha (two nodes of the outcome tree, two exceedance points). */
export const SCENARIO_AGGREGATION = {
  multipleScenarioAnalysisId: "msa-alpha",
  prospectId: "p-alpha",
  name: "Alpha: oil case versus gas case",
  setup: {
    scenarios: [
      {
        scenarioId: "sc-oil",
        name: "Oil case",
        probability: 0.7,
        prospectAnalysisId: "pa-alpha-oil",
        segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-garn"],
        dependency: {
          model: "commonFactor",
          commonFactors: [
            { name: "source", probability: 0.8 },
            { name: "migration", probability: 0.75 },
          ],
        },
      },
      {
        scenarioId: "sc-gas",
        name: "Gas case",
        probability: 0.3,
        prospectAnalysisId: "pa-alpha-gas",
        segmentAnalysisIds: ["seg-alpha-gas-upper", "seg-alpha-gas-lower"],
        dependency: { model: "fullyDependent", commonFactors: [{ name: "source", probability: 0.8 }] },
      },
    ],
    simulation: { method: "MonteCarlo", trials: 20000, seed: 7, generator: "xoshiro128** (seeded by splitmix32)" },
  },
  results: {
    chanceOfSuccess: { pgAtLeastOne: 0.4326, expectedSuccessfulSegments: 0.6768 },
    resources: {
      primaryProduct: "oilEquivalent",
      products: {
        oil: {
          unit: "MMbbl",
          successCase: { p90: 0, p50: 34.03, p10: 150.6, mean: 58.79 },
          successCaseGivenCommonSuccess: { mean: 42.39 },
          riskedMean: 25.43,
          riskedExceedance: [
            { volume: 0, probability: 0.4326 },
            { volume: 0, probability: 0.4326 },
          ],
        },
        gas: {
          unit: "Bcf",
          successCase: { p90: 12, p50: 42.24, p10: 308.2, mean: 112.8 },
          successCaseGivenCommonSuccess: { mean: 66.96 },
          riskedMean: 48.79,
          riskedExceedance: [
            { volume: 0.9614, probability: 0.4326 },
            { volume: 3.811, probability: 0.4283 },
          ],
        },
        oilEquivalent: {
          unit: "MMboe",
          successCase: { p90: 14.56, p50: 53.41, p10: 171.7, mean: 78.32 },
          successCaseGivenCommonSuccess: { mean: 54 },
          riskedMean: 33.88,
          riskedExceedance: [
            { volume: 1.832, probability: 0.4326 },
            { volume: 5.61, probability: 0.4283 },
          ],
        },
      },
    },
    byScenario: [
      {
        scenarioId: "sc-oil",
        name: "Oil case",
        probability: 0.7,
        prospectAnalysisId: "pa-alpha-oil",
        dependencyModel: "commonFactor",
        segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-garn"],
        pg: 0.474,
        chanceOfSuccess: { pgAtLeastOne: 0.474, pgAll: 0.036, pCommonSuccess: 0.6, expectedSuccessfulSegments: 0.72 },
        resources: {
          basis: "recoverable",
          products: {
            oil: {
              unit: "MMbbl",
              successCase: { p90: 11.94, p50: 51.64, p10: 170.7, mean: 76.65 },
              successCaseGivenCommonSuccess: { mean: 60.55 },
              riskedMean: 36.33,
              riskedExceedance: [
                { volume: 1.472, probability: 0.474 },
                { volume: 3.993, probability: 0.4693 },
              ],
            },
            gas: {
              unit: "Bcf",
              successCase: { p90: 10.86, p50: 29.45, p10: 94.06, mean: 43.2 },
              successCaseGivenCommonSuccess: { mean: 34.13 },
              riskedMean: 20.48,
              riskedExceedance: [
                { volume: 0.9614, probability: 0.474 },
                { volume: 3.418, probability: 0.4693 },
              ],
            },
            oilEquivalent: {
              unit: "MMboe",
              successCase: { p90: 13.97, p50: 57.17, p10: 186.5, mean: 84.26 },
              successCaseGivenCommonSuccess: { mean: 66.56 },
              riskedMean: 39.94,
              riskedExceedance: [
                { volume: 1.832, probability: 0.474 },
                { volume: 5.227, probability: 0.4693 },
              ],
            },
          },
        },
      },
      {
        scenarioId: "sc-gas",
        name: "Gas case",
        probability: 0.3,
        prospectAnalysisId: "pa-alpha-gas",
        dependencyModel: "fullyDependent",
        segmentAnalysisIds: ["seg-alpha-gas-upper", "seg-alpha-gas-lower"],
        pg: 0.336,
        chanceOfSuccess: { pgAtLeastOne: 0.336, pgAll: 0.24, pCommonSuccess: 0.8, expectedSuccessfulSegments: 0.576 },
        resources: {
          basis: "recoverable",
          products: {
            gas: {
              unit: "Bcf",
              successCase: { p90: 100.3, p50: 267.8, p10: 660.3, mean: 341.9 },
              successCaseGivenCommonSuccess: { mean: 143.6 },
              riskedMean: 114.9,
              riskedExceedance: [
                { volume: 4.843, probability: 0.336 },
                { volume: 39.02, probability: 0.3326 },
              ],
            },
            oilEquivalent: {
              unit: "MMboe",
              successCase: { p90: 16.85, p50: 45.63, p10: 114.4, mean: 58.79 },
              successCaseGivenCommonSuccess: { mean: 24.69 },
              riskedMean: 19.75,
              riskedExceedance: [
                { volume: 0.7724, probability: 0.336 },
                { volume: 6.424, probability: 0.3326 },
              ],
            },
          },
        },
      },
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
    properties: { name: "Alpha closure outline, top Rogn Fm", crs: "EPSG:4326", areaKm2: 162 },
  },
};
