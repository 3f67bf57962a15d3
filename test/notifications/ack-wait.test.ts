/**
 * Work held in the deliverer past the consumer's ack wait (DERRICK_DELIVERY_TIMEOUT + 3 s) is not
 * handed over again: end to end, against JetStream's real ack wait. That every held message is renewed
 * within it is tested on a manual clock (actors/notifications/deliverer/fair-share.test.ts); here a
 * hanging receiver's five deliveries, one at a time, hold the whole concurrency (2) for five timeouts.
 */
import { describe, expect } from "vitest";
import { subjects } from "../../subjects/index.ts";
import { eventually } from "../harness/index.ts";
import { deliveryTest, publishOnNats, remove, subscribe } from "./helpers.ts";
import { neverAnswer } from "./receiver.ts";

const TIMEOUT_MS = 2_000;
const SLOW_EVENTS = 5;

const it = deliveryTest({
  DERRICK_DELIVERY_SCHEDULE: "0",
  DERRICK_DELIVERY_TIMEOUT: `${TIMEOUT_MS}ms`,
  DERRICK_DELIVERY_CONCURRENCY: "2",
  DERRICK_DELIVERY_PER_SUBSCRIPTION: "1",
});

describe("notifications work held past the ack wait", () => {
  it("notifications ack wait - events that wait for room in the deliverer longer than the ack wait are delivered once", {
    timeout: 60_000,
  }, async ({ derrick, receivers }) => {
    /** Arrivals at every receiver, in order. */
    const arrivals: string[] = [];
    const slow = receivers.start();
    slow.respond = (_req, count) => {
      arrivals.push(`slow ${count}`);
      return neverAnswer();
    };
    const slowSub = await subscribe(derrick, "PlanShared", { callback_uri: slow.url }, "alpha");
    // Two other subscriptions: the first one's message is the next to start, the second's is received behind it.
    const healthy = [receivers.start(), receivers.start()];
    const types = ["ProjectCreated", "ReviewStateChanged"];
    healthy.forEach((r, i) => {
      r.respond = () => {
        arrivals.push(types[i]!);
        return new Response(null, { status: 204 });
      };
    });
    const others = await Promise.all(types.map((type, i) => subscribe(derrick, type, { callback_uri: healthy[i]!.url }, "admin")));
    await Promise.all(Array.from({ length: SLOW_EVENTS }, (_, i) => publishOnNats(derrick, "PlanShared", { data: i })));
    await eventually(() => slow.received.length >= 1, { what: "the slow receiver's first attempt running" });
    for (const type of types) {
      await publishOnNats(derrick, type, { data: type });
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const firsts = await Promise.all(
      healthy.map((r) =>
        eventually(() => r.received[0], { what: "a healthy receiver's delivery", timeoutMs: SLOW_EVENTS * TIMEOUT_MS + 10_000 }),
      ),
    );
    // The situation under test, by order rather than by clock: attempts to the slow receiver run one at
    // a time, each ended by the timeout, and however the dispatcher grouped its events the others start
    // only after its fourth attempt, three timeouts (6 s) after its first: past the ack wait (5 s).
    for (const type of types) expect(arrivals.indexOf(type)).toBeGreaterThan(arrivals.indexOf(`slow ${SLOW_EVENTS - 1}`));
    await eventually(
      async () =>
        slow.received.length === SLOW_EVENTS &&
        (await derrick.nc.request(subjects.notifications["deliverer.stats"](), "{}")).json<{ inFlight: number }>().inFlight === 0,
      { what: "the slow deliveries done", timeoutMs: SLOW_EVENTS * TIMEOUT_MS + 10_000 },
    );
    // A second copy, handed over again after the ack wait, would follow the first at once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(healthy.map((r) => r.received.map((x) => x.id))).toEqual(firsts.map((f) => [f.id]));
    expect(slow.received).toHaveLength(SLOW_EVENTS);
    await Promise.all([
      remove(derrick, slowSub.subscription_id, "alpha"),
      ...others.map((o) => remove(derrick, o.subscription_id, "admin")),
    ]);
  });
});
