/** The request and response media types of the subscription operations. */
import { describe, expect } from "vitest";
import { derrickTest } from "../harness/fixture.ts";
import { getJson, json } from "../harness/json.ts";
import type { Subscription } from "../../subjects/notifications.ts";
import { openApiDocument } from "../harness/openapi.ts";

const TYPES = "/v1/notifications/subscriptions/types";
const LIST = "/v1/notifications/subscriptions";

const it = derrickTest({ actors: ["system", "identity", "notifications"] });

describe("notifications media types", () => {
  it.beforeAll(async ({ derrick }) => {
    await getJson(derrick, `${TYPES}/PlanShared`, {
      method: "POST",
      body: JSON.stringify({ subscriber: "Rig ops", callback_uri: "https://hooks.example.com/derrick" }),
    });
  });

  it("notifications - the list answers in the media type asked for: text/plain, application/json or text/json", async ({ derrick }) => {
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
      const list = await json<Subscription[]>(res);
      expect(
        list.map((s) => s.subscription_type),
        accept,
      ).toEqual(["PlanShared"]);
    }
    const none = await derrick.call(LIST);
    expect(none.headers.get("content-type")?.split(";")[0]).toBe("application/json");
  });

  it("notifications - /openapi.json lists the media types of the upsert body and the list response", async ({ derrick }) => {
    const doc = await openApiDocument(derrick.url);
    const upsert = doc.paths["/v1/notifications/subscriptions/types/{subscritpionType}"]!.post!;
    // Concrete media types (a generator cannot send a pattern); the description says any +json type is read too.
    expect(Object.keys(upsert.requestBody!.content).sort()).toEqual(["application/cloudevents+json", "application/json", "text/json"]);
    expect(upsert.requestBody!.description).toMatch(/application\/<subtype>\+json/);
    expect(upsert.requestBody!.content["text/json"]!.schema!.required).toEqual(["subscriber", "callback_uri"]);
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
