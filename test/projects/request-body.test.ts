import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { putProject } from "./fixtures.ts";

/** A content request's body is optional (absent = every item): a broken one must not pass for absent. */
describe("content request bodies", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["identity", "projects"] });
    await putProject(derrick, "p-body");
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const post = (body?: string, contentType = "application/json") =>
    derrick.call("/v1/projects/p-body/key-parameters/content/requests", {
      method: "POST",
      ...(body === undefined ? {} : { body, headers: { "content-type": contentType } }),
    });

  it("tasks - a body that is not JSON is a 400 problem, not a request for every item", async () => {
    for (const body of ["{", '{"ids": ["total-cost"', "not json", '{"ids":["total-cost"]} trailing']) {
      const res = await post(body);
      expect(res.status, `${body} → ${res.status}`).toBe(400);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      expect(((await res.json()) as { detail: string }).detail).toMatch(/not valid JSON/);
    }
    expect((await post("{", "application/vnd.derrick+json")).status).toBe(400);
  });

  it("tasks - an absent or empty body still asks for every item, and a valid one is taken", async () => {
    expect((await post()).status).toBe(202);
    expect((await post("")).status).toBe(202);
    expect((await post('{"ids":["total-cost"]}')).status).toBe(202);
  });
});
