import { describe, expect } from "vitest";
import { TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem, getJson, json } from "../harness/json.ts";
import { loadOrCreateSigningKey, mintToken } from "../../actors/identity/index.ts";
import type { Project } from "../../subjects/projects.ts";
import { drillingPlanValues, putProject } from "./fixtures.ts";

const it = derrickTest({ actors: ["identity", "projects", "content-worker"] });

/** Every route under /v1/projects/{projectId} and /v2/projects/{projectId}, with a body where one is needed. */
const memberRoutes = (p: string) => [
  { method: "POST", path: `/v1/projects/${p}/display-items/content/requests`, body: {} },
  { method: "POST", path: `/v1/projects/${p}/key-parameters/content/requests`, body: { ids: ["total-depth-md"] } },
  { method: "GET", path: `/v1/projects/${p}/display-items/content/cnt_x1` },
  { method: "GET", path: `/v1/projects/${p}/key-parameters/content/cnt_x1` },
  { method: "GET", path: `/v1/projects/${p}/display-items/content-parts/prt_x1_0` },
  { method: "GET", path: `/v1/projects/${p}/key-parameters/content-parts/prt_x1_0` },
  { method: "GET", path: `/v2/projects/${p}/tasks/tsk_x1` },
];
const adminRoutes = (p: string) => [
  { method: "PUT", path: `/v1/projects/${p}`, body: { name: "x", members: [] } },
  { method: "DELETE", path: `/v1/projects/${p}` },
  { method: "PUT", path: `/v1/projects/${p}/members/carol` },
  { method: "DELETE", path: `/v1/projects/${p}/members/alpha` },
];

describe("projects and membership", () => {
  const send = (derrick: TestDerrick, route: { method: string; path: string; body?: unknown }, as: "alpha" | "beta" | "admin") =>
    derrick.call(route.path, { as, method: route.method, ...(route.body !== undefined ? { body: JSON.stringify(route.body) } : {}) });

  it("projects - an admin creates a project (201), replaces it (200) and members read it", async ({ derrick }) => {
    const created = await putProject(derrick, "plan-a");
    expect(created.status).toBe(201);
    const project = await json<Project>(created);
    expect(project).toMatchObject({ projectId: "plan-a", members: ["alpha"] });
    expect(project.values.keyParameters["total-depth-md"]).toBe(3550);

    const replaced = await putProject(derrick, "plan-a", { name: "Renamed" });
    expect(replaced.status).toBe(200);
    expect(await replaced.json()).toMatchObject({ name: "Renamed", createdAt: project.createdAt });

    const asMember = await derrick.call("/v1/projects/plan-a", { as: "alpha" });
    expect(asMember.status).toBe(200);
    const asAdmin = await derrick.call("/v1/projects/plan-a", { as: "admin" });
    expect(asAdmin.status).toBe(200);
  });

  it("projects - a PUT without values keeps the values held", async ({ derrick }) => {
    await putProject(derrick, "plan-keep");
    const res = await derrick.call("/v1/projects/plan-keep", {
      as: "admin",
      method: "PUT",
      body: JSON.stringify({ name: "Keep", members: ["alpha", "beta"] }),
    });
    expect(res.status).toBe(200);
    const project = await json<Project>(res);
    expect(project.members).toEqual(["alpha", "beta"]);
    expect(project.values.displayItems["well-name"]).toBe("NO 15/9-F-21 A");
  });

  it("projects - bad bodies get a 400 naming the field", async ({ derrick }) => {
    const cases: Array<[unknown, string]> = [
      [{ name: "x", members: [], extra: 1 }, "/body/extra"],
      [{ members: [] }, "/body/name"],
      [{ name: "x", members: ["bad id"] }, "/body/members/0"],
      [{ projectId: "other", name: "x", members: [] }, "/body/projectId"],
      [{ name: "x", members: [], values: { displayItems: { "no-such-item": 1 } } }, "/body/values/displayItems/no-such-item"],
      [{ name: "x", members: [], values: { keyParameters: { "total-depth-md": "deep" } } }, "/body/values/keyParameters/total-depth-md"],
      [
        { name: "x", members: [], values: { displayItems: { "trajectory-survey": [{ md: [1] }] } } },
        "/body/values/displayItems/trajectory-survey",
      ],
      [{ name: "x", members: [], values: { displayItems: { "spud-date": "next week" } } }, "/body/values/displayItems/spud-date"],
    ];
    for (const [body, pointer] of cases) {
      const res = await derrick.call("/v1/projects/plan-bad", { as: "admin", method: "PUT", body: JSON.stringify(body) });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(
        problem.errors!.map((e) => e.pointer),
        JSON.stringify(body),
      ).toContain(pointer);
    }
    const badPath = await derrick.call("/v1/projects/bad.id", {
      as: "admin",
      method: "PUT",
      body: JSON.stringify({ name: "x", members: [] }),
    });
    expect(badPath.status).toBe(400);
    expect((await derrick.call("/v1/projects/plan-bad", { as: "admin" })).status).toBe(404);
  });

  it("projects - members are added and removed by admins (204) and the change is visible", async ({ derrick }) => {
    await putProject(derrick, "plan-m", { members: [] });
    expect((await derrick.call("/v1/projects/plan-m/members/beta", { as: "admin", method: "PUT" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/plan-m/members/beta", { as: "admin", method: "PUT" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/plan-m", { as: "beta" })).status).toBe(200);
    const project = await getJson<Project>(derrick, "/v1/projects/plan-m", { as: "admin" });
    expect(project.members).toEqual(["beta"]);
    expect((await derrick.call("/v1/projects/plan-m/members/beta", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/plan-m", { as: "beta" })).status).toBe(403);
  });

  it("projects - every project route answers a non-member 403", async ({ derrick }) => {
    await putProject(derrick, "plan-403");
    for (const route of [...memberRoutes("plan-403"), ...adminRoutes("plan-403"), { method: "GET", path: "/v1/projects/plan-403" }]) {
      const res = await send(derrick, route, "beta");
      expect(res.status, `${route.method} ${route.path}`).toBe(403);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
    }
  });

  it("projects - every project route answers 404 for an unknown project", async ({ derrick }) => {
    for (const route of memberRoutes("plan-none"))
      expect((await send(derrick, route, "beta")).status, `${route.method} ${route.path}`).toBe(404);
    for (const route of [
      ...adminRoutes("plan-none").filter((r) => r.method !== "PUT" || r.path.includes("/members/")),
      { method: "GET", path: "/v1/projects/plan-none" },
    ]) {
      expect((await send(derrick, route, "admin")).status, `${route.method} ${route.path}`).toBe(404);
    }
  });

  it("projects - admins manage projects without membership but need it for content and tasks", async ({ derrick }) => {
    await putProject(derrick, "plan-admin", { members: ["alpha"] });
    for (const route of memberRoutes("plan-admin"))
      expect((await send(derrick, route, "admin")).status, `${route.method} ${route.path}`).toBe(403);
    // A member who is not an admin cannot manage the project.
    for (const route of adminRoutes("plan-admin"))
      expect((await send(derrick, route, "alpha")).status, `${route.method} ${route.path}`).toBe(403);
  });

  it("projects - a member beyond the project's limit is a 400 naming the member", async ({ derrick }) => {
    const members = Array.from({ length: 1000 }, (_, i) => `m${i}`);
    expect(
      (await derrick.call("/v1/projects/plan-full", { as: "admin", method: "PUT", body: JSON.stringify({ name: "Full", members }) }))
        .status,
    ).toBe(201);
    const res = await derrick.call("/v1/projects/plan-full/members/one-more", { as: "admin", method: "PUT" });
    expect((await expectProblem(res, 400)).errors).toEqual([
      { pointer: "/params/memberId", message: expect.stringMatching(/at most 1000/) },
    ]);
    // One already there is no addition.
    expect((await derrick.call("/v1/projects/plan-full/members/m7", { as: "admin", method: "PUT" })).status).toBe(204);
  });

  it("projects - a member is matched by client id or by user subject", async ({ derrick }) => {
    // A user token of client beta for the user jane-doe: admitted by the subject, not by the client id.
    const key = await loadOrCreateSigningKey(derrick.dataDir);
    const userToken = await mintToken(key, { sub: "jane-doe", client_id: "beta", groups: [] }, derrick.cfg.auth.audience, 600);
    const asJane = { authorization: `Bearer ${userToken}`, appkey: TEST_CLIENTS.beta.appkey };
    await putProject(derrick, "plan-sub", { members: ["jane-doe"] });
    expect(
      (
        await derrick.call("/v1/projects/plan-sub/display-items/content/requests", {
          as: null,
          headers: asJane,
          method: "POST",
          body: "{}",
        })
      ).status,
    ).toBe(202);
    expect((await derrick.call("/v1/projects/plan-sub", { as: "beta" })).status).toBe(403);
    await putProject(derrick, "plan-client", { members: ["beta"] });
    expect((await derrick.call("/v1/projects/plan-client", { as: null, headers: asJane })).status).toBe(200);
  });

  it("projects - credentials and partition are required on project routes", async ({ derrick }) => {
    await putProject(derrick, "plan-cred");
    expect((await derrick.call("/v1/projects/plan-cred", { as: null })).status).toBe(401);
    expect((await derrick.call("/v1/projects/plan-cred", { headers: { appkey: "wrong-appkey-1" } })).status).toBe(401);
    expect((await derrick.call("/v1/projects/plan-cred", { partition: null })).status).toBe(400);
    // Projects live in a partition: the same id in another partition is another (absent) project.
    expect((await derrick.call("/v1/projects/plan-cred", { partition: "other" })).status).toBe(404);
  });

  it("projects - a deleted project is gone (204, then 404)", async ({ derrick }) => {
    await putProject(derrick, "plan-del", { values: drillingPlanValues(5) });
    expect((await derrick.call("/v1/projects/plan-del", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/plan-del")).status).toBe(404);
  });
});
