/**
 * Work held in the deliverer past the consumer's ack wait (docs/notifications.md, "What slow
 * receivers cost the others"). The ack wait is DERRICK_DELIVERY_TIMEOUT + 3 s; a message waiting for
 * room in the process longer than that used to be handed over again by JetStream and delivered twice.
 * Here a hanging receiver's batch of four deliveries, one at a time (per subscription 1), holds the
 * whole concurrency (2) for four timeouts (8 s), while two other subscriptions' events wait for room
 * past the ack wait (5 s), the second one received behind the first: each must reach its receiver once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, eventually, type TestDerrick, type TestNats } from "../harness/index.ts";
import { neverAnswer, receiverPool } from "./receiver.ts";
import { subjects } from "../../subjects/index.ts";
import { DELIVERY_ENV, publishOnNats, remove, subscribe } from "./helpers.ts";

const TIMEOUT_MS = 2_000;
const ACK_WAIT_MS = TIMEOUT_MS + 3_000;
const SLOW_EVENTS = 4;

describe("notifications work held past the ack wait", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  const receivers = receiverPool();
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, {
      actors: ["system", "identity", "notifications", "dispatcher", "deliverer"],
      env: {
        ...DELIVERY_ENV,
        DERRICK_DELIVERY_SCHEDULE: "0",
        DERRICK_DELIVERY_TIMEOUT: `${TIMEOUT_MS}ms`,
        DERRICK_DELIVERY_CONCURRENCY: "2",
        DERRICK_DELIVERY_PER_SUBSCRIPTION: "1",
      },
    });
  });
  afterAll(async () => {
    receivers.stopAll();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("notifications ack wait - events that wait for room in the deliverer longer than the ack wait are delivered once", {
    timeout: 60_000,
  }, async () => {
    const slow = receivers.start();
    slow.respond = neverAnswer;
    const slowSub = await subscribe(derrick, "PlanShared", { callback_uri: slow.url }, "alpha");
    // Two other subscriptions: the first one's message is the next to start, the second's is received behind it.
    const healthy = [receivers.start(), receivers.start()];
    const types = ["ProjectCreated", "ReviewStateChanged"];
    const others = await Promise.all(types.map((type, i) => subscribe(derrick, type, { callback_uri: healthy[i]!.url }, "admin")));
    // One round of the dispatcher: one batch, admitted whole, that holds more than the concurrency.
    await Promise.all(Array.from({ length: SLOW_EVENTS }, (_, i) => publishOnNats(derrick, "PlanShared", { data: i })));
    await eventually(() => slow.received.length >= 1, { what: "the slow receiver's first attempt running" });
    const start = Date.now();
    for (const type of types) {
      await publishOnNats(derrick, type, { data: type });
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const firsts = await Promise.all(
      healthy.map((r) =>
        eventually(() => r.received[0], { what: "a healthy receiver's delivery", timeoutMs: SLOW_EVENTS * TIMEOUT_MS + 10_000 }),
      ),
    );
    // The situation under test: both events waited in the deliverer past the ack wait.
    for (const first of firsts) expect(first.at - start).toBeGreaterThan(ACK_WAIT_MS);
    const inFlight = async () =>
      (await derrick.nc.request(subjects.notifications["deliverer.stats"](), "{}")).json<{ inFlight: number }>().inFlight;
    await eventually(async () => slow.received.length === SLOW_EVENTS && (await inFlight()) === 0, {
      what: "the slow deliveries done",
      timeoutMs: SLOW_EVENTS * TIMEOUT_MS + 10_000,
    });
    // A second copy, handed over again after the ack wait, would follow the first at once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(healthy.map((r) => r.received.map((x) => x.id))).toEqual(firsts.map((f) => [f.id]));
    await Promise.all([
      remove(derrick, slowSub.subscription_id, "alpha"),
      ...others.map((o) => remove(derrick, o.subscription_id, "admin")),
    ]);
  });
});
