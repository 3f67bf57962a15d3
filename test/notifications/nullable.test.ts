import { describe, expect } from "vitest";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { Subscription } from "../../subjects/notifications.ts";

const TYPES = "/v1/notifications/subscriptions/types";
const LIST = "/v1/notifications/subscriptions";

const it = derrickTest({ actors: ["system", "identity", "notifications"] });

/** data_source, callback_headers, drill_plan_object_types and contact_email are nullable; subscriber and callback_uri are not. */
describe("notifications nullable fields", () => {
  it("notifications - explicit nulls in the base form are accepted on every type and read back as null", async ({ derrick }) => {
    const base = {
      subscriber: "Rig ops",
      callback_uri: "https://hooks.example.com/derrick",
      data_source: null,
      callback_headers: null,
      drill_plan_object_types: null,
      contact_email: null,
    };
    for (const type of ["PublishData", "ReviewStateChanged", "PlanShared", "ProjectCreated", "MasterPlanChanged"]) {
      const res = await derrick.call(`${TYPES}/${type}`, { method: "POST", body: JSON.stringify(base) });
      expect(res.status, type).toBe(200);
      expect(await res.json(), type).toMatchObject({ ...base, subscription_type: type });
    }
    const list = await json<Subscription[]>(await derrick.call(LIST));
    expect(list).toHaveLength(5);
    for (const sub of list)
      expect(sub).toMatchObject({ data_source: null, callback_headers: null, drill_plan_object_types: null, contact_email: null });
    // Setting a field and then null again clears it.
    const set = await derrick.call(`${TYPES}/PublishData`, {
      method: "POST",
      body: JSON.stringify({
        ...base,
        data_source: "wells",
        contact_email: "ops@example.com",
        drill_plan_object_types: ["reporting"],
        callback_headers: { appkey: "k" },
      }),
    });
    expect(await set.json()).toMatchObject({ data_source: "wells", contact_email: "ops@example.com" });
    const cleared = await derrick.call(`${TYPES}/PublishData`, { method: "POST", body: JSON.stringify(base) });
    expect(await cleared.json()).toMatchObject({
      data_source: null,
      callback_headers: null,
      drill_plan_object_types: null,
      contact_email: null,
    });
  });

  it("notifications - subscriber and callback_uri are not nullable", async ({ derrick }) => {
    for (const body of [
      { subscriber: null, callback_uri: "https://hooks.example.com/derrick" },
      { subscriber: "x", callback_uri: null },
    ]) {
      expect((await derrick.call(`${TYPES}/PlanShared`, { method: "POST", body: JSON.stringify(body) })).status).toBe(400);
    }
  });
});
