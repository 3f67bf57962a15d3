import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";

const TYPES = "/v1/notifications/subscriptions/types";
const LIST = "/v1/notifications/subscriptions";

/** Seed document 1 §4.1/§4.2: the request and response media types of the subscription operations. */
describe("notifications media types", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["system", "identity", "notifications"] });
    const res = await derrick.call(`${TYPES}/PlanShared`, {
      method: "POST",
      body: JSON.stringify({ subscriber: "Rig ops", callback_uri: "https://hooks.example.com/derrick" }),
    });
    expect(res.status).toBe(200);
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("notifications - the list answers in the media type asked for: text/plain, application/json or text/json", async () => {
    for (const [accept, type] of [
      ["text/json", "text/json"],
      ["text/plain", "text/plain"],
      ["application/json", "application/json"],
      ["text/json;q=0.5, text/plain", "text/plain"],
      ["*/*", "application/json"],
      ["text/html, */*;q=0.1", "application/json"],
    ] as const) {
      const res = await derrick.call(LIST, { headers: { accept } });
      expect(res.status, accept).toBe(200);
      expect(res.headers.get("content-type")?.split(";")[0], accept).toBe(type);
      const list = JSON.parse(await res.text()) as Array<{ subscription_type: string }>;
      expect(
        list.map((s) => s.subscription_type),
        accept,
      ).toEqual(["PlanShared"]);
    }
    const none = await derrick.call(LIST);
    expect(none.headers.get("content-type")?.split(";")[0]).toBe("application/json");
  });

  it("notifications - /openapi.json lists the seed's media types of the upsert body and the list response", async () => {
    const doc = (await (await fetch(`${derrick.url}/openapi.json`)).json()) as {
      paths: Record<
        string,
        Record<
          string,
          {
            requestBody?: { content: Record<string, unknown>; required?: boolean };
            responses: Record<string, { content?: Record<string, unknown> }>;
          }
        >
      >;
    };
    const upsert = doc.paths["/v1/notifications/subscriptions/types/{subscritpionType}"]!.post!;
    // Concrete media types (a generator cannot send a pattern); the description says any +json type is read too.
    expect(Object.keys(upsert.requestBody!.content).sort()).toEqual(["application/cloudevents+json", "application/json", "text/json"]);
    expect((upsert.requestBody as { description?: string }).description).toMatch(/application\/<subtype>\+json/);
    expect((upsert.requestBody!.content["text/json"] as { schema: { required: string[] } }).schema.required).toEqual([
      "subscriber",
      "callback_uri",
    ]);
    // A body the route may go without is documented as optional (content requests: absent = every item).
    expect(doc.paths["/v1/projects/{projectId}/display-items/content/requests"]!.post!.requestBody).toMatchObject({ required: false });
    expect(upsert.requestBody).toMatchObject({ required: true });
    // Every documented request body names its media types and schema (they used to come out empty).
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops))
        if (op.requestBody) expect(Object.keys(op.requestBody.content).length, `${method} ${path}`).toBeGreaterThan(0);
    }
    const list = doc.paths["/v1/notifications/subscriptions"]!.get!;
    expect(Object.keys(list.responses["200"]!.content!).sort()).toEqual(["application/json", "text/json", "text/plain"]);
    expect(JSON.stringify(doc)).not.toContain("x-derrick-");
  });
});
