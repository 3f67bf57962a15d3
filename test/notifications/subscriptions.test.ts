import { describe, expect, onTestFinished } from "vitest";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { endKvWatches, eventually, type TestDerrick, type TestNats } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem, json } from "../harness/json.ts";
import { SubscriptionCache, SubscriptionStore, type SubscriptionRecord } from "../../actors/notifications/store.ts";
import type { Subscription } from "../../subjects/notifications.ts";
import { createLogger } from "../../platform/logger.ts";

const TYPES = "/v1/notifications/subscriptions/types";
const LIST = "/v1/notifications/subscriptions";

const it = derrickTest({
  actors: ["system", "identity", "notifications"],
  env: { DERRICK_CALLBACK_ALLOW_HTTP: "true", DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32" },
});

const base = { subscriber: "Rig ops", callback_uri: "https://hooks.example.com/derrick" };
const post = (derrick: TestDerrick, type: string, body: unknown, init: Parameters<TestDerrick["call"]>[1] = {}) =>
  derrick.call(`${TYPES}/${type}`, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), ...init });
const list = async (derrick: TestDerrick, init: Parameters<TestDerrick["call"]>[1] = {}) =>
  json<Subscription[]>(await derrick.call(LIST, init));

/**
 * The dispatcher's copy of a subscriptions bucket of its own, on a connection of its own (endKvWatches
 * ends every watch of a connection); both closed when the test ends.
 */
async function subscriptionCopy(nats: TestNats, bucket: string, options: { checkEveryMs?: number } = {}) {
  const nc = await connect({ servers: nats.url });
  const kvm = new Kvm(nc);
  const store = new SubscriptionStore(await kvm.create(bucket, { history: 1 }));
  const cache = new SubscriptionCache(store, createLogger("silent"), options);
  await cache.start();
  onTestFinished(async () => {
    await cache.stop();
    await nc.close();
  });
  const record = (id: string) =>
    ({
      ...base,
      subscription_id: id,
      subscription_type: "PlanShared",
      partition: "opendes",
      client_id: `client-${id}`,
      created_at: new Date().toISOString(),
      secret: "s",
    }) as unknown as SubscriptionRecord;
  const subscribers = () => [...cache.subscribersOf("opendes", "PlanShared")].map((s) => s.subscription_id).sort();
  return { nc, kvm, store, cache, record, subscribers };
}

describe("notifications subscriptions", () => {
  it("notifications - creating a subscription answers 200 with the full form", async ({ derrick }) => {
    const res = await post(derrick, "PlanShared", {
      ...base,
      contact_email: "ops@example.com",
      drill_plan_object_types: ["/well/api/wells", "reporting"],
    });
    expect(res.status).toBe(200);
    const sub = await json<Subscription>(res);
    expect(sub).toMatchObject({
      ...base,
      subscription_type: "PlanShared",
      client_id: "alpha",
      contact_email: "ops@example.com",
      data_source: null,
    });
    expect(sub.subscription_id).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Date.parse(sub.updated_at)).not.toBeNaN();
  });

  it("notifications - re-posting a type updates the same subscription", async ({ derrick }) => {
    const first = await json<Subscription>(await post(derrick, "ProjectCreated", base));
    const res = await post(derrick, "ProjectCreated", { ...base, subscriber: "Renamed", callback_uri: "https://other.example.com/h" });
    expect(res.status).toBe(200);
    const second = await json<Subscription>(res);
    expect(second.subscription_id).toBe(first.subscription_id);
    expect(second).toMatchObject({ subscriber: "Renamed", callback_uri: "https://other.example.com/h" });
    expect((await list(derrick)).filter((s) => s.subscription_type === "ProjectCreated")).toHaveLength(1);
  });

  it("notifications - concurrent first posts of one type converge on one subscription", async ({ derrick }) => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post(derrick, "MasterPlanChanged", { ...base, subscriber: `racer ${i}` })),
    );
    const ids = new Set(
      await Promise.all(answers.map(async (r) => (expect(r.status).toBe(200), (await json<Subscription>(r)).subscription_id))),
    );
    expect(ids.size).toBe(1);
    expect((await list(derrick)).filter((s) => s.subscription_type === "MasterPlanChanged")).toHaveLength(1);
  });

  it("notifications - the API's request media types (application/json, text/json, application/*+json) are all accepted", async ({
    derrick,
  }) => {
    for (const contentType of ["application/json", "text/json", "application/vnd.derrick+json", "application/json; charset=utf-8"]) {
      const res = await post(derrick, "ReviewStateChanged", base, { headers: { "content-type": contentType } });
      expect(res.status, contentType).toBe(200);
    }
  });

  it("notifications - list holds only the caller's own subscriptions in the partition", async ({ derrick }) => {
    const mine = await json<Subscription>(await post(derrick, "PublishData", { ...base, data_source: "wells" }));
    const theirs = await json<Subscription>(await post(derrick, "PublishData", base, { as: "beta" }));
    const other = await json<Subscription>(await post(derrick, "PublishData", base, { partition: "other" }));
    const alpha = await list(derrick);
    expect(alpha.map((s) => s.subscription_id)).toContain(mine.subscription_id);
    expect(alpha.map((s) => s.subscription_id)).not.toContain(theirs.subscription_id);
    expect(alpha.map((s) => s.subscription_id)).not.toContain(other.subscription_id);
    expect(alpha.every((s) => s.client_id === "alpha")).toBe(true);
    const beta = await list(derrick, { as: "beta" });
    expect(beta.map((s) => s.subscription_id)).toEqual([theirs.subscription_id]);
  });

  it("notifications - delete answers 200 and another client's or an unknown id is 404", async ({ derrick }) => {
    const theirs = await json<Subscription>(await post(derrick, "PlanShared", base, { as: "beta" }));
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE" })).status).toBe(404);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta", partition: "other" })).status).toBe(
      404,
    );
    expect((await derrick.call(`${LIST}/sub_doesnotexist`, { method: "DELETE" })).status).toBe(404);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}/secret`)).status).toBe(404);
    const res = await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta" });
    expect(res.status).toBe(200);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta" })).status).toBe(404);
    const beta = await list(derrick, { as: "beta" });
    expect(beta.map((s) => s.subscription_id)).not.toContain(theirs.subscription_id);
  });

  it("notifications - credentials and the partition header are required", async ({ derrick }) => {
    expect((await derrick.call(LIST, { as: null })).status).toBe(401);
    expect((await derrick.call(LIST, { headers: { appkey: "wrong-appkey-123" } })).status).toBe(401);
    expect((await derrick.call(LIST, { partition: null })).status).toBe(400);
    expect((await derrick.call(LIST, { partition: "unknown" })).status).toBe(403);
  });

  const rejects: Array<[string, string, unknown, string]> = [
    ["an unknown field", "PlanShared", { ...base, subscription_id: "x" }, "/body/subscription_id"],
    ["a missing subscriber", "PlanShared", { callback_uri: base.callback_uri }, "/body/subscriber"],
    ["a relative callback", "PlanShared", { ...base, callback_uri: "/hooks" }, "/body/callback_uri"],
    ["a non-http callback", "PlanShared", { ...base, callback_uri: "ftp://example.com/x" }, "/body/callback_uri"],
    ["a bad email", "PlanShared", { ...base, contact_email: "not-an-email" }, "/body/contact_email"],
    [
      "an unknown object type",
      "PlanShared",
      { ...base, drill_plan_object_types: ["/well/api/wells", "/nope/api/x"] },
      "/body/drill_plan_object_types/1",
    ],
    ["data_source on another type", "PlanShared", { ...base, data_source: "wells" }, "/body/data_source"],
    [
      "a reserved callback header",
      "PlanShared",
      { ...base, callback_headers: { "Webhook-Signature": "x" } },
      "/body/callback_headers/Webhook-Signature",
    ],
    [
      "content-type as a callback header",
      "PlanShared",
      { ...base, callback_headers: { "Content-Type": "text/plain" } },
      "/body/callback_headers/Content-Type",
    ],
    ["an invalid header name", "PlanShared", { ...base, callback_headers: { "bad header": "x" } }, "/body/callback_headers/bad header"],
    [
      "a header value with CR/LF",
      "PlanShared",
      { ...base, callback_headers: { authorization: "a\r\nx-injected: 1" } },
      "/body/callback_headers/authorization",
    ],
    [
      "a header value beyond Latin-1, which fetch cannot send",
      "PlanShared",
      { ...base, callback_headers: { "x-tenant": "Zürich-€" } },
      "/body/callback_headers/x-tenant",
    ],
    [
      "a header value with a control character",
      "PlanShared",
      { ...base, callback_headers: { "x-tenant": "a\u0001b" } },
      "/body/callback_headers/x-tenant",
    ],
    [
      "a header value with surrounding spaces",
      "PlanShared",
      { ...base, callback_headers: { "x-tenant": " a" } },
      "/body/callback_headers/x-tenant",
    ],
    [
      "the same header twice in different case",
      "PlanShared",
      { ...base, callback_headers: { "X-Tenant": "a", "x-tenant": "b" } },
      "/body/callback_headers/x-tenant",
    ],
    ["a too long subscriber", "PlanShared", { ...base, subscriber: "x".repeat(300) }, "/body/subscriber"],
    ["a subscriber of whitespace only", "PlanShared", { ...base, subscriber: " \t " }, "/body/subscriber"],
    [
      "a callback without a host before its path (http:///h, which the URL parser reads as host h)",
      "PlanShared",
      { ...base, callback_uri: "http:///h" },
      "/body/callback_uri",
    ],
    [
      "a callback written with backslashes (https:\\host\\h)",
      "PlanShared",
      { ...base, callback_uri: "https:\\hooks.example.com\\h" },
      "/body/callback_uri",
    ],
    [
      "a callback without slashes after the scheme",
      "PlanShared",
      { ...base, callback_uri: "https:hooks.example.com/h" },
      "/body/callback_uri",
    ],
    [
      "a callback with surrounding whitespace",
      "PlanShared",
      { ...base, callback_uri: " https://hooks.example.com/h" },
      "/body/callback_uri",
    ],
    ["a callback to port 0", "PlanShared", { ...base, callback_uri: "https://hooks.example.com:0/h" }, "/body/callback_uri"],
    ["an unknown type in the path", "Unknown", base, "/params/subscritpionType"],
  ];
  for (const [what, type, body, pointer] of rejects) {
    it(`notifications - ${what} is refused with 400 naming ${pointer}`, async ({ derrick }) => {
      const problem = await expectProblem(await post(derrick, type, body), 400);
      expect(problem.errors!.map((e) => e.pointer)).toContain(pointer);
    });
  }

  it("notifications - a callback is stored and returned in the canonical form it is called with", async ({ derrick }) => {
    const res = await post(derrick, "PlanShared", { ...base, callback_uri: "HTTPS://Hooks.Example.COM:443" });
    expect(res.status).toBe(200);
    expect((await json<Subscription>(res)).callback_uri).toBe("https://hooks.example.com/");
    const listed = await list(derrick);
    expect(listed.find((s) => s.subscription_type === "PlanShared")?.callback_uri).toBe("https://hooks.example.com/");
  });

  it("notifications - an unknown object type is named in the message", async ({ derrick }) => {
    const problem = await expectProblem(await post(derrick, "PlanShared", { ...base, drill_plan_object_types: ["/nope/api/x"] }), 400);
    expect(problem.detail).toContain("/nope/api/x");
  });

  it("notifications - the thermal object type of the supported list is accepted literally", async ({ derrick }) => {
    expect(
      (await post(derrick, "PlanShared", { ...base, drill_plan_object_types: ["/<simulator>-thermal/<simulator>-thermals"] })).status,
    ).toBe(200);
  });

  it("notifications - callbacks to private, link-local, CGNAT, metadata and multicast addresses are refused (SSRF)", async ({
    derrick,
  }) => {
    for (const uri of [
      "https://10.1.2.3/h",
      "https://172.16.0.9/h",
      "https://192.168.1.1/h",
      "https://169.254.169.254/latest/meta-data",
      "https://100.64.0.1/h",
      "https://224.0.0.1/h",
      "https://127.0.0.2/h",
      "https://[::1]/h",
      "https://[fd00::1]/h",
      "https://[::ffff:10.0.0.1]/h",
      "https://user:pw@hooks.example.com/h",
    ]) {
      const res = await post(derrick, "PlanShared", { ...base, callback_uri: uri });
      expect(res.status, uri).toBe(400);
      expect((await expectProblem(res, 400)).errors![0]!.pointer).toBe("/body/callback_uri");
    }
  });

  it("notifications - the subscription copy opens its watch again when it ends, also one that ended while the bucket was empty: freshAsOf then finds what was written afterwards", async ({
    nats,
  }) => {
    // A bucket of its own, empty when the copy starts (the case where nats.js gives a watch up).
    const { nc, store, cache, record, subscribers } = await subscriptionCopy(nats, "subscriptions_rewatch");
    expect(endKvWatches(nc)).toBe(1);
    expect(await store.create(record("first"))).toBe(true);
    await cache.freshAsOf(Date.now());
    expect(subscribers()).toEqual(["first"]);
    // Ended again after it had delivered entries: it resumes after the last one.
    expect(endKvWatches(nc)).toBe(1);
    expect(await store.create(record("second"))).toBe(true);
    await store.remove(record("first"));
    await cache.freshAsOf(Date.now());
    expect(subscribers()).toEqual(["second"]);
  });
  it("notifications - the subscription copy starts over when its bucket is deleted and made again: subscriptions only the old bucket held go, the new bucket's arrive", async ({
    nats,
  }) => {
    const { nc, kvm, store, cache, record, subscribers } = await subscriptionCopy(nats, "subscriptions_again", { checkEveryMs: 200 });
    for (const id of ["old-1", "old-2"]) expect(await store.create(record(id))).toBe(true);
    await cache.freshAsOf(Date.now());
    expect(subscribers()).toEqual(["old-1", "old-2"]);
    expect(await (await jetstreamManager(nc)).streams.delete("KV_subscriptions_again")).toBe(true);
    const again = new SubscriptionStore(await kvm.create("subscriptions_again", { history: 1 }));
    expect(await again.create(record("new-1"))).toBe(true);
    await eventually(() => subscribers().join() === "new-1", { what: "the copy of the new bucket alone" });
  });

  it("notifications - freshAsOf after the bucket was made again without the copy hearing it (an advisory missed) starts the copy over at once instead of failing until the next check", async ({
    nats,
  }) => {
    // No connection given: the watch hears no deletion advisory, as when one was missed.
    const { nc, kvm, store, cache, record, subscribers } = await subscriptionCopy(nats, "subscriptions_unheard");
    expect(await store.create(record("old-1"))).toBe(true);
    await cache.freshAsOf(Date.now());
    expect(await (await jetstreamManager(nc)).streams.delete("KV_subscriptions_unheard")).toBe(true);
    const again = new SubscriptionStore(await kvm.create("subscriptions_unheard", { history: 1 }));
    expect(await again.create(record("new-1"))).toBe(true);
    await cache.freshAsOf(Date.now(), 3_000);
    expect(subscribers()).toEqual(["new-1"]);
  });
});
