import { describe, expect } from "vitest";
import { type TestDerrick, openBucket } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import { BUCKETS, RESULTS_FORMAT, resultKey } from "../../actors/reporting/store.ts";
import { demoBody, loadDemoOver, prospectAnalysis, put, reportingTest, segment } from "./helpers.ts";

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** G13's explicit flows: -1000 in 2026, then 300 a year for five years (NPV10 137.236, IRR 15.238%), times `share`. */
const g13Flows = (share = 1) => [
  { year: 2026, netCashFlow: -1000 * share },
  ...[1, 2, 3, 4, 5].map((k) => ({ year: 2026 + k, netCashFlow: 300 * share })),
];

/** A full-cycle analysis of explicit cash flows at 10 % from 2026, no taxes, working interest 0.25, dry-hole cost 100. */
const g13Analysis = (name: string, prospectAnalysisId: string, cashFlows: Record<string, unknown>) => ({
  prospectAnalysisId,
  name,
  setup: { startYear: 2026, npvYear: 2026, discountRate: 0.1 },
  assumptions: { prices: [], fiscal: { type: "royaltyTax", royaltyRate: 0, incomeTaxRate: 0 }, workingInterest: 0.25, dryHoleCost: 100 },
  cashFlows,
});

// The 2^16-outcome trees below take ~1 s on an idle machine and over 5 s (the edge's default
// deadline, answered 504) on a busy one: what bounds these tests is their own timeout.
const it = reportingTest({ DERRICK_REQUEST_TIMEOUT: "50s" });

describe("reporting aggregations", () => {
  it.beforeAll(async ({ derrick }) => {
    await loadDemoOver(derrick);
  });

  /** A prospect `<key>-pa` of one segment `<key>-s` (Pg 0.8, 10 MMbbl mean), half of it entitled to `companyId`. */
  const oneSegmentProspect = async (derrick: TestDerrick, key: string, name: string, companyId: string) => {
    await put(derrick, "segmentanalyses", `${key}-s`, {
      name,
      riskFactors: [{ name: "all", probability: 0.8 }],
      volumes: { oil: { unit: "MMbbl", mean: 10 } },
    });
    const entitlement = { companyId, workingInterest: 0.5 };
    await put(derrick, "prospectanalyses", `${key}-pa`, prospectAnalysis(`p-${key}`, name, [`${key}-s`], { entitlement }));
  };
  /** `count` one-trap segments `<key>-s<i>` named `<name> <i>`, each with `shape(i)`'s probability and oil mean; their ids. */
  const putSegments = async (
    derrick: TestDerrick,
    key: string,
    name: string,
    count: number,
    shape: (i: number) => { probability: number; mean: number },
  ) => {
    const ids = Array.from({ length: count }, (_, i) => `${key}-s${i}`);
    for (const [i, id] of ids.entries()) {
      const { probability, mean } = shape(i);
      await put(derrick, "segmentanalyses", id, {
        name: `${name} ${i}`,
        riskFactors: [{ name: "trap", probability }],
        volumes: { oil: { unit: "MMbbl", mean } },
      });
    }
    return ids;
  };
  /** Prospect `pa-<key>` of `ids` under one common factor (charge), and analysis `msa-<key>` of it as its only scenario. */
  const oneScenario = async (derrick: TestDerrick, key: string, name: string, ids: string[], charge: number, trials: number) => {
    await put(derrick, "prospectanalyses", `pa-${key}`, {
      prospect: { id: `p-${key}`, name },
      segmentAnalysisIds: ids,
      dependency: { model: "commonFactor", commonFactors: [{ name: "charge", probability: charge }] },
    });
    await put(derrick, "multiplescenarioanalyses", `msa-${key}`, {
      prospectId: `p-${key}`,
      scenarios: [{ scenarioId: "only", name: "Only", probability: 1, prospectAnalysisId: `pa-${key}` }],
      simulation: { trials, seed: 3 },
    });
  };
  const get = (derrick: TestDerrick, path: string) => derrick.call(`/assessments/v1/${path}`);
  const fullCycle = (derrick: TestDerrick, body: unknown) =>
    derrick.call("/assessments/v1/fullcycleanalysisaggregation", { method: "POST", body: JSON.stringify(body) });

  it("G3 - through the API: Pg_i, risked mean 47.4 under every model, P(≥1) and success-case mean per model", async ({ derrick }) => {
    const ps = [0.5, 0.4, 0.3];
    const means = [100, 50, 30];
    for (const [i, p] of ps.entries())
      await put(derrick, "segmentanalyses", `g3-s${i}`, {
        name: `G3 ${i}`,
        riskFactors: [{ name: "specific", probability: p }],
        volumes: { oil: { unit: "MMbbl", mean: means[i] } },
      });
    const expected = { independent: [0.56376, 84.078], commonFactor: [0.474, 100.0], fullyDependent: [0.3, 158.0] } as const;
    for (const [model, [pAtLeastOne, successMean]] of Object.entries(expected)) {
      await put(derrick, "prospectanalyses", `g3-${model}`, {
        prospect: { id: "p-g3", name: "G3" },
        segmentAnalysisIds: ["g3-s0", "g3-s1", "g3-s2"],
        dependency: { model, commonFactors: [{ name: "charge", probability: 0.6 }] },
      });
      const body = await json(await get(derrick, `prospectanalysisaggregation/g3-${model}`));
      expect(body.segments.map((s: { pg: number }) => s.pg)).toEqual([
        expect.closeTo(0.3, 12),
        expect.closeTo(0.24, 12),
        expect.closeTo(0.18, 12),
      ]);
      expect(body.chanceOfSuccess.pgAtLeastOne).toBeCloseTo(pAtLeastOne, 10);
      expect(body.chanceOfSuccess.pCommonSuccess).toBeCloseTo(0.6, 12);
      expect(body.chanceOfSuccess.expectedSuccessfulSegments).toBeCloseTo(0.72, 12);
      expect(body.resources.products.oil.riskedMean).toBeCloseTo(47.4, 10);
      expect(body.resources.products.oil.successCase.mean).toBeCloseTo(successMean, 2);
      expect(body.resources.products.oil.successCaseGivenCommonSuccess.mean).toBeCloseTo(50 + 20 + 9, 10);
    }
  });

  it("prospect aggregation - the demo prospect: G4 segment figures, p90 ≤ p50 ≤ p10, PRMS labels, entitlement, commercial chance", async ({
    derrick,
  }) => {
    const body = await json(await get(derrick, "prospectanalysisaggregation/pa-alpha-oil"));
    expect(body).toMatchObject({
      prospectAnalysisId: "pa-alpha-oil",
      prospect: { id: "p-alpha", name: "Alpha" },
      licenses: [{ licenseId: "pl-123", name: "PL 123" }],
      simulation: { trials: 20000, seed: 42 },
    });
    const rogn = body.segments[0].products.oil.successCase;
    expect(rogn.p50).toBeCloseTo(60, 9);
    expect(rogn.mean).toBeCloseTo(86.642, 3);
    expect(body.segments[0].pgConditionalOnCommon).toBeCloseTo(0.5, 12);
    for (const product of Object.values(body.resources.products) as Array<{ successCase: { p90: number; p50: number; p10: number } }>) {
      expect(product.successCase.p90).toBeLessThanOrEqual(product.successCase.p50);
      expect(product.successCase.p50).toBeLessThanOrEqual(product.successCase.p10);
    }
    expect(body.prmsCategory).toMatchObject({ class: "ProspectiveResources", low: "1U", best: "2U", high: "3U" });
    const curve = body.resources.products.oilEquivalent.riskedExceedance;
    expect(Math.abs(curve[0].probability - 0.474) / 0.474).toBeLessThan(0.02);
    expect(body.entitlement.netRiskedMean).toBeCloseTo(0.4 * body.resources.products.oilEquivalent.riskedMean, 10);
    expect(body.chanceOfSuccess.pCommercial).toBeGreaterThan(0);
    expect(body.chanceOfSuccess.pCommercial).toBeLessThanOrEqual(body.chanceOfSuccess.pgAtLeastOne);
  });

  it("caching - a repeated GET is served from KV; the same seed recomputes the same numbers after an invalidation", async ({ derrick }) => {
    const first = await get(derrick, "prospectanalysisaggregation/pa-alpha-gas");
    const firstBody = await first.text();
    const again = await get(derrick, "prospectanalysisaggregation/pa-alpha-gas");
    expect(again.headers.get("x-derrick-cache")).toBe("hit");
    // A hit is the stored bytes sent on unparsed: same body, same media type as the miss.
    expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(await again.text()).toBe(firstBody);
    // Re-upserting an input (same content) invalidates; recomputation gives identical numbers.
    await put(derrick, "segmentanalyses", "seg-alpha-gas-lower", demoBody("seg-alpha-gas-lower"));
    const recomputed = await get(derrick, "prospectanalysisaggregation/pa-alpha-gas");
    expect(recomputed.headers.get("x-derrick-cache")).toBe("miss");
    expect(await recomputed.text()).toBe(firstBody);
  });

  it("caching - a result cached by a release with other formulas (an older key format) is not served: the GET computes", async ({
    derrick,
    nc,
  }) => {
    const cache = await openBucket(nc, BUCKETS.cache);
    // What the release before RESULTS_FORMAT 2 left for this aggregation.
    await cache.put("r.opendes.prospect.pa-alpha-oil", JSON.stringify({ stale: true }));
    const res = await get(derrick, "prospectanalysisaggregation/pa-alpha-oil");
    expect(res.status).toBe(200);
    expect(await json(res)).not.toHaveProperty("stale");
    expect(resultKey("opendes", "prospect", "pa-alpha-oil")).toBe(`r${RESULTS_FORMAT}.opendes.prospect.pa-alpha-oil`);
  });

  it("caching - an upsert invalidates exactly the aggregations that read it", async ({ derrick }) => {
    const paths = [
      "prospectanalysisaggregation/pa-alpha-oil",
      "prospectanalysisaggregation/pa-alpha-oil/details",
      "prospectanalysisaggregation/pa-alpha-gas",
      "licenseaggregation/pl-123",
      "prospectmultiplescenarioanalysisaggregation/msa-alpha",
    ];
    const states = async () => {
      const out: Record<string, string | null> = {};
      for (const path of paths) out[path] = (await get(derrick, path)).headers.get("x-derrick-cache");
      return out;
    };
    const warm = async () => {
      for (const path of paths) await get(derrick, path);
      return states();
    };
    /** Every path a hit but the `missed` ones. */
    const missesOnly = (...missed: string[]) => Object.fromEntries(paths.map((path) => [path, missed.includes(path) ? "miss" : "hit"]));
    expect(await warm()).toEqual(missesOnly());
    // A segment of the oil case only: the oil prospect, its details, the license (its Pg) and the scenarios.
    await put(derrick, "segmentanalyses", "seg-alpha-tilje", demoBody("seg-alpha-tilje"));
    expect(await states()).toEqual(
      missesOnly(
        "prospectanalysisaggregation/pa-alpha-oil",
        "prospectanalysisaggregation/pa-alpha-oil/details",
        "licenseaggregation/pl-123",
        "prospectmultiplescenarioanalysisaggregation/msa-alpha",
      ),
    );
    // The multiple scenario analysis itself: only its own aggregation.
    await warm();
    await put(derrick, "multiplescenarioanalyses", "msa-alpha", demoBody("msa-alpha"));
    expect(await states()).toEqual(missesOnly("prospectmultiplescenarioanalysisaggregation/msa-alpha"));
  });

  it("license aggregation - every version with blocks, nation, licensees and the linked prospects' analyses; a new analysis of a linked prospect appears", async ({
    derrick,
  }) => {
    const body = await json(await get(derrick, "licenseaggregation/pl-123"));
    expect(body).toMatchObject({ licenseId: "pl-123", name: "PL 123", nation: { code: "NO", name: "Norway" } });
    expect(body.versions).toHaveLength(2);
    const [v1, v2] = body.versions;
    expect(v1).toMatchObject({ versionId: "pl-123-v1", versionNumber: 1, blocks: [{ blockId: "6407/9" }, { blockId: "6407/12" }] });
    expect(v2.licensees.find((l: { isOperator: boolean }) => l.isOperator).companyId).toBe("c-nordic");
    const alpha = v2.prospects.find((p: { prospectId: string }) => p.prospectId === "p-alpha");
    expect(alpha.name).toBe("Alpha");
    const oil = alpha.prospectAnalyses.find((a: { prospectAnalysisId: string }) => a.prospectAnalysisId === "pa-alpha-oil");
    expect(oil.pg).toBeCloseTo(0.474, 10);
    expect(v2.prospects.find((p: { prospectId: string }) => p.prospectId === "p-beta").prospectAnalyses).toEqual([]);

    await put(derrick, "segmentanalyses", "seg-beta-1", segment("Beta 1", 0.25, 10, 90, { prospectId: "p-beta" }));
    await put(derrick, "prospectanalyses", "pa-beta-1", prospectAnalysis("p-beta", "Beta", ["seg-beta-1"]));
    const after = await get(derrick, "licenseaggregation/pl-123");
    expect(after.headers.get("x-derrick-cache")).toBe("miss");
    const beta = (await json(after)).versions[1].prospects.find((p: { prospectId: string }) => p.prospectId === "p-beta");
    expect(beta).toMatchObject({ name: "Beta", prospectAnalyses: [{ prospectAnalysisId: "pa-beta-1", pg: 0.25 }] });
    expect((await get(derrick, "licenseaggregation/pl-missing")).status).toBe(404);
  });

  it("details - the enrolled segments with name, properties, chance of success, volumes and entitlement", async ({ derrick }) => {
    const body = await json(await get(derrick, "prospectanalysisaggregation/pa-alpha-oil/details"));
    expect(body.segments.map((s: { name: string }) => s.name)).toEqual([
      "Alpha Upper Jurassic (Rogn Fm)",
      "Alpha Middle Jurassic (Garn Fm)",
      "Alpha Lower Jurassic (Tilje Fm)",
    ]);
    const rogn = body.segments[0];
    expect(rogn.properties).toContainEqual({ name: "Water depth", type: "float", value: 350, unit: "m" });
    expect(rogn.pg).toBeCloseTo(0.3, 12);
    expect(rogn.riskFactors.filter((f: { shared: boolean }) => f.shared).map((f: { name: string }) => f.name)).toEqual([
      "source",
      "migration",
    ]);
    expect(rogn.results.recoverable.oil.successCase).toMatchObject({ p90: 20, p10: 180 });
    expect(sum(rogn.entitlement.map((e: { share: number }) => e.share))).toBeCloseTo(1, 12);
    expect(rogn.entitlement[0].netRiskedMean).toBeCloseTo(0.4 * rogn.results.recoverable.oilEquivalent.riskedMean, 10);
    expect((await get(derrick, "prospectanalysisaggregation/pa-missing/details")).status).toBe(404);
  });

  it("G13 and G9 - explicit cash flows through the API: NPV10 137.236, IRR 15.238%, payout, EMV and break-even Pg at each level", async ({
    derrick,
  }) => {
    await oneSegmentProspect(derrick, "g13", "G13", "c-g13");
    const fc = g13Analysis("G13", "g13-pa", { project: g13Flows(), contractor: g13Flows() });
    expect((await put(derrick, "fullcycleanalyses", "g13-fc", fc)).status).toBe(201);
    const res = await fullCycle(derrick, { prospectAnalysisId: "g13-pa" });
    expect(res.status).toBe(200);
    const [analysis] = (await json(res)).fullCycleAnalyses;
    const { project, contractor, workingInterest } = analysis.indicators;
    expect(project.npv).toBeCloseTo(137.236, 3);
    expect(project.irr).toBeCloseTo(0.15238, 5);
    expect(project.payoutYear).toBe(2030);
    expect(project.emv).toBeCloseTo(0.8 * project.npv - 0.2 * 100, 9);
    expect(project.breakevenPg).toBeCloseTo(100 / (project.npv + 100), 12);
    expect(contractor.npv).toBeCloseTo(137.236, 3);
    // Working interest derived from the contractor's flows: WI × NPV, dry-hole cost × WI; IRR unchanged.
    expect(workingInterest.npv).toBeCloseTo(0.25 * 137.236, 3);
    expect(workingInterest.irr).toBeCloseTo(0.15238, 5);
    expect(workingInterest.emv).toBeCloseTo(0.8 * 0.25 * project.npv - 0.2 * 25, 9);
    // Levels filter, and a company's interest from the prospect's entitlement.
    const filtered = (
      await json(await fullCycle(derrick, { prospectAnalysisId: "g13-pa", levels: ["workingInterest"], companyId: "c-g13" }))
    ).fullCycleAnalyses[0];
    expect(Object.keys(filtered.indicators)).toEqual(["workingInterest"]);
    expect(filtered.indicators.workingInterest.npv).toBeCloseTo(0.5 * 137.236, 3);
  });

  it("full cycle - explicit working-interest flows answer for the company asked for: its interest, not the analysis's", async ({
    derrick,
  }) => {
    await oneSegmentProspect(derrick, "g13w", "G13w", "c-half");
    // The analysis's own working interest is 0.25: its explicit working-interest flows are 0.25 × the contractor's.
    await put(
      derrick,
      "fullcycleanalyses",
      "g13w-both",
      g13Analysis("G13w", "g13w-pa", { contractor: g13Flows(), workingInterest: g13Flows(0.25) }),
    );
    await put(derrick, "fullcycleanalyses", "g13w-only", g13Analysis("G13w", "g13w-pa", { workingInterest: g13Flows(0.25) }));
    const own = (await json(await fullCycle(derrick, { prospectAnalysisId: "g13w-pa", levels: ["workingInterest"] }))).fullCycleAnalyses;
    for (const fc of own) expect(fc.indicators.workingInterest.npv).toBeCloseTo(0.25 * 137.236, 3);
    const half = (await json(await fullCycle(derrick, { prospectAnalysisId: "g13w-pa", levels: ["workingInterest"], companyId: "c-half" })))
      .fullCycleAnalyses;
    expect(half.map((fc: { fullCycleAnalysisId: string }) => fc.fullCycleAnalysisId)).toEqual(["g13w-both", "g13w-only"]);
    for (const fc of half) {
      expect(fc.assumptions.workingInterest).toBe(0.5);
      expect(fc.indicators.workingInterest.npv).toBeCloseTo(0.5 * 137.236, 3);
      expect(fc.indicators.workingInterest.emv).toBeCloseTo(0.8 * 0.5 * 137.236 - 0.2 * 50, 3);
      expect(fc.cashFlows.workingInterest[0].netCashFlow).toBeCloseTo(-500, 9);
    }
  });

  it("full cycle - the demo's production model: flows sum to the mean success case, cash flows and indicators at every level, company interest from the license", async ({
    derrick,
  }) => {
    const res = await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil", companyId: "c-fjord", currency: "USD" });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({ prospectAnalysisId: "pa-alpha-oil", companyId: "c-fjord", workingInterest: 0.35, currency: "USD" });
    const [fc] = body.fullCycleAnalyses;
    const oilMean = (await json(await get(derrick, "prospectanalysisaggregation/pa-alpha-oil"))).resources.products.oil.successCase.mean;
    expect(fc.cumulativeProduction.oil).toBeCloseTo(oilMean, 9);
    expect(sum(fc.hydrocarbonFlows.map((f: { oil: number }) => f.oil))).toBeCloseTo(oilMean, 9);
    expect(fc.hydrocarbonFlows[0]).toMatchObject({ year: 2030, unitOil: "MMbbl", unitGas: "Bcf" });
    for (const level of ["project", "contractor", "workingInterest"]) {
      expect(fc.cashFlows[level].length).toBeGreaterThan(5);
      expect(typeof fc.indicators[level].npv).toBe("number");
    }
    const wiRow = fc.cashFlows.workingInterest[5];
    const contractorRow = fc.cashFlows.contractor[5];
    expect(wiRow.netCashFlow).toBeCloseTo(0.35 * contractorRow.netCashFlow, 9);
    expect(fc.indicators.contractor.npv).toBeLessThan(fc.indicators.project.npv);
    expect(fc.indicators.contractor.governmentTake).toBeGreaterThan(0);

    expect((await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil", companyId: "c-nobody" })).status).toBe(400);
    expect((await fullCycle(derrick, { prospectAnalysisId: "pa-missing" })).status).toBe(404);
    const bad = await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil", levels: ["government"] });
    expect(bad.status).toBe(400);
    expect((await json(bad)).errors[0].pointer).toMatch(/^\/body\/levels/);
    expect((await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil", extra: 1 })).status).toBe(400);
  });

  it("caching - a full cycle result is cached once for the levels in any order and any currency; the currency is echoed", async ({
    derrick,
  }) => {
    const ask = (levels: string[], currency?: string) =>
      fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil", levels, companyId: "c-fjord", ...(currency ? { currency } : {}) });
    const first = await ask(["workingInterest", "project"], "USD");
    expect(first.status).toBe(200);
    const firstText = await first.text();
    expect(JSON.parse(firstText)).toMatchObject({ currency: "USD", levels: ["project", "workingInterest"] });
    // Another order, another currency: the same cached result, its own currency echoed, nothing else changed.
    const other = await ask(["project", "workingInterest"], "NOK");
    expect(other.headers.get("x-derrick-cache")).toBe("hit");
    expect(await other.text()).toBe(firstText.replace('"currency":"USD"', '"currency":"NOK"'));
    const without = await ask(["workingInterest", "project"]);
    expect(without.headers.get("x-derrick-cache")).toBe("hit");
    expect(await without.text()).toBe(firstText.replace('"currency":"USD",', ""));
    // Recomputed after an invalidation, the miss is byte-identical to the next hit.
    await put(derrick, "fullcycleanalyses", "fc-alpha-mean", demoBody("fc-alpha-mean"));
    const recomputed = await ask(["project", "workingInterest"], "NOK");
    expect(recomputed.headers.get("x-derrick-cache")).toBe("miss");
    const hit = await ask(["workingInterest", "project"], "NOK");
    expect(hit.headers.get("x-derrick-cache")).toBe("hit");
    expect(await hit.text()).toBe(await recomputed.text());
  });

  it("full cycle - break-even price: a copy of the analysis at that flat oil price has NPV 0 at that level", async ({ derrick }) => {
    const [demo] = (await json(await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil" }))).fullCycleAnalyses;
    const breakeven = demo.indicators.contractor.breakevenPrice as number;
    expect(breakeven).toBeGreaterThan(0);
    // Pre-tax flows need a lower price than after-tax ones.
    expect(demo.indicators.project.breakevenPrice).toBeLessThan(breakeven);
    const body = demoBody("fc-alpha-mean");
    const oil = body.assumptions.prices.find((p: { product: string }) => p.product === "oil");
    body.assumptions.prices = body.assumptions.prices.map((p: { product: string }) =>
      p === oil ? { ...oil, series: [{ year: body.setup.startYear, value: breakeven }] } : p,
    );
    expect((await put(derrick, "fullcycleanalyses", "fc-at-breakeven", body)).status).toBe(201);
    const all = (await json(await fullCycle(derrick, { prospectAnalysisId: "pa-alpha-oil" }))).fullCycleAnalyses;
    const flat = all.find((f: { fullCycleAnalysisId: string }) => f.fullCycleAnalysisId === "fc-at-breakeven");
    expect(Math.abs(flat.indicators.contractor.npv)).toBeLessThan(1e-6 * Math.abs(demo.indicators.contractor.npv) + 1e-6);
    expect(flat.indicators.contractor.breakevenPrice).toBeCloseTo(breakeven, 6);
    await derrick.call("/assessments/v1/fullcycleanalyses/fc-at-breakeven", { as: "admin", method: "DELETE" });
  });

  it("multiple scenarios - set-up, results per scenario, the outcome tree (Σ joint = 1, Σ joint × volume = risked mean) and the polygon", async ({
    derrick,
  }) => {
    const res = await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-alpha");
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body.setup.scenarios.map((s: { scenarioId: string }) => s.scenarioId)).toEqual(["sc-oil", "sc-gas"]);
    expect(body.results.byScenario.map((s: { pg: number }) => s.pg)).toEqual([expect.closeTo(0.474, 10), expect.closeTo(0.336, 10)]);
    expect(body.results.chanceOfSuccess.pgAtLeastOne).toBeCloseTo(0.7 * 0.474 + 0.3 * 0.336, 10);
    const tree = body.outcomeTree;
    expect(tree.method).toBe("exact");
    const terminal = tree.nodes.filter((n: { kind: string }) => n.kind === "outcome" || n.kind === "commonFailure");
    expect(sum(terminal.map((n: { jointProbability: number }) => n.jointProbability))).toBeCloseTo(1, 12);
    const risked = body.results.resources.products.oilEquivalent.riskedMean;
    expect(
      sum(terminal.map((n: { jointProbability: number; volume: { mean: number } }) => n.jointProbability * n.volume.mean)),
    ).toBeCloseTo(risked, 9);
    // Oil case: common failure + common success with 2^3 combinations; gas case fully dependent: 3 nested outcomes.
    expect(
      terminal.filter((n: { segmentStates?: Record<string, boolean> }) => n.segmentStates && "seg-alpha-rogn" in n.segmentStates),
    ).toHaveLength(8);
    expect(
      terminal.filter((n: { segmentStates?: Record<string, boolean> }) => n.segmentStates && "seg-alpha-gas-upper" in n.segmentStates),
    ).toHaveLength(3);
    expect(tree.nodes.every((n: { jointProbability: number }) => n.jointProbability > 0)).toBe(true);
    expect(body.polygon.type).toBe("Feature");
    expect(body.polygon.bbox).toEqual([7.1, 64.1, 7.35, 64.22]);
    expect(body.polygon.properties.areaKm2).toBeGreaterThan(160); // 0.25° × 0.12° at 64.16°N ≈ 12.13 km × 13.36 km
    expect(body.polygon.properties.areaKm2).toBeLessThan(164);
    expect(body.polygon.properties.name).toBe("Alpha closure outline, top Rogn Fm");
  });

  it("multiple scenarios - beyond 16 segments the outcome tree is sampled; branches with zero probability are pruned", async ({
    derrick,
  }) => {
    const ids = await putSegments(derrick, "big", "Big", 17, (i) => ({ probability: i === 0 ? 1 : 0.1, mean: 1 + i }));
    await oneScenario(derrick, "big", "Big", ids, 1, 2000);
    const body = await json(await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-big"));
    expect(body.outcomeTree.method).toBe("MonteCarlo");
    const outcomes = body.outcomeTree.nodes.filter((n: { kind: string }) => n.kind === "outcome");
    expect(sum(outcomes.map((n: { jointProbability: number }) => n.jointProbability))).toBeCloseTo(1, 12);
    expect(body.outcomeTree.nodes.some((n: { kind: string }) => n.kind === "commonFailure")).toBe(false);
    expect(outcomes.every((n: { segmentStates: Record<string, boolean> }) => n.segmentStates["big-s0"] === true)).toBe(true);
    expect(body.polygon).toBeNull();
  });

  it("limits - a result larger than the NATS payload limit is answered (uncached), not a 500: 16 segments give 2^16 outcomes", async ({
    derrick,
  }) => {
    // ~65,000 outcome nodes, ~28 MB: the KV put of the cache entry exceeded max_payload and failed the GET.
    const ids = await putSegments(derrick, "wide", "Wide", 16, (i) => ({ probability: 0.5, mean: 1 + i }));
    await oneScenario(derrick, "wide", "Wide", ids, 0.5, 1000);
    for (const expected of ["miss", "miss"]) {
      const res = await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-wide");
      expect(res.status).toBe(200);
      expect(res.headers.get("x-derrick-cache")).toBe(expected);
      const body = await json(res);
      const outcomes = body.outcomeTree.nodes.filter((n: { kind: string }) => n.kind === "outcome");
      expect(outcomes).toHaveLength(2 ** 16);
      expect(sum(outcomes.map((n: { jointProbability: number }) => n.jointProbability)) + 0.5).toBeCloseTo(1, 9);
    }
    // An ordinary result is still cached.
    await get(derrick, "prospectanalysisaggregation/pa-wide");
    expect((await get(derrick, "prospectanalysisaggregation/pa-wide")).headers.get("x-derrick-cache")).toBe("hit");
  }, 60_000);

  it("limits - the outcome tree has at most 2^16 outcomes in all: two 16-segment scenarios fold their least likely outcomes, invariants kept", async ({
    derrick,
  }) => {
    const ids = await putSegments(derrick, "twin", "Twin", 16, (i) => ({ probability: 0.3 + i / 40, mean: 1 + i }));
    for (const model of ["commonFactor", "independent"])
      await put(derrick, "prospectanalyses", `pa-twin-${model}`, {
        prospect: { id: "p-twin", name: "Twin" },
        segmentAnalysisIds: ids,
        dependency: { model, commonFactors: [{ name: "charge", probability: 0.8 }] },
      });
    await put(derrick, "multiplescenarioanalyses", "msa-twin", {
      prospectId: "p-twin",
      scenarios: [
        { scenarioId: "a", name: "A", probability: 0.6, prospectAnalysisId: "pa-twin-commonFactor" },
        { scenarioId: "b", name: "B", probability: 0.4, prospectAnalysisId: "pa-twin-independent" },
      ],
      simulation: { trials: 1000, seed: 3 },
    });
    const res = await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-twin");
    expect(res.status).toBe(200);
    const body = await json(res);
    const nodes = body.outcomeTree.nodes as Array<{ kind: string; jointProbability: number; outcomes?: number; volume?: { mean: number } }>;
    const outcomes = nodes.filter((n) => n.kind === "outcome" || n.kind === "otherOutcomes");
    expect(outcomes.length).toBeLessThanOrEqual(2 ** 16);
    const folded = nodes.filter((n) => n.kind === "otherOutcomes");
    expect(folded).toHaveLength(2);
    // Every one of the 2 × 2^16 outcomes is either a node or counted in a fold.
    expect(sum(outcomes.map((n) => n.outcomes ?? 1))).toBe(2 * 2 ** 16);
    const terminal = nodes.filter((n) => n.kind === "outcome" || n.kind === "otherOutcomes" || n.kind === "commonFailure");
    expect(sum(terminal.map((n) => n.jointProbability))).toBeCloseTo(1, 9);
    expect(sum(terminal.map((n) => n.jointProbability * (n.volume?.mean ?? 0)))).toBeCloseTo(
      body.results.resources.products.oil.riskedMean,
      6,
    );
  }, 60_000);

  it("limits - a multiple scenario analysis takes at most 64,000,000 segment-trials: more is 400 on write naming the trials, and 409 when an enrolled analysis grew past it (before anything is computed)", async ({
    derrick,
  }) => {
    const ids = await putSegments(derrick, "work", "Work", 17, () => ({ probability: 0.5, mean: 10 }));
    await put(derrick, "prospectanalyses", "pa-work", prospectAnalysis("p-work", "Work", ids.slice(0, 16)));
    const scenarios = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ scenarioId: `w${i}`, name: `W${i}`, probability: 1 / n, prospectAnalysisId: "pa-work" }));
    const analysis = (id: string, count: number, trials: number) =>
      put(derrick, "multiplescenarioanalyses", id, { prospectId: "p-work", scenarios: scenarios(count), simulation: { trials, seed: 1 } });
    // 4 scenarios × 16 segments × 1,000,000 trials: exactly the budget.
    expect((await analysis("msa-work", 4, 1_000_000)).status).toBe(201);
    const over = await analysis("msa-over", 5, 1_000_000);
    expect(over.status).toBe(400);
    expect((await json(over)).errors).toEqual([
      { pointer: "/body/simulation/trials", message: expect.stringContaining("at most 800,000 trials") },
    ]);
    expect((await analysis("msa-over", 5, 800_000)).status).toBe(201);
    // The enrolled analysis gains a segment: 4 × 17 × 1,000,000 is past the budget.
    expect((await put(derrick, "prospectanalyses", "pa-work", prospectAnalysis("p-work", "Work", ids))).status).toBe(200);
    const grown = await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-work");
    expect(grown.status).toBe(409);
    expect((await json(grown)).errors).toEqual([
      { pointer: "/simulation/trials", message: expect.stringContaining("at most 941,176 trials") },
    ]);
  });

  it("references - an aggregation whose inputs were deleted answers 409 (segments) or 404 (the analysis itself); the license view lists what is missing", async ({
    derrick,
  }) => {
    await put(derrick, "segmentanalyses", "gone-s", segment("Gone", 0.5, 10, 90));
    await put(derrick, "prospectanalyses", "pa-gone", prospectAnalysis("p-gone", "Gone", ["gone-s"]));
    expect((await get(derrick, "prospectanalysisaggregation/pa-gone")).status).toBe(200);
    expect((await derrick.call("/assessments/v1/segmentanalyses/gone-s", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await get(derrick, "prospectanalysisaggregation/pa-gone")).status).toBe(409);
    // A license linking the prospect still lists the analysis, with no Pg and what is missing.
    const license = demoBody("pl-123", 1);
    license.versions[0].prospectIds = ["p-gone"];
    expect((await put(derrick, "licenses", "pl-gone", license)).status).toBe(201);
    const listed = (await json(await get(derrick, "licenseaggregation/pl-gone"))).versions[0].prospects[0];
    expect(listed).toMatchObject({
      prospectId: "p-gone",
      name: "Gone",
      prospectAnalyses: [{ prospectAnalysisId: "pa-gone", pg: null, missingSegmentAnalysisIds: ["gone-s"] }],
    });
    expect((await derrick.call("/assessments/v1/prospectanalyses/pa-gone", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await get(derrick, "prospectanalysisaggregation/pa-gone")).status).toBe(404);
    expect((await json(await get(derrick, "licenseaggregation/pl-gone"))).versions[0].prospects[0].prospectAnalyses).toEqual([]);
    expect((await get(derrick, "prospectmultiplescenarioanalysisaggregation/msa-missing")).status).toBe(404);
  });
});
