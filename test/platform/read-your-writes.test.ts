/**
 * Read-your-writes across processes: two derricks on one nats-server, A with the edge and B without,
 * both serving the same actors, so each request lands on either (queue groups). A write acknowledged
 * by one must be seen by the next read, whichever process answers it (a view that applies an entry
 * wrongly fails here). A watch lagging behind the read, which the freshness look covers, is pinned by
 * bucket-view.test.ts: here a watch is faster than an HTTP round trip.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Svcm } from "@nats-io/services";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import type { Subscription } from "../../subjects/notifications.ts";
import { serviceName } from "../../subjects/index.ts";
import type { TwinGetReply } from "../../subjects/twins.ts";
import type { CatalogPage, Project } from "../../subjects/projects.ts";
import { requestContent, taskIn } from "../projects/helpers.ts";

const ROUNDS = 40;
const ACTORS = ["notifications", "twins", "projects"] as const;
let nats: TestNats;
let a: TestDerrick;
let b: TestDerrick;

beforeAll(async () => {
  nats = await startTestNats();
  const env = { DERRICK_CALLBACK_ALLOW_HTTP: "true", DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.0/8" };
  a = await startDerrick(nats, { actors: ["identity", "content-worker", ...ACTORS], env });
  b = await startDerrick(nats, { actors: [...ACTORS], edge: false, env });
});

afterAll(async () => {
  await b?.cleanup();
  await a?.cleanup();
  await nats?.cleanup();
});

describe("read-your-writes across actor processes", () => {
  it("subscriptions: each one created is in the list read right after, and gone from it right after its delete", async () => {
    const types = ["PublishData", "ProjectCreated", "PlanShared", "MasterPlanChanged"];
    for (let round = 0; round < ROUNDS; round++) {
      const type = types[round % types.length]!;
      const created = await a.call(`/v1/notifications/subscriptions/types/${type}`, {
        method: "POST",
        body: JSON.stringify({ subscriber: `rw-${round}`, callback_uri: `http://127.0.0.1:9/rw/${round}` }),
      });
      expect(created.status).toBe(200);
      const { subscription_id } = await json<Subscription>(created);
      const listed = await json<Subscription[]>(await a.call("/v1/notifications/subscriptions"));
      expect(listed.find((s) => s.subscription_id === subscription_id)?.callback_uri).toBe(`http://127.0.0.1:9/rw/${round}`);
      expect((await a.call(`/v1/notifications/subscriptions/${subscription_id}/secret`)).status).toBe(200);
      expect((await a.call(`/v1/notifications/subscriptions/${subscription_id}`, { method: "DELETE" })).status).toBe(200);
      const after = await json<Subscription[]>(await a.call("/v1/notifications/subscriptions"));
      expect(after.map((s) => s.subscription_id)).not.toContain(subscription_id);
    }
  });

  it("twins: each PUT's value is what the GET right after reads, with the PUT's ETag", async () => {
    const path = "/api/twin-properties/v1/acme/prod/rw-1/twin-properties";
    for (let round = 0; round < ROUNDS; round++) {
      const put = await a.call(path, {
        as: "admin",
        partition: null,
        method: "PUT",
        body: JSON.stringify({ group: "g", twins: [{ name: "p", value: `v${round}` }] }),
      });
      expect(put.status).toBe(200);
      const got = await a.call(`${path}?group=g`, { as: "admin", partition: null });
      expect((await json<TwinGetReply>(got)).desired.g?.p?.value).toBe(`v${round}`);
      expect(got.headers.get("etag")).toBe(put.headers.get("etag"));
    }
  });

  it("projects: each project, member and catalog item written is what the reads right after see", async () => {
    const admin = { as: "admin" as const };
    for (let round = 0; round < ROUNDS; round++) {
      const projectId = `rw-${round % 4}`;
      const item = `rw-item-${round}`;
      const added = await a.call(`/v1/key-parameters/${item}`, {
        ...admin,
        method: "PUT",
        body: JSON.stringify({ name: `Item ${round}`, description: "rw", dataType: "number", category: "well", objectTypes: ["well"] }),
      });
      expect(added.status, await added.clone().text()).toBe(201);
      // The new item is known to whichever process checks the project's values.
      const put = await a.call(`/v1/projects/${projectId}`, {
        ...admin,
        method: "PUT",
        body: JSON.stringify({ name: `round ${round}`, members: ["alpha"], values: { keyParameters: { [item]: round } } }),
      });
      expect(put.status, await put.clone().text()).toBeLessThan(300);
      const got = await json<Project>(await a.call(`/v1/projects/${projectId}`, admin));
      expect([got.name, got.values.keyParameters[item]]).toEqual([`round ${round}`, round]);
      expect((await a.call(`/v1/projects/${projectId}/members/m-${round}`, { ...admin, method: "PUT" })).status).toBe(204);
      expect((await json<Project>(await a.call(`/v1/projects/${projectId}`, admin))).members).toContain(`m-${round}`);
      const listed = await json<CatalogPage>(await a.call("/v1/key-parameters?category=well&limit=500", admin));
      expect(listed.items.map((i) => i.id)).toContain(item);
    }
  });

  it("content results: a member removed is refused the result read right after (which both processes had answered, from memory after the first)", async () => {
    const admin = { as: "admin" as const };
    const put = await a.call("/v1/projects/rw-content", {
      ...admin,
      method: "PUT",
      body: JSON.stringify({ name: "rw content", members: ["alpha"], values: { displayItems: { "well-name": "F-21" } } }),
    });
    expect(put.status, await put.clone().text()).toBeLessThan(300);
    const { taskId, contentId } = await requestContent(a, "rw-content", "display-items", { ids: ["well-name"] });
    await taskIn(a, "rw-content", taskId, { states: ["succeeded"] });
    const result = `/v1/projects/rw-content/display-items/content/${contentId}`;
    const member = "/v1/projects/rw-content/members/alpha";
    for (let round = 0; round < ROUNDS / 4; round++) {
      // Enough reads that each process answers some, and answers the later ones from memory.
      for (let read = 0; read < 6; read++) expect((await a.call(result)).status).toBe(200);
      expect((await a.call(member, { ...admin, method: "DELETE" })).status).toBe(204);
      for (let read = 0; read < 6; read++) expect((await a.call(result)).status).toBe(403);
      expect((await a.call(member, { ...admin, method: "PUT" })).status).toBe(204);
    }
    // Only this test reads results: each process must have answered some, or the rounds tell nothing of a second one.
    const served: number[] = [];
    for await (const instance of await new Svcm(a.nc).client({ strategy: "timer", maxWait: 500 }).stats(serviceName("projects"))) {
      served.push((instance.endpoints ?? []).filter((e) => e.subject.endsWith(".content.get")).reduce((sum, e) => sum + e.num_requests, 0));
    }
    expect(served).toHaveLength(2);
    for (const count of served) expect(count).toBeGreaterThan(10);
  });

  it.for(ACTORS)("%s: both processes answered requests (else the rounds above prove nothing about a second one)", async (actor) => {
    const answered: number[] = [];
    const stats = await new Svcm(a.nc).client({ strategy: "timer", maxWait: 500 }).stats(serviceName(actor));
    for await (const instance of stats) answered.push((instance.endpoints ?? []).reduce((sum, e) => sum + e.num_requests, 0));
    expect(answered).toHaveLength(2);
    for (const count of answered) expect(count).toBeGreaterThan(5);
  });
});
