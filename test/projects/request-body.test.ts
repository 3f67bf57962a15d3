import { describe, expect } from "vitest";
import type { TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";
import { putProject } from "./fixtures.ts";

const it = derrickTest({ actors: ["identity", "projects"] });

/** A content request's body is optional (absent = every item): a broken one must not pass for absent. */
describe("content request bodies", () => {
  it.beforeAll(async ({ derrick }) => {
    await putProject(derrick, "p-body");
  });

  const post = (derrick: TestDerrick, body?: string, contentType = "application/json") =>
    derrick.call("/v1/projects/p-body/key-parameters/content/requests", {
      method: "POST",
      ...(body === undefined ? {} : { body, headers: { "content-type": contentType } }),
    });

  it("tasks - a body that is not JSON is a 400 problem, not a request for every item", async ({ derrick }) => {
    for (const body of ["{", '{"ids": ["total-cost"', "not json", '{"ids":["total-cost"]} trailing']) {
      const res = await post(derrick, body);
      expect(res.status, `${body} → ${res.status}`).toBe(400);
      expect((await expectProblem(res, 400)).detail).toMatch(/not valid JSON/);
    }
    expect((await post(derrick, "{", "application/vnd.derrick+json")).status).toBe(400);
  });

  it("tasks - an absent or empty body still asks for every item, and a valid one is taken", async ({ derrick }) => {
    expect((await post(derrick)).status).toBe(202);
    expect((await post(derrick, "")).status).toBe(202);
    expect((await post(derrick, '{"ids":["total-cost"]}')).status).toBe(202);
  });
});
