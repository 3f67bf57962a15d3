import { describe, expect, it } from "vitest";
import { analysisProblems, productionProblem, scenarioProblems } from "./consistency.ts";

const at = (i: number) => `/segments/${i}`;
const seg = (id: string, volumes: Record<string, { unit: string; mean: number; basis?: "recoverable" | "inPlace" }>) => ({
  segmentAnalysisId: id,
  volumes,
});

describe("reporting consistency - volumes an aggregation adds together", () => {
  it("consistency - one unit per product across segments; each product checked on its own", () => {
    expect(
      analysisProblems(
        [
          seg("a", { oil: { unit: "MMbbl", mean: 1 }, gas: { unit: "Bcf", mean: 1 } }),
          seg("b", { oil: { unit: "MMbbl", mean: 2 }, gas: { unit: "Bcf", mean: 2 } }),
        ],
        undefined,
        at,
        "/mefs/unit",
      ),
    ).toEqual([]);
    const problems = analysisProblems(
      [seg("a", { oil: { unit: "MMbbl", mean: 1 } }), seg("b", { oil: { unit: "Mm3", mean: 2 } })],
      undefined,
      at,
      "/mefs/unit",
    );
    expect(problems.map((p) => p.pointer)).toEqual(["/segments/1"]);
    expect(problems[0]!.message).toMatch(/oil of segment analysis b is in Mm3, but in MMbbl in a/);
  });

  it("consistency - one basis per analysis (absent = recoverable)", () => {
    expect(
      analysisProblems(
        [seg("a", { oil: { unit: "MMbbl", mean: 1 } }), seg("b", { oil: { unit: "MMbbl", mean: 1, basis: "recoverable" } })],
        undefined,
        at,
        "/m",
      ),
    ).toEqual([]);
    expect(
      analysisProblems(
        [seg("a", { oil: { unit: "MMbbl", mean: 1 } }), seg("b", { gas: { unit: "Bcf", mean: 1, basis: "inPlace" } })],
        undefined,
        at,
        "/m",
      ).map((p) => p.pointer),
    ).toEqual(["/segments/1"]);
  });

  it("consistency - the MEFS must be in the unit of one of the products", () => {
    const segments = [seg("a", { oil: { unit: "MMbbl", mean: 1 }, oilEquivalent: { unit: "MMboe", mean: 1 } })];
    expect(analysisProblems(segments, { unit: "MMboe" }, at, "/mefs/unit")).toEqual([]);
    expect(analysisProblems(segments, { unit: "Bcf" }, at, "/mefs/unit")).toEqual([
      { pointer: "/mefs/unit", message: expect.stringMatching(/no enrolled volume is in Bcf.*MMbbl, MMboe/) },
    ]);
  });

  it("consistency - scenarios weighted together keep a product's unit and the basis", () => {
    const ok = { scenarioId: "s1", units: { oilEquivalent: "MMboe" }, basis: "recoverable" };
    expect(scenarioProblems([ok, { ...ok, scenarioId: "s2" }], (i) => `/scenarios/${i}`)).toEqual([]);
    expect(
      scenarioProblems([ok, { scenarioId: "s2", units: { oilEquivalent: "Mm3oe" }, basis: "recoverable" }], (i) => `/scenarios/${i}`).map(
        (p) => p.pointer,
      ),
    ).toEqual(["/scenarios/1"]);
    expect(scenarioProblems([ok, { ...ok, scenarioId: "s2", basis: "inPlace" }], (i) => `/scenarios/${i}`).map((p) => p.pointer)).toEqual([
      "/scenarios/1",
    ]);
  });

  it("consistency - a production model needs its product or oil equivalent, unless it gives the volume", () => {
    expect(productionProblem({ product: "oil" }, { oil: "MMbbl" }, "recoverable", "/p")).toBeUndefined();
    expect(productionProblem({ product: "oil" }, { oilEquivalent: "MMboe" }, "recoverable", "/p")).toBeUndefined();
    expect(productionProblem({}, { gas: "Bcf" }, "recoverable", "/p")).toEqual({
      pointer: "/p/product",
      message: expect.stringMatching(/no oil .*it has gas/),
    });
    expect(productionProblem({ recoverable: 50 }, { gas: "Bcf" }, "recoverable", "/p")).toBeUndefined();
    expect(productionProblem(undefined, {}, "recoverable", "/p")).toBeUndefined();
  });

  it("consistency - a production model does not produce in-place volumes: it needs recoverable ones, or the volume given", () => {
    // In place is not what a field produces (no recovery factor applied): producing it overstated every flow.
    expect(productionProblem({ product: "oil" }, { oil: "MMbbl" }, "inPlace", "/p")).toEqual({
      pointer: "/p/recoverable",
      message: expect.stringMatching(/in place/),
    });
    expect(productionProblem({ product: "oil", recoverable: 30 }, { oil: "MMbbl" }, "inPlace", "/p")).toBeUndefined();
  });
});
