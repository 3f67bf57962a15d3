import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { endKvWatches, eventually, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { SubscriptionCache, SubscriptionStore, type SubscriptionRecord } from "../../actors/notifications/store.ts";
import { createLogger } from "../../platform/logger.ts";

const TYPES = "/v1/notifications/subscriptions/types";
const LIST = "/v1/notifications/subscriptions";

describe("notifications subscriptions", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, {
      actors: ["system", "identity", "notifications"],
      env: { DERRICK_CALLBACK_ALLOW_HTTP: "true", DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32" },
    });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const post = (type: string, body: unknown, init: Parameters<TestDerrick["call"]>[1] = {}) =>
    derrick.call(`${TYPES}/${type}`, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), ...init });
  const base = { subscriber: "Rig ops", callback_uri: "https://hooks.example.com/derrick" };

  it("notifications - creating a subscription answers 200 with the full form", async () => {
    const res = await post("PlanShared", {
      ...base,
      contact_email: "ops@example.com",
      drill_plan_object_types: ["/well/api/wells", "reporting"],
    });
    expect(res.status).toBe(200);
    const sub = (await res.json()) as any;
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

  it("notifications - re-posting a type updates the same subscription", async () => {
    const first = (await (await post("ProjectCreated", base)).json()) as any;
    const res = await post("ProjectCreated", { ...base, subscriber: "Renamed", callback_uri: "https://other.example.com/h" });
    expect(res.status).toBe(200);
    const second = (await res.json()) as any;
    expect(second.subscription_id).toBe(first.subscription_id);
    expect(second).toMatchObject({ subscriber: "Renamed", callback_uri: "https://other.example.com/h" });
    const list = (await (await derrick.call(LIST)).json()) as any as Array<{ subscription_type: string }>;
    expect(list.filter((s) => s.subscription_type === "ProjectCreated")).toHaveLength(1);
  });

  it("notifications - concurrent first posts of one type converge on one subscription", async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post("MasterPlanChanged", { ...base, subscriber: `racer ${i}` })),
    );
    const ids = new Set(
      await Promise.all(answers.map(async (r) => (expect(r.status).toBe(200), ((await r.json()) as any).subscription_id))),
    );
    expect(ids.size).toBe(1);
    const list = (await (await derrick.call(LIST)).json()) as any as Array<{ subscription_type: string }>;
    expect(list.filter((s) => s.subscription_type === "MasterPlanChanged")).toHaveLength(1);
  });

  it("notifications - the seed's request media types are all accepted", async () => {
    for (const contentType of ["application/json", "text/json", "application/vnd.derrick+json", "application/json; charset=utf-8"]) {
      const res = await post("ReviewStateChanged", base, { headers: { "content-type": contentType } });
      expect(res.status, contentType).toBe(200);
    }
  });

  it("notifications - list holds only the caller's own subscriptions in the partition", async () => {
    const mine = (await (await post("PublishData", { ...base, data_source: "wells" })).json()) as any;
    const theirs = (await (await post("PublishData", base, { as: "beta" })).json()) as any;
    const other = (await (await post("PublishData", base, { partition: "other" })).json()) as any;
    const alpha = (await (await derrick.call(LIST)).json()) as any as Array<{ subscription_id: string; client_id: string }>;
    expect(alpha.map((s) => s.subscription_id)).toContain(mine.subscription_id);
    expect(alpha.map((s) => s.subscription_id)).not.toContain(theirs.subscription_id);
    expect(alpha.map((s) => s.subscription_id)).not.toContain(other.subscription_id);
    expect(alpha.every((s) => s.client_id === "alpha")).toBe(true);
    const beta = (await (await derrick.call(LIST, { as: "beta" })).json()) as any as Array<{ subscription_id: string }>;
    expect(beta.map((s) => s.subscription_id)).toEqual([theirs.subscription_id]);
  });

  it("notifications - delete answers 200 and another client's or an unknown id is 404", async () => {
    const theirs = (await (await post("PlanShared", base, { as: "beta" })).json()) as any;
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE" })).status).toBe(404);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta", partition: "other" })).status).toBe(
      404,
    );
    expect((await derrick.call(`${LIST}/sub_doesnotexist`, { method: "DELETE" })).status).toBe(404);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}/secret`)).status).toBe(404);
    const res = await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta" });
    expect(res.status).toBe(200);
    expect((await derrick.call(`${LIST}/${theirs.subscription_id}`, { method: "DELETE", as: "beta" })).status).toBe(404);
    const beta = (await (await derrick.call(LIST, { as: "beta" })).json()) as any as Array<{ subscription_id: string }>;
    expect(beta.map((s) => s.subscription_id)).not.toContain(theirs.subscription_id);
  });

  it("notifications - credentials and the partition header are required", async () => {
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
    it(`notifications - ${what} is refused with 400 naming ${pointer}`, async () => {
      const res = await post(type, body);
      expect(res.status).toBe(400);
      const problem = (await res.json()) as any;
      expect(problem.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer);
    });
  }

  it("notifications - a callback is stored and returned in the canonical form it is called with", async () => {
    const res = await post("PlanShared", { ...base, callback_uri: "HTTPS://Hooks.Example.COM:443" });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).callback_uri).toBe("https://hooks.example.com/");
    const listed = (await (await derrick.call(LIST)).json()) as any as Array<{ subscription_type: string; callback_uri: string }>;
    expect(listed.find((s) => s.subscription_type === "PlanShared")?.callback_uri).toBe("https://hooks.example.com/");
  });

  it("notifications - an unknown object type is named in the message", async () => {
    const problem = (await (await post("PlanShared", { ...base, drill_plan_object_types: ["/nope/api/x"] })).json()) as any;
    expect(problem.detail).toContain("/nope/api/x");
  });

  it("notifications - the seed's thermal object type is accepted literally", async () => {
    expect((await post("PlanShared", { ...base, drill_plan_object_types: ["/<simulator>-thermal/<simulator>-thermals"] })).status).toBe(
      200,
    );
  });

  it("notifications - callbacks to private, link-local, CGNAT, metadata and multicast addresses are refused (SSRF)", async () => {
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
      const res = await post("PlanShared", { ...base, callback_uri: uri });
      expect(res.status, uri).toBe(400);
      expect(((await res.json()) as any).errors[0].pointer).toBe("/body/callback_uri");
    }
  });

  it("notifications - the subscription copy opens its watch again when it ends, also one that ended while the bucket was empty: freshAsOf then finds what was written afterwards", async () => {
    const nc = await connect({ servers: nats.url });
    try {
      // A bucket of its own, empty when the copy starts (the case where nats.js gives a watch up).
      const store = new SubscriptionStore(await new Kvm(nc).create("subscriptions_rewatch", { history: 1 }));
      const cache = new SubscriptionCache(store, createLogger("silent"));
      await cache.start();
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
      try {
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
      } finally {
        await cache.stop();
      }
    } finally {
      await nc.close();
    }
  });
  it("notifications - the subscription copy starts over when its bucket is deleted and made again: subscriptions only the old bucket held go, the new bucket's arrive", async () => {
    const nc = await connect({ servers: nats.url });
    try {
      const kvm = new Kvm(nc);
      const store = new SubscriptionStore(await kvm.create("subscriptions_again", { history: 1 }));
      const cache = new SubscriptionCache(store, createLogger("silent"), { checkEveryMs: 200 });
      await cache.start();
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
      try {
        for (const id of ["old-1", "old-2"]) expect(await store.create(record(id))).toBe(true);
        await cache.freshAsOf(Date.now());
        expect(subscribers()).toEqual(["old-1", "old-2"]);
        expect(await (await jetstreamManager(nc)).streams.delete("KV_subscriptions_again")).toBe(true);
        const again = new SubscriptionStore(await kvm.create("subscriptions_again", { history: 1 }));
        expect(await again.create(record("new-1"))).toBe(true);
        await eventually(() => subscribers().join() === "new-1", { what: "the copy of the new bucket alone" });
      } finally {
        await cache.stop();
      }
    } finally {
      await nc.close();
    }
  });

  it("notifications - freshAsOf after the bucket was made again without the copy hearing it (an advisory missed) starts the copy over at once instead of failing until the next check", async () => {
    const nc = await connect({ servers: nats.url });
    try {
      const kvm = new Kvm(nc);
      // No connection given: the watch hears no deletion advisory, as when one was missed.
      const store = new SubscriptionStore(await kvm.create("subscriptions_unheard", { history: 1 }));
      const cache = new SubscriptionCache(store, createLogger("silent"));
      await cache.start();
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
      try {
        expect(await store.create(record("old-1"))).toBe(true);
        await cache.freshAsOf(Date.now());
        expect(await (await jetstreamManager(nc)).streams.delete("KV_subscriptions_unheard")).toBe(true);
        const again = new SubscriptionStore(await kvm.create("subscriptions_unheard", { history: 1 }));
        expect(await again.create(record("new-1"))).toBe(true);
        await cache.freshAsOf(Date.now(), 3_000);
        expect(subscribers()).toEqual(["new-1"]);
      } finally {
        await cache.stop();
      }
    } finally {
      await nc.close();
    }
  });
});
