import { describe, expect } from "vitest";
import { eventually, startDerrick, type TestDerrick, type TestNats } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { startReceiver } from "./receiver.ts";
import { jetstream, type JetStreamManager } from "@nats-io/jetstream";
import { subjects } from "../../subjects/index.ts";
import { STREAMS } from "../../actors/notifications/journal.ts";
import { SUBSCRIPTIONS_BUCKET } from "../../actors/notifications/store.ts";
import { DELIVERY_ENV, deliveries, publish, publishOnNats, publishedId, remove, retry, subscribe, type Json } from "./helpers.ts";

// Edge, subscriptions and dispatcher here; deliverers are started (and killed) by the tests.
const it = derrickTest({ actors: ["system", "identity", "notifications", "dispatcher"], env: DELIVERY_ENV });

/** How many dead letters the subscription has in DEAD. */
const deadLetters = async (jsm: JetStreamManager, id: string) => {
  const subject = subjects.notifications.dead("opendes", id);
  return (await jsm.streams.info(STREAMS.dead, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
};

/** `total` events of `type` published straight to EVENTS at once, as services in a burst would. */
const burst = (derrick: TestDerrick, type: string, total: number) => {
  const js = jetstream(derrick.nc);
  return Promise.all(Array.from({ length: total }, (_, i) => js.publish(subjects.events("opendes", type), JSON.stringify({ data: i }))));
};

/** The counters of the deliverer `via` reaches. */
const delivererStats = async (via: TestDerrick) => (await via.nc.request(subjects.notifications["deliverer.stats"](), "{}")).json<Json>();

describe("notifications delivery under failure", () => {
  /** An answer held until release(), then a 500: keeps one attempt in flight while its deliverer dies. */
  const heldAnswer = () => {
    let release: () => void = () => undefined;
    const held = new Promise<Response>((resolve) => (release = () => resolve(new Response(null, { status: 500 }))));
    return { held, release: () => release() };
  };
  /** A deliverer to kill mid-work (its connection dropped, nothing acknowledged) and the one that takes over. */
  const killableDeliverer = async (nats: TestNats) => {
    const doomed = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: DELIVERY_ENV });
    let rescuer: TestDerrick | undefined;
    return {
      kill: () => doomed.nc.close(),
      takeOver: async () => void (rescuer = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: DELIVERY_ENV })),
      cleanup: async () => {
        await doomed.cleanup().catch(() => undefined);
        await rescuer?.cleanup();
      },
    };
  };

  it("notifications - a deliverer killed mid-delivery loses nothing: another one delivers every event of its batch", async ({
    derrick,
    nats,
  }) => {
    const r = startReceiver();
    const { held, release } = heldAnswer();
    r.respond = (_req, count) => (count === 1 ? held : new Response(null, { status: 200 }));
    const deliverer = await killableDeliverer(nats);
    try {
      await subscribe(derrick, "PlanShared", { callback_uri: r.url });
      // Published together, the events reach the deliverer as one batch (or a few).
      const ids = await Promise.all(
        Array.from({ length: 5 }, async (_, i) => publishedId(derrick, "PlanShared", { data: `must arrive ${i}` })),
      );
      await eventually(() => r.received.length >= 1, { what: "first attempt in flight" });
      const first = r.received[0]!.id;
      // Kill: the connection drops with the work unacknowledged (no drain, no ack).
      await deliverer.kill();
      const before = r.received.length;
      await deliverer.takeOver();
      await eventually(() => r.received.slice(before).some((x) => x.id === first), {
        what: "redelivery by the other deliverer",
        timeoutMs: 15_000,
      });
      const redelivered = r.received.slice(before).find((x) => x.id === first)!;
      expect(JSON.parse(redelivered.body).data).toMatch(/^must arrive \d$/);
      await eventually(() => ids.every((id) => r.received.some((x) => x.id === id)), { what: "every event delivered" });
    } finally {
      release();
      r.stop();
      await deliverer.cleanup();
    }
  }, 30_000);

  it("notifications - a deliverer killed during a replay loses nothing: the dead letter stays until another deliverer delivers it", async ({
    derrick,
    nats,
    jsm,
  }) => {
    const r = startReceiver();
    const { held, release } = heldAnswer();
    let answer: "fail" | "hold" | "ok" = "fail";
    r.respond = () => (answer === "hold" ? held : new Response(null, { status: answer === "ok" ? 204 : 500 }));
    const deliverer = await killableDeliverer(nats);
    try {
      const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url });
      const seq = await publishOnNats(derrick, "ReviewStateChanged", { data: "survives" }, "survives-1");
      await eventually(async () => (await deliveries(derrick, sub.subscription_id))[0]?.state === "dead", { what: "dead letter" });
      // Past EVENTS' retention only the dead letter holds the event.
      await jsm.streams.deleteMessage(STREAMS.events, seq);
      answer = "hold";
      expect((await retry(derrick, sub.subscription_id, "survives-1")).status).toBe(202);
      await eventually(() => r.received.length >= 4, { what: "the replay in flight" });
      expect(await deadLetters(jsm, sub.subscription_id)).toBe(1);
      await deliverer.kill();
      answer = "ok";
      await deliverer.takeOver();
      const replayed = await eventually(() => r.received.slice(4).find((x) => x.id === "survives-1"), {
        what: "the replay by the other deliverer",
        timeoutMs: 15_000,
      });
      expect(JSON.parse(replayed.body).data).toBe("survives");
      await eventually(async () => (await deadLetters(jsm, sub.subscription_id)) === 0, {
        what: "the dead letter forgotten after the success",
      });
      await remove(derrick, sub.subscription_id);
    } finally {
      release();
      r.stop();
      await deliverer.cleanup();
    }
  }, 30_000);

  it("notifications - a resumed subscription gets its events even while a deliverer's watched copy still shows it paused", async ({
    derrick,
    nats,
    jsm,
  }) => {
    const r = startReceiver();
    let gone = true;
    r.respond = () => new Response(null, { status: gone ? 410 : 204 });
    const kvStream = `KV_${SUBSCRIPTIONS_BUCKET}`;
    const watchers = async () => (await jsm.consumers.list(kvStream).next()).map((c) => c.name);
    const before = new Set(await watchers());
    const deliverer = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: DELIVERY_ENV });
    try {
      const watch = (await watchers()).filter((name) => !before.has(name));
      expect(watch).toHaveLength(1);
      const body = { callback_uri: r.url };
      const sub = await subscribe(derrick, "PublishData", body, "beta");
      await publish(derrick, "PublishData", { data: "answered 410" });
      // The deliverer's copy shows the pause once it buries an event instead of delivering it.
      await publish(derrick, "PublishData", { data: "buried" });
      await eventually(async () => (await deadLetters(jsm, sub.subscription_id)) === 2, { what: "an event buried while paused" });
      // The deliverer loses its watch (as on a JetStream leader change): its copy stops following KV
      // until the client notices, seconds later.
      await jsm.consumers.delete(kvStream, watch[0]!);
      gone = false;
      await subscribe(derrick, "PublishData", body, "beta");
      const event_id = await publishedId(derrick, "PublishData", { data: "after the resume" });
      await eventually(() => r.received.some((x) => x.id === event_id), { what: "delivery after the resume", timeoutMs: 5_000 });
      expect(await deadLetters(jsm, sub.subscription_id)).toBe(2);
      await remove(derrick, sub.subscription_id, "beta");
    } finally {
      r.stop();
      await deliverer.cleanup();
    }
  }, 30_000);

  it("notifications - a burst far beyond one subscription's capacity is delivered completely and every attempt is listed", async ({
    derrick,
    nats,
  }) => {
    const r = startReceiver();
    // A receiver that takes a moment, so the subscription saturates and work is sent away and booked.
    r.respond = () => new Promise<Response>((resolve) => setTimeout(() => resolve(new Response(null, { status: 204 })), 2));
    // 2 requests at once, 64 held and at most 1024 parked for the subscription: less than the burst,
    // so work is both parked in the deliverer and sent away to JetStream.
    const env = { ...DELIVERY_ENV, DERRICK_DELIVERY_PER_SUBSCRIPTION: "2", DERRICK_DELIVERY_CONCURRENCY: "256" };
    const deliverer = await startDerrick(nats, { actors: ["deliverer"], edge: false, env });
    try {
      const sub = await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url });
      const total = 1500;
      await burst(derrick, "MasterPlanChanged", total);
      await eventually(() => new Set(r.received.map((x) => x.id)).size === total, { what: "every event delivered", timeoutMs: 20_000 });
      const stats = await delivererStats(derrick);
      expect(stats.overflowed).toBeGreaterThan(0);
      expect(stats.parked).toBeGreaterThan(0);
      const log = await eventually(
        async () => {
          const list = await deliveries(derrick, sub.subscription_id);
          return list.length === 100 ? list : undefined;
        },
        { what: "attempt log" },
      );
      expect(log.every((d: Json) => d.state === "succeeded" && d.attempt === 1)).toBe(true);
      await remove(derrick, sub.subscription_id);
    } finally {
      r.stop();
      await deliverer.cleanup();
    }
  }, 30_000);

  it("notifications - a deliverer stopped with parked work hands it back: another one delivers every event", async ({ derrick, nats }) => {
    const r = startReceiver();
    r.respond = () => new Promise<Response>((resolve) => setTimeout(() => resolve(new Response(null, { status: 204 })), 5));
    const env = { ...DELIVERY_ENV, DERRICK_DELIVERY_PER_SUBSCRIPTION: "2", DERRICK_DELIVERY_CONCURRENCY: "256" };
    const first = await startDerrick(nats, { actors: ["deliverer"], edge: false, env });
    let second: TestDerrick | undefined;
    try {
      const sub = await subscribe(derrick, "PublishData", { callback_uri: r.url });
      const total = 600;
      await burst(derrick, "PublishData", total);
      const parked = await eventually(
        async () => {
          const stats = await delivererStats(first);
          return stats.parked > 0 ? stats.parked : undefined;
        },
        { what: "work parked in the first deliverer" },
      );
      expect(parked).toBeGreaterThan(0);
      await first.cleanup();
      expect(new Set(r.received.map((x) => x.id)).size).toBeLessThan(total);
      second = await startDerrick(nats, { actors: ["deliverer"], edge: false, env });
      await eventually(() => new Set(r.received.map((x) => x.id)).size === total, { what: "every event delivered", timeoutMs: 20_000 });
      await remove(derrick, sub.subscription_id);
    } finally {
      r.stop();
      await first.cleanup().catch(() => undefined);
      await second?.cleanup();
    }
  }, 40_000);

  it("notifications - one dead receiver does not delay deliveries to others", async ({ derrick, nats }) => {
    const slow = startReceiver();
    const fast = startReceiver();
    slow.respond = () => new Promise<Response>((resolve) => setTimeout(() => resolve(new Response(null, { status: 200 })), 900));
    const deliverer = await startDerrick(nats, {
      actors: ["deliverer"],
      edge: false,
      env: { ...DELIVERY_ENV, DERRICK_DELIVERY_PER_SUBSCRIPTION: "2" },
    });
    try {
      await subscribe(derrick, "ProjectCreated", { callback_uri: slow.url }, "beta");
      await subscribe(derrick, "ProjectCreated", { callback_uri: fast.url }, "admin");
      const started = Date.now();
      await Promise.all(Array.from({ length: 30 }, (_, i) => publish(derrick, "ProjectCreated", { data: i })));
      await eventually(() => fast.received.length === 30, { what: "all fast deliveries", timeoutMs: 10_000 });
      // 30 events at 2 at a time and 0.9 s each would take ~14 s for the slow receiver alone.
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(slow.received.length).toBeLessThan(30);
    } finally {
      slow.stop();
      fast.stop();
      await deliverer.cleanup();
    }
  }, 30_000);
});
