import { describe, expect } from "vitest";
import type { TestDerrick } from "../harness/index.ts";
import { expectProblem, json } from "../harness/json.ts";
import { demoBody, loadDemoOver, prospectAnalysis, put, reportingTest, segment } from "./helpers.ts";
import { assessmentStore, openStores } from "../../actors/reporting/store.ts";
import { validateEntity } from "../../actors/reporting/validate.ts";
import type { Problem } from "../../subjects/errors.ts";

const it = reportingTest();

/** PUT, expect 400 and the pointer among the named fields. */
async function rejects(derrick: TestDerrick, collection: string, id: string, body: unknown, pointer: string) {
  const problem = await expectProblem(await put(derrick, collection, id, body), 400);
  expect(
    problem.errors?.map((e) => e.pointer),
    JSON.stringify(problem),
  ).toContain(pointer);
}

describe("reporting entities", () => {
  it.beforeAll(async ({ derrick }) => {
    await loadDemoOver(derrick);
  });

  it("entities - an editor creates (201) and replaces (200) a segment analysis; the version counts upserts; readers read it", async ({
    derrick,
  }) => {
    const created = await put(derrick, "segmentanalyses", "seg-x", segment("X", 0.5, 10, 90));
    expect(created.status).toBe(201);
    expect(created.headers.get("etag")).toBe('"1"');
    expect(await json(created)).toMatchObject({ segmentAnalysisId: "seg-x", name: "X", status: "test" });
    const replaced = await put(derrick, "segmentanalyses", "seg-x", segment("X renamed", 0.5, 10, 90));
    expect(replaced.status).toBe(200);
    expect(replaced.headers.get("etag")).toBe('"2"');
    const read = await derrick.call("/assessments/v1/segmentanalyses/seg-x", { as: "beta" });
    expect(read.status).toBe(200);
    expect(await json(read)).toMatchObject({ name: "X renamed" });
    // Each upsert keeps a version: the earlier one stays readable.
    const first = await derrick.call("/assessments/v1/segmentanalyses/seg-x?version=1");
    expect(first.status).toBe(200);
    expect(first.headers.get("etag")).toBe('"1"');
    expect(await json(first)).toMatchObject({ name: "X" });
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x?version=3")).status).toBe(404);
    const bad = await derrick.call("/assessments/v1/segmentanalyses/seg-x?version=first");
    expect(bad.status).toBe(400);
    expect((await json<Problem>(bad)).errors?.[0]?.pointer).toBe("/query/version");
  });

  it("entities - writes need the group assessments.editors; reads need a token, an appkey and a partition", async ({ derrick }) => {
    expect((await put(derrick, "segmentanalyses", "seg-y", segment("Y", 0.5, 10, 90), "alpha")).status).toBe(403);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { as: "beta", method: "DELETE" })).status).toBe(403);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { as: null })).status).toBe(401);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { headers: { appkey: "wrong-appkey" } })).status).toBe(401);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { partition: null })).status).toBe(400);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { partition: "unknown" })).status).toBe(403);
    // Partitions are separate stores.
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-x", { partition: "other" })).status).toBe(404);
    const viaDataPartition = await derrick.call("/assessments/v1/segmentanalyses/seg-x", {
      partition: null,
      headers: { "data-partition-id": "opendes" },
    });
    expect(viaDataPartition.status).toBe(200);
  });

  it("entities - DELETE answers 204, then the entity is gone (404) and a second DELETE is 404", async ({ derrick }) => {
    await put(derrick, "segmentanalyses", "seg-del", segment("Del", 0.5, 10, 90));
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-del", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-del")).status).toBe(404);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-del", { as: "admin", method: "DELETE" })).status).toBe(404);
    // Re-created after a delete: 201 again.
    expect((await put(derrick, "segmentanalyses", "seg-del", segment("Del", 0.5, 10, 90))).status).toBe(201);
  });

  it("entities - a license keeps every version: upserts merge by versionNumber", async ({ derrick }) => {
    const license = await json(await derrick.call("/assessments/v1/licenses/pl-123"));
    expect(license.versions.map((v: { versionNumber: number }) => v.versionNumber)).toEqual([1, 2]);
    // Re-sending version 2 alone replaces it and keeps version 1.
    const v2 = demoBody("pl-123", 1);
    v2.versions[0].licenseStatus = "EXTENDED";
    const res = await put(derrick, "licenses", "pl-123", v2);
    expect(res.status).toBe(200);
    const merged = await json(res);
    expect(merged.versions.map((v: { versionNumber: number; licenseStatus: string }) => [v.versionNumber, v.licenseStatus])).toEqual([
      [1, "ACTIVE"],
      [2, "EXTENDED"],
    ]);
    // A new version overlapping a stored one is named.
    const v3 = demoBody("pl-123", 1);
    v3.versions[0] = { ...v3.versions[0], versionNumber: 3, validFrom: "2022-06-01" };
    await rejects(derrick, "licenses", "pl-123", v3, "/body/versions/0/validFrom");
  });

  it("entities - retrying a write repairs the prospect index a crash between the entity and its index left short", async ({ derrick }) => {
    expect((await put(derrick, "segmentanalyses", "seg-crash", segment("Crash", 0.5, 10, 90, { prospectId: "p-beta" }))).status).toBe(201);
    const body = prospectAnalysis("p-beta", "Beta", ["seg-crash"]);
    // The actor wrote the entity and died before the by-prospect index: the entity alone is stored.
    const store = assessmentStore(await openStores(derrick.nc));
    await store.put(
      "opendes",
      "prospectanalyses",
      "pa-crash",
      () => validateEntity("prospectanalyses", "pa-crash", "prospectAnalysisId", structuredClone(body)),
      new Date().toISOString(),
    );
    const analysesOfBeta = async () => {
      const license = await json(await derrick.call("/assessments/v1/licenseaggregation/pl-123"));
      return license.versions[1].prospects
        .find((p: { prospectId: string }) => p.prospectId === "p-beta")
        .prospectAnalyses.map((a: { prospectAnalysisId: string }) => a.prospectAnalysisId);
    };
    expect(await analysesOfBeta()).not.toContain("pa-crash");
    // The client retries the same PUT: the entity is unchanged, the index is repaired.
    expect((await put(derrick, "prospectanalyses", "pa-crash", body)).status).toBe(200);
    expect(await analysesOfBeta()).toContain("pa-crash");
  });

  it("entities - ids: a body id that differs from the path, or a path id with bad characters, is a 400", async ({ derrick }) => {
    await rejects(
      derrick,
      "segmentanalyses",
      "seg-x",
      { ...segment("X", 0.5, 10, 90), segmentAnalysisId: "other" },
      "/body/segmentAnalysisId",
    );
    const res = await put(derrick, "segmentanalyses", "bad.id", segment("X", 0.5, 10, 90));
    expect(res.status).toBe(400);
  });

  it("entities - segment analysis rules each name the field", async ({ derrick }) => {
    const s = segment("S", 0.5, 10, 90);
    const cases: Array<[unknown, string]> = [
      [{ ...s, extra: 1 }, "/body/extra"],
      [{ ...s, name: undefined }, "/body/name"],
      [{ ...s, status: "draft" }, "/body/status"],
      [{ ...s, riskFactors: [{ name: "trap", probability: 1.2 }] }, "/body/riskFactors/0/probability"],
      [{ ...s, riskFactors: [{ name: "trap", probability: -0.1 }] }, "/body/riskFactors/0/probability"],
      [
        {
          ...s,
          riskFactors: [
            { name: "trap", probability: 0.5 },
            { name: "trap", probability: 0.5 },
          ],
        },
        "/body/riskFactors/1/name",
      ],
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 90, p10: 10 } } }, "/body/volumes/oil/p10"],
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 50, p10: 50 } } }, "/body/volumes/oil/p10"],
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 10 } } }, "/body/volumes/oil/p10"],
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 10, p10: 90, mean: 40 } } }, "/body/volumes/oil"],
      [{ ...s, volumes: { oil: { unit: "MMbbl" } } }, "/body/volumes/oil"],
      [{ ...s, volumes: {} }, "/body/volumes"],
      [{ ...s, volumes: { bitumen: { unit: "MMbbl", mean: 1 } } }, "/body/volumes/bitumen"],
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 0, p10: 9 } } }, "/body/volumes/oil/p90"],
      // A spread so wide the lognormal's mean is not a number (σ ≈ 90): its results would answer null.
      [{ ...s, volumes: { oil: { unit: "MMbbl", p90: 1, p10: 1e100 } } }, "/body/volumes/oil/p10"],
      [{ ...s, properties: [{ name: "Depth", type: "integer", value: 1.5 }] }, "/body/properties/0/value"],
      [{ ...s, properties: [{ name: "Depth", type: "float", value: "deep" }] }, "/body/properties/0/value"],
      [{ ...s, properties: [{ name: "Drilled", type: "date", value: "2023-02-30" }] }, "/body/properties/0/value"],
      [{ ...s, properties: [{ name: "Age", type: "closedList", value: 3 }] }, "/body/properties/0/value"],
      [{ ...s, properties: [{ name: "Age", type: "list", value: "x" }] }, "/body/properties/0/type"],
      [
        {
          ...s,
          entitlement: [
            { companyId: "a", share: 0.7 },
            { companyId: "b", share: 0.6 },
          ],
        },
        "/body/entitlement",
      ],
    ];
    for (const [body, pointer] of cases) await rejects(derrick, "segmentanalyses", "seg-bad", body, pointer);
    expect((await derrick.call("/assessments/v1/segmentanalyses/seg-bad")).status).toBe(404);
  });

  it("entities - prospect analysis rules and references each name the field", async ({ derrick }) => {
    const pa = demoBody("pa-alpha-oil");
    await put(derrick, "segmentanalyses", "seg-elsewhere", segment("Elsewhere", 0.5, 10, 90, { prospectId: "p-other" }));
    await put(derrick, "segmentanalyses", "seg-in-m3", { name: "m3", riskFactors: [], volumes: { oil: { unit: "Mm3", mean: 5 } } });
    await put(derrick, "segmentanalyses", "seg-in-place", {
      name: "in place",
      riskFactors: [],
      volumes: { oil: { unit: "MMbbl", mean: 100, basis: "inPlace" } },
    });
    const cases: Array<[unknown, string]> = [
      [{ ...pa, segmentAnalysisIds: ["seg-alpha-rogn", "seg-missing"] }, "/body/segmentAnalysisIds/1"],
      [{ ...pa, segmentAnalysisIds: ["seg-alpha-rogn", "seg-alpha-rogn"] }, "/body/segmentAnalysisIds/1"],
      [{ ...pa, segmentAnalysisIds: [] }, "/body/segmentAnalysisIds"],
      [{ ...pa, segmentAnalysisIds: ["seg-elsewhere"] }, "/body/segmentAnalysisIds/0"],
      [{ ...pa, segmentAnalysisIds: ["seg-alpha-rogn", "seg-in-m3"] }, "/body/segmentAnalysisIds/1"],
      [{ ...pa, dependency: { model: "partial" } }, "/body/dependency/model"],
      [
        { ...pa, dependency: { model: "commonFactor", commonFactors: [{ name: "source", probability: 1.5 }] } },
        "/body/dependency/commonFactors/0/probability",
      ],
      [{ ...pa, simulation: { trials: 10, seed: 1 } }, "/body/simulation/trials"],
      [{ ...pa, simulation: { trials: 1000, seed: -1 } }, "/body/simulation/seed"],
      [{ ...pa, entitlement: { companyId: "c-nordic", workingInterest: 1.4 } }, "/body/entitlement/workingInterest"],
      [{ ...pa, prospect: { id: "p-alpha" } }, "/body/prospect/name"],
      [{ ...pa, mefs: { value: -1, unit: "MMboe" } }, "/body/mefs/value"],
      // The MEFS must be in a unit one of the products has (it used to fall back to the primary product).
      [{ ...pa, mefs: { value: 5, unit: "Mm3oe" } }, "/body/mefs/unit"],
      // In-place and recoverable volumes are not added together.
      [{ ...pa, segmentAnalysisIds: ["seg-alpha-rogn", "seg-in-place"] }, "/body/segmentAnalysisIds/1"],
    ];
    for (const [body, pointer] of cases) await rejects(derrick, "prospectanalyses", "pa-bad", body, pointer);
  });

  it("entities - license rules each name the field", async ({ derrick }) => {
    const base = demoBody("pl-123", 1);
    const version = base.versions[0];
    const withVersion = (patch: Record<string, unknown>) => ({ ...base, versions: [{ ...version, ...patch }] });
    const licensees = version.licensees as Array<Record<string, unknown>>;
    const cases: Array<[unknown, string]> = [
      [withVersion({ licensees: licensees.map((l, i) => (i === 0 ? { ...l, interest: 0.3 } : l)) }), "/body/versions/0/licensees"],
      [withVersion({ licensees: licensees.map((l) => ({ ...l, isOperator: true })) }), "/body/versions/0/licensees"],
      [withVersion({ licensees: licensees.map((l) => ({ ...l, isOperator: false })) }), "/body/versions/0/licensees"],
      [
        withVersion({ licensees: licensees.map((l, i) => (i === 0 ? { ...l, interest: 1.4 } : l)) }),
        "/body/versions/0/licensees/0/interest",
      ],
      [withVersion({ validFrom: "2023-02-30" }), "/body/versions/0/validFrom"],
      [withVersion({ validFrom: "2023-01-01", validTo: "2022-01-01" }), "/body/versions/0/validTo"],
      [withVersion({ validFrom: "1 Jan 2023" }), "/body/versions/0/validFrom"],
      [{ ...base, versions: [version, { ...version }] }, "/body/versions/1/versionNumber"],
      [
        {
          ...base,
          versions: [
            { ...version, versionNumber: 1, validFrom: "2020-01-01", validTo: null },
            { ...version, versionNumber: 2, validFrom: "2021-01-01" },
          ],
        },
        "/body/versions/1/validFrom",
      ],
      [{ ...base, versions: [] }, "/body/versions"],
      [{ ...base, nation: { code: "no", name: "Norway" } }, "/body/nation/code"],
    ];
    for (const [body, pointer] of cases) await rejects(derrick, "licenses", "pl-bad", body, pointer);
  });

  it("entities - full cycle analysis rules and references each name the field", async ({ derrick }) => {
    const fc = demoBody("fc-alpha-mean");
    const flows = {
      contractor: [
        { year: 2026, netCashFlow: -1000 },
        { year: 2027, netCashFlow: 300 },
      ],
    };
    const cases: Array<[unknown, string]> = [
      [{ ...fc, prospectAnalysisId: "pa-missing" }, "/body/prospectAnalysisId"],
      [{ ...fc, cashFlows: flows }, "/body/cashFlows"],
      [{ ...fc, production: undefined, costs: undefined }, "/body/production"],
      [{ ...fc, costs: undefined }, "/body/costs"],
      [{ ...fc, production: undefined, cashFlows: flows }, "/body/costs"],
      [
        { ...fc, assumptions: { ...fc.assumptions, fiscal: { type: "psc", royaltyRate: 0.1, incomeTaxRate: 0.3 } } },
        "/body/assumptions/fiscal/costRecoveryCeiling",
      ],
      [
        {
          ...fc,
          assumptions: { ...fc.assumptions, fiscal: { type: "psc", royaltyRate: 0.1, incomeTaxRate: 0.3, costRecoveryCeiling: 0.4 } },
        },
        "/body/assumptions/fiscal/contractorProfitShare",
      ],
      [{ ...fc, assumptions: { ...fc.assumptions, prices: [fc.assumptions.prices[1]] } }, "/body/assumptions/prices"],
      // Associated gas (gasOilRatio) with no gas price was sold for nothing, silently.
      [{ ...fc, assumptions: { ...fc.assumptions, prices: [fc.assumptions.prices[0]] } }, "/body/assumptions/prices"],
      [{ ...fc, assumptions: { ...fc.assumptions, workingInterest: 2 } }, "/body/assumptions/workingInterest"],
      [{ ...fc, setup: { ...fc.setup, discountRate: 2 } }, "/body/setup/discountRate"],
      [{ ...fc, setup: { ...fc.setup, discounting: "continuous" } }, "/body/setup/discounting"],
      [{ ...fc, production: { ...fc.production, declineRate: 1 } }, "/body/production/declineRate"],
      [
        {
          ...fc,
          production: undefined,
          costs: undefined,
          cashFlows: {
            contractor: [
              { year: 2026, netCashFlow: 1 },
              { year: 2026, netCashFlow: 2 },
            ],
          },
        },
        "/body/cashFlows/contractor/1/year",
      ],
    ];
    // A prospect of one segment holding only `volumes`: `fc` as it is is refused at `pointer`, with `production` changed accepted.
    const oneSegmentProspect = async (key: string, volumes: unknown, pointer: string, production: Record<string, unknown>) => {
      await put(derrick, "segmentanalyses", `seg-${key}`, { name: key.replaceAll("-", " "), riskFactors: [], volumes });
      await put(derrick, "prospectanalyses", `pa-${key}`, prospectAnalysis(`p-${key}`, key, [`seg-${key}`]));
      await rejects(derrick, "fullcycleanalyses", "fc-bad", { ...fc, prospectAnalysisId: `pa-${key}` }, pointer);
      const accepted = { ...fc, prospectAnalysisId: `pa-${key}`, production: { ...fc.production, ...production } };
      expect((await put(derrick, "fullcycleanalyses", `fc-${key}`, accepted)).status).toBe(201);
    };
    // A production model of oil on a gas-only prospect produced nothing and reported only the capex.
    await oneSegmentProspect("gas-only", { gas: { unit: "Bcf", mean: 100 } }, "/body/production/product", { product: "gas" });
    // In-place volumes are not produced (no recovery factor): the model must give its recoverable volume.
    const inPlace = { oil: { unit: "MMbbl", mean: 100, basis: "inPlace" } };
    await oneSegmentProspect("in-place-only", inPlace, "/body/production/recoverable", { recoverable: 30 });
    for (const [body, pointer] of cases) await rejects(derrick, "fullcycleanalyses", "fc-bad", body, pointer);
  });

  it("entities - an aggregation whose inputs stopped being comparable after the analysis was written answers 409 naming the segment", async ({
    derrick,
  }) => {
    await put(derrick, "segmentanalyses", "seg-u1", segment("U1", 0.5, 10, 90, { prospectId: "p-units" }));
    await put(derrick, "segmentanalyses", "seg-u2", segment("U2", 0.5, 10, 90, { prospectId: "p-units" }));
    expect((await put(derrick, "prospectanalyses", "pa-units", prospectAnalysis("p-units", "Units", ["seg-u1", "seg-u2"]))).status).toBe(
      201,
    );
    expect((await derrick.call("/assessments/v1/prospectanalysisaggregation/pa-units")).status).toBe(200);
    // The second segment is re-upserted in another unit: adding MMbbl and Mm3 would be meaningless.
    expect(
      (
        await put(derrick, "segmentanalyses", "seg-u2", {
          ...segment("U2", 0.5, 10, 90, { prospectId: "p-units" }),
          volumes: { oil: { unit: "Mm3", p90: 2, p10: 14 } },
        })
      ).status,
    ).toBe(200);
    const res = await derrick.call("/assessments/v1/prospectanalysisaggregation/pa-units");
    expect(res.status).toBe(409);
    expect((await json<Problem>(res)).errors?.map((e) => e.pointer)).toEqual(["/segmentAnalysisIds/1"]);
    // The details list each segment in its own unit (no sum), and the license view needs no volumes.
    const details = await json(await derrick.call("/assessments/v1/prospectanalysisaggregation/pa-units/details"));
    expect(details.segments.map((s: { results: { recoverable: { oil: { unit: string } } } }) => s.results.recoverable.oil.unit)).toEqual([
      "MMbbl",
      "Mm3",
    ]);
  });

  it("entities - multiple scenario rules, references and GeoJSON validity each name the field", async ({ derrick }) => {
    const msa = demoBody("msa-alpha");
    const [oil, gas] = msa.scenarios;
    const ring = msa.polygon.geometry.coordinates[0];
    const feature = (geometry: unknown) => ({ ...msa, polygon: { type: "Feature", geometry } });
    await put(derrick, "segmentanalyses", "seg-beta", segment("Beta", 0.5, 10, 90));
    await put(derrick, "prospectanalyses", "pa-beta", prospectAnalysis("p-beta", "Beta", ["seg-beta"]));
    const cases: Array<[unknown, string]> = [
      [{ ...msa, scenarios: [{ ...oil, probability: 0.6 }, gas] }, "/body/scenarios"],
      [{ ...msa, scenarios: [oil, { ...gas, prospectAnalysisId: "pa-missing" }] }, "/body/scenarios/1/prospectAnalysisId"],
      [{ ...msa, scenarios: [{ ...oil, prospectAnalysisId: "pa-beta" }, gas] }, "/body/scenarios/0/prospectAnalysisId"],
      [{ ...msa, scenarios: [oil, { ...gas, scenarioId: oil.scenarioId }] }, "/body/scenarios/1/scenarioId"],
      [{ ...msa, scenarios: [{ ...oil, probability: 1.7 }, gas] }, "/body/scenarios/0/probability"],
      [feature({ type: "Polygon", coordinates: [ring.slice(0, 4)] }), "/body/polygon/geometry/coordinates/0"],
      [feature({ type: "Polygon", coordinates: [[ring[0], ring[1], ring[0]]] }), "/body/polygon/geometry/coordinates/0"],
      [
        feature({ type: "Polygon", coordinates: [ring.map((p: number[], i: number) => (i === 1 ? [200, p[1]] : p))] }),
        "/body/polygon/geometry/coordinates/0/1/0",
      ],
      [
        feature({ type: "Polygon", coordinates: [ring.map((p: number[], i: number) => (i === 2 ? [p[0], 95] : p))] }),
        "/body/polygon/geometry/coordinates/0/2/1",
      ],
      [
        feature({ type: "Polygon", coordinates: [ring.map((p: number[], i: number) => (i === 2 ? [p[0], "64"] : p))] }),
        "/body/polygon/geometry/coordinates/0/2/1",
      ],
      [feature({ type: "Point", coordinates: [7, 64] }), "/body/polygon/geometry/type"],
      [feature(undefined), "/body/polygon/geometry"],
      [{ ...msa, polygon: { type: "Polygon", coordinates: [ring], geometry: {} } }, "/body/polygon/geometry"],
      [{ ...msa, polygon: { type: "LineString", coordinates: ring } }, "/body/polygon/type"],
      [{ ...msa, polygon: { ...msa.polygon, crs: { type: "name" } } }, "/body/polygon/crs"],
    ];
    for (const [body, pointer] of cases) await rejects(derrick, "multiplescenarioanalyses", "msa-bad", body, pointer);
    // A bare Polygon geometry is accepted too.
    expect(
      (await put(derrick, "multiplescenarioanalyses", "msa-bare", { ...msa, polygon: { type: "Polygon", coordinates: [ring] } })).status,
    ).toBe(201);
  });
});
