import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { startReceiver } from "./receiver.ts";
import { DELIVERY_ENV, publish, subscribe, type Json } from "./helpers.ts";

describe("notifications delivery under failure", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    // Edge, subscriptions and dispatcher here; deliverers are started (and killed) by the test.
    derrick = await startDerrick(nats, { actors: ["system", "identity", "notifications", "dispatcher"], env: DELIVERY_ENV });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("notifications - a deliverer killed mid-delivery loses nothing: another one delivers the event", async () => {
    const r = startReceiver();
    let release: () => void = () => undefined;
    const held = new Promise<Response>((resolve) => (release = () => resolve(new Response(null, { status: 500 }))));
    r.respond = (_req, count) => (count === 1 ? held : new Response(null, { status: 200 }));
    const doomed = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: DELIVERY_ENV });
    let rescuer: TestDerrick | undefined;
    try {
      await subscribe(derrick, "PlanShared", { callback_uri: r.url });
      const { event_id } = (await (await publish(derrick, "PlanShared", { data: "must arrive" })).json()) as Json;
      await eventually(() => r.received.length === 1, { what: "first attempt in flight" });
      // Kill: the connection drops with the job unacknowledged (no drain, no ack, no record).
      await doomed.nc.close();
      rescuer = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: DELIVERY_ENV });
      await eventually(() => r.received.length >= 2, { what: "redelivery by the other deliverer", timeoutMs: 15_000 });
      expect(r.received[1]!.id).toBe(event_id);
      expect(JSON.parse(r.received[1]!.body).data).toBe("must arrive");
    } finally {
      release();
      r.stop();
      await doomed.cleanup().catch(() => undefined);
      await rescuer?.cleanup();
    }
  }, 30_000);

  it("notifications - one dead receiver does not delay deliveries to others", async () => {
    const slow = startReceiver();
    const fast = startReceiver();
    slow.respond = () => new Promise<Response>((resolve) => setTimeout(() => resolve(new Response(null, { status: 200 })), 900));
    const deliverer = await startDerrick(nats, { actors: ["deliverer"], edge: false, env: { ...DELIVERY_ENV, DERRICK_DELIVERY_PER_SUBSCRIPTION: "2" } });
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
