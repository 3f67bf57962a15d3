import { describe, expect } from "vitest";
import { Webhook } from "standardwebhooks";
import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { eventually } from "../harness/index.ts";
import { expectProblem, getJson, json } from "../harness/json.ts";
import { subjects } from "../../subjects/index.ts";
import type { EventAccepted, SecretReply } from "../../subjects/notifications.ts";
import { deliveries, deliveriesOnce, deliveryTest, publish, publishOnNats, publishedId, remove, subscribe, type Json } from "./helpers.ts";

const it = deliveryTest();

describe("notifications delivery", () => {
  it("notifications - an event is delivered as a signed CloudEvent that standardwebhooks verifies", async ({ derrick, receiver: r }) => {
    const sub = await subscribe(derrick, "PlanShared", {
      callback_uri: `${r.url}/hook`,
      callback_headers: { Authorization: "Bearer receiver-token", appkey: "k-1", "x-site": "Zürich" },
    });
    const { key: secret } = await getJson<SecretReply>(derrick, `/v1/notifications/subscriptions/${sub.subscription_id}/secret`);
    expect(secret).toMatch(/^whsec_/);
    const res = await publish(derrick, "PlanShared", { object_type: "/well/api/wells", data: { plan: 7 } });
    expect(res.status).toBe(202);
    const { event_id } = await json<EventAccepted>(res);
    const got = await eventually(() => r.received.find((x) => x.id === event_id), { what: "delivery" });
    expect(got.headers["content-type"]).toBe("application/cloudevents+json");
    expect(got.headers.authorization).toBe("Bearer receiver-token");
    expect(got.headers.appkey).toBe("k-1");
    expect(got.headers["x-site"]).toBe("Zürich"); // Latin-1 travels as is
    const payload = new Webhook(secret).verify(got.body, got.headers) as Json;
    expect(payload).toMatchObject({
      specversion: "1.0",
      id: event_id,
      source: "/partitions/opendes",
      type: "PlanShared",
      subject: "/well/api/wells",
      partitionid: "opendes",
      data: { plan: 7 },
    });
    expect(Date.parse(payload.time)).not.toBeNaN();
    await eventually(
      async () => (await deliveries(derrick, sub.subscription_id)).find((d) => d.event_id === event_id && d.state === "succeeded"),
      { what: "attempt log" },
    );
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - events reach only subscriptions of their partition, type and filters", async ({ derrick, receivers }) => {
    const [a, b, c, d] = [receivers.start(), receivers.start(), receivers.start(), receivers.start()];
    const wells = await subscribe(derrick, "PublishData", { callback_uri: a.url, data_source: "wells" });
    const any = await subscribe(derrick, "PublishData", { callback_uri: b.url }, "beta");
    const other = await subscribe(derrick, "PublishData", { callback_uri: c.url }, "alpha", "other");
    const zones = await subscribe(derrick, "PublishData", { callback_uri: d.url, drill_plan_object_types: ["/zone/api/zones"] }, "admin");
    const id = async (res: Response) => (await json<EventAccepted>(res)).event_id;
    const e1 = await id(await publish(derrick, "PublishData", { data_source: "wells", object_type: "/zone/api/zones", data: 1 }));
    const e2 = await id(await publish(derrick, "PublishData", { data_source: "rigs", data: 2 }));
    const e3 = await id(await publish(derrick, "PublishData", { data: 3 }, "other"));
    const e4 = await id(await publish(derrick, "PlanShared", { data: 4 }));
    await eventually(() => b.received.length >= 2 && c.received.length >= 1 && a.received.length >= 1 && d.received.length >= 1, {
      what: "deliveries",
    });
    // A later marker event proves nothing else is still on its way to the others.
    const marker = await id(
      await publish(derrick, "PublishData", { data_source: "wells", object_type: "/zone/api/zones", data: "marker" }),
    );
    await eventually(
      () => a.received.some((x) => x.id === marker) && d.received.some((x) => x.id === marker) && b.received.some((x) => x.id === marker),
    );
    expect(a.received.map((x) => x.id)).toEqual([e1, marker]);
    expect(b.received.map((x) => x.id).sort()).toEqual([e1, e2, marker].sort());
    expect(c.received.map((x) => x.id)).toEqual([e3]);
    expect(d.received.map((x) => x.id)).toEqual([e1, marker]);
    expect([a, b, c, d].some((r) => r.received.some((x) => x.id === e4))).toBe(false);
    await Promise.all([
      remove(derrick, wells.subscription_id),
      remove(derrick, any.subscription_id, "beta"),
      remove(derrick, other.subscription_id, "alpha", "other"),
      remove(derrick, zones.subscription_id, "admin"),
    ]);
  });

  it("notifications - an event published on NATS is delivered too", async ({ derrick, receiver: r }) => {
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url });
    const h = natsHeaders();
    h.set("Nats-Msg-Id", "nats-event-1");
    await jetstream(derrick.nc).publish(subjects.events("opendes", "ProjectCreated"), JSON.stringify({ data: { project: "p1" } }), {
      headers: h,
    });
    const got = await eventually(() => r.received[0], { what: "delivery" });
    expect(got.id).toBe("nats-event-1");
    expect(JSON.parse(got.body).data).toEqual({ project: "p1" });
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - an event published on NATS that the HTTP door would refuse (wrong field types, extra fields, too large) is skipped and counted, and the events after it are delivered", async ({
    derrick,
    receiver: r,
  }) => {
    const sub = await subscribe(derrick, "PublishData", { callback_uri: r.url }, "beta");
    const statsOf = async () => (await derrick.nc.request(subjects.notifications["dispatcher.stats"](), "{}")).json<Json>();
    const droppedBefore = (await statsOf()).dropped as number;
    const invalid = [
      { object_type: 7, data: 1 },
      { data_source: { name: "wells" }, data: 2 },
      { object_type: "", data: 3 },
      { object_type: "/well/api/wells", data: 4, extra: true },
      { data_source: "x".repeat(300), data: 5 },
      { object_type: null },
      { data: "y".repeat(256 * 1024) },
    ];
    const invalidSeqs = [];
    for (const event of invalid) invalidSeqs.push(await publishOnNats(derrick, "PublishData", event));
    const marker = await publishOnNats(derrick, "PublishData", { object_type: "/well/api/wells", data_source: "wells", data: "valid" });
    await eventually(() => r.received.some((x) => x.id === `evt_${marker}`), { what: "the valid event after the invalid ones" });
    expect(r.received.map((x) => x.id)).toEqual([`evt_${marker}`]);
    expect(JSON.parse(r.received[0]!.body)).toMatchObject({ subject: "/well/api/wells", datasource: "wells", data: "valid" });
    expect((await statsOf()).dropped - droppedBefore).toBe(invalidSeqs.length);
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - a Nats-Msg-Id with a dot is not used as the event id: webhook-id must not contain one", async ({
    derrick,
    receiver: r,
  }) => {
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url }, "beta");
    const seq = await publishOnNats(derrick, "ProjectCreated", { data: "dotted" }, "order.42");
    const got = await eventually(() => r.received[0], { what: "delivery" });
    expect(got.id).toBe(`evt_${seq}`);
    expect(JSON.parse(got.body).id).toBe(`evt_${seq}`);
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - small events that grow when re-serialized (1e20 is written out as 21 digits) are still delivered", async ({
    derrick,
    receiver: r,
  }) => {
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url }, "admin");
    // ~4 KB on NATS, carried in the batch as ~17 KB each: eight of them exceed DELIVERIES' 64 KiB message limit together.
    const payload = `{"data":[${Array(790).fill("1e20").join(",")}]}`;
    expect(payload.length).toBeLessThan(4096);
    const h = natsHeaders();
    const js = jetstream(derrick.nc);
    const seqs = await Promise.all(
      Array.from({ length: 8 }, () => js.publish(subjects.events("opendes", "ProjectCreated"), payload, { headers: h }).then((a) => a.seq)),
    );
    await eventually(() => r.received.length >= 8, { what: "eight deliveries", timeoutMs: 8_000 });
    expect(new Set(r.received.map((x) => x.id))).toEqual(new Set(seqs.map((s) => `evt_${s}`)));
    expect(JSON.parse(r.received[0]!.body).data).toHaveLength(790);
    await remove(derrick, sub.subscription_id, "admin");
  });

  it("notifications - a burst of large events does not stay in the deliverer's memory after it is delivered", {
    timeout: 60_000,
  }, async ({ derrick, receiver: r }) => {
    let delivered = 0;
    r.respond = (req) => {
      delivered++;
      req.body = ""; // the receiver runs in this process: it must not hold the bodies either
      return new Response(null, { status: 204 });
    };
    const sub = await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url }, "admin");
    await derrick.token("alpha"); // fetched once, not by 25 requests at once
    const heap = () => (Bun.gc(true), process.memoryUsage().heapUsed);
    const before = heap();
    // 500 events of 200 KB (100 MB): read from EVENTS one by one, as events over 4 KiB are.
    for (let i = 0; i < 500; i += 25) {
      await Promise.all(
        Array.from({ length: 25 }, (_, j) => publish(derrick, "MasterPlanChanged", { data: String(i + j).padEnd(200_000, "x") })),
      );
    }
    await eventually(() => delivered >= 500, { what: "500 deliveries", timeoutMs: 45_000 });
    // The caches kept each event and its body (2048 of each): about 200 MB retained here.
    expect((heap() - before) / 1e6).toBeLessThan(100);
    await remove(derrick, sub.subscription_id, "admin");
  });

  it("notifications - publishing needs notifications.publishers, a data member and at most 256 KiB", async ({ derrick }) => {
    expect((await publish(derrick, "PlanShared", { data: 1 }, "opendes", "beta")).status).toBe(403);
    expect((await publish(derrick, "PlanShared", { object_type: "x" })).status).toBe(400);
    expect((await publish(derrick, "PlanShared", { data: 1, extra: true })).status).toBe(400);
    const misplaced = await publish(derrick, "ReviewStateChanged", { data: 1, data_source: "wells" });
    expect((await expectProblem(misplaced, 400)).errors).toEqual([
      { pointer: "/body/data_source", message: "applies only to PublishData events; send null or omit it for ReviewStateChanged" },
    ]);
    expect((await publish(derrick, "ReviewStateChanged", { data: 1, data_source: null })).status).toBe(202);
    expect((await publish(derrick, "Nope", { data: 1 })).status).toBe(400);
    expect((await publish(derrick, "PlanShared", { data: "x".repeat(256 * 1024) })).status).toBe(413);
    expect(
      (await derrick.call("/v1/notifications/events/PlanShared", { method: "POST", body: JSON.stringify({ data: 1 }), as: null })).status,
    ).toBe(401);
  });

  it("notifications - a failing receiver is retried on schedule with the same webhook-id until it succeeds", async ({
    derrick,
    receiver: r,
  }) => {
    r.respond = (_req, count) => new Response("nope", { status: count <= 2 ? 503 : 200 });
    const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url });
    const event_id = await publishedId(derrick, "ReviewStateChanged", { data: { review: 1 } });
    await eventually(() => r.received.length >= 3, { what: "three attempts" });
    expect(r.received.map((x) => x.id)).toEqual([event_id, event_id, event_id]);
    expect(r.received[1]!.at - r.received[0]!.at).toBeGreaterThanOrEqual(250);
    const log = await eventually(async () => {
      const list = await deliveries(derrick, sub.subscription_id);
      return list.length === 3 && list[0]!.state === "succeeded" ? list : undefined;
    });
    expect(log.map((d) => [d.attempt, d.state, d.status_code])).toEqual([
      [3, "succeeded", 200],
      [2, "failed", 503],
      [1, "failed", 503],
    ]);
    expect(log[1]!.next_attempt_at).toBeDefined();
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - a receiver answering with an endless body: the attempt succeeds and the body is cut off after 64 KiB", async ({
    derrick,
    receiver: r,
  }) => {
    let sent = 0;
    let cancelled = false;
    const chunk = new Uint8Array(16 * 1024);
    // Produces a chunk each time the deliverer reads one: what it reads is what the stream sent.
    r.respond = () =>
      new Response(
        new ReadableStream({
          pull(controller) {
            sent += chunk.byteLength;
            controller.enqueue(chunk);
          },
          cancel() {
            cancelled = true;
          },
        }),
        { status: 200 },
      );
    const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url }, "alpha");
    await publish(derrick, "ReviewStateChanged", { data: "endless" });
    const [attempt] = await eventually(
      async () => {
        const list = await deliveries(derrick, sub.subscription_id);
        return list.length > 0 ? list : undefined;
      },
      { what: "the attempt" },
    );
    expect(attempt).toMatchObject({ state: "succeeded", status_code: 200 });
    await eventually(() => cancelled, { what: "the body cancelled" });
    // Reading it all until the 1 s timeout would pull hundreds of MiB on loopback; a few socket buffers is the bound.
    expect(sent).toBeLessThan(16 * 1024 * 1024);
    await remove(derrick, sub.subscription_id, "alpha");
  });

  it("notifications - Retry-After postpones the next attempt", async ({ derrick, receiver: r }) => {
    r.respond = (_req, count) => new Response(null, { status: count === 1 ? 429 : 204, headers: { "retry-after": "1" } });
    const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url }, "beta");
    await publish(derrick, "ReviewStateChanged", { data: 1 });
    await eventually(() => r.received.length >= 2, { what: "retry" });
    expect(r.received[1]!.id).toBe(r.received[0]!.id);
    expect(r.received[1]!.at - r.received[0]!.at).toBeGreaterThanOrEqual(900);
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - an exhausted schedule dead-letters the delivery and a replay delivers it", async ({ derrick, receiver: r }) => {
    let healthy = false;
    r.respond = () => new Response(null, { status: healthy ? 200 : 500 });
    const sub = await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url });
    const event_id = await publishedId(derrick, "MasterPlanChanged", { data: "important" });
    const log = await deliveriesOnce(derrick, sub.subscription_id, "dead", "dead letter");
    expect(log).toHaveLength(3);
    expect(r.received).toHaveLength(3);
    healthy = true;
    const replay = await derrick.call(`/v1/notifications/subscriptions/${sub.subscription_id}/deliveries/${event_id}/retry`, {
      method: "POST",
    });
    expect(replay.status).toBe(202);
    expect(await replay.json()).toEqual({ event_id });
    await eventually(() => r.received.length === 4, { what: "replayed delivery" });
    expect(r.received[3]!.id).toBe(event_id);
    expect(JSON.parse(r.received[3]!.body).data).toBe("important");
    expect(
      (await derrick.call(`/v1/notifications/subscriptions/${sub.subscription_id}/deliveries/evt_unknown/retry`, { method: "POST" }))
        .status,
    ).toBe(404);
    expect(
      (
        await derrick.call(`/v1/notifications/subscriptions/${sub.subscription_id}/deliveries/${event_id}/retry`, {
          method: "POST",
          as: "beta",
        })
      ).status,
    ).toBe(404);
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - 410 Gone pauses the subscription and re-posting resumes it", async ({ derrick, receiver: r }) => {
    let gone = true;
    r.respond = () => new Response(null, { status: gone ? 410 : 200 });
    const body = { callback_uri: r.url };
    const sub = await subscribe(derrick, "PlanShared", body, "beta");
    const adminSub = await subscribe(derrick, "PlanShared", body, "admin");
    await remove(derrick, adminSub.subscription_id, "admin");
    await publish(derrick, "PlanShared", { data: 1 });
    await eventually(async () => (await deliveries(derrick, sub.subscription_id, "beta"))[0]?.status_code === 410, { what: "410 attempt" });
    gone = false;
    const second = await publishedId(derrick, "PlanShared", { data: 2 });
    // Paused: the second event is dead-lettered without an attempt; replay works.
    await eventually(
      async () =>
        (
          await derrick.call(`/v1/notifications/subscriptions/${sub.subscription_id}/deliveries/${second}/retry`, {
            method: "POST",
            as: "beta",
          })
        ).status === 202,
      {
        what: "second event in DEAD",
      },
    );
    await eventually(() => r.received.some((x) => x.id === second), { what: "replayed delivery" });
    expect(r.received).toHaveLength(2);
    await subscribe(derrick, "PlanShared", body, "beta");
    const third = await publishedId(derrick, "PlanShared", { data: 3 });
    await eventually(() => r.received.some((x) => x.id === third), { what: "delivery after resume" });
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - after a secret rotation deliveries carry both signatures", async ({ derrick, receiver: r }) => {
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url }, "beta");
    const path = `/v1/notifications/subscriptions/${sub.subscription_id}/secret`;
    const { key: old } = await getJson<SecretReply>(derrick, path, { as: "beta" });
    const { key: fresh } = await getJson<SecretReply>(derrick, `${path}/rotate`, { method: "POST", as: "beta" });
    expect(fresh).not.toBe(old);
    expect((await getJson<SecretReply>(derrick, path, { as: "beta" })).key).toBe(fresh);
    expect((await derrick.call(`${path}/rotate`, { method: "POST" })).status).toBe(404);
    await eventually(async () => {
      await publish(derrick, "ProjectCreated", { data: "rotated" });
      return r.received.length > 0;
    });
    const got = r.received.at(-1)!;
    expect(got.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(fresh).verify(got.body, got.headers)).toBeTruthy();
    expect(new Webhook(old).verify(got.body, got.headers)).toBeTruthy();
    await remove(derrick, sub.subscription_id, "beta");
  });
});
