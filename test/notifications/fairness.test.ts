/**
 * What slow receivers cost the others, end to end (docs/notifications.md, "Fairness"): the deliverer's
 * fair share wired to real consumers and receivers. The bounds in time (at once; after exactly its
 * deliveries / perSubscription timeouts) are the scheduler's, tested on a manual clock beside it
 * (actors/notifications/deliverer/fair-share.test.ts); here receivers hold requests until the test
 * lets them go, so what is asserted is the order of arrivals, never a duration.
 */
import { describe, expect } from "vitest";
import type { DelivererStats } from "../../actors/notifications/deliverer.ts";
import { CONSUMERS, STREAMS } from "../../actors/notifications/journal.ts";
import { subjects } from "../../subjects/index.ts";
import { eventually } from "../harness/index.ts";
import type { TestDerrick } from "../harness/index.ts";
import { deliveryTest, publishOnNats, remove, subscribe } from "./helpers.ts";
import type { Receiver } from "./receiver.ts";

// Each subscription may hold 2 + max(2, 8 / 4) = 4 of the 8 deliveries; the timeout is long enough
// never to end a held request before the test lets it go.
const it = deliveryTest({
  DERRICK_DELIVERY_SCHEDULE: "0",
  DERRICK_DELIVERY_TIMEOUT: "60s",
  DERRICK_DELIVERY_CONCURRENCY: "8",
  DERRICK_DELIVERY_PER_SUBSCRIPTION: "2",
});

/** Arrivals and releases in the order they happened, across the test's receivers. */
type Log = string[];

/** A receiver that holds every request until `release`, then answers 204; each arrival is logged with `name`. */
function holding(r: Receiver, name: string, log: Log) {
  const held: Array<() => void> = [];
  r.respond = () => {
    log.push(name);
    return new Promise<Response>((resolve) => held.push(() => resolve(new Response(null, { status: 204 }))));
  };
  return {
    held: () => held.length,
    release() {
      log.push(`release ${name}`);
      for (const go of held.splice(0)) go();
    },
  };
}

async function stats(derrick: TestDerrick): Promise<DelivererStats> {
  return (await derrick.nc.request(subjects.notifications["deliverer.stats"](), "{}")).json<DelivererStats>();
}

describe("notifications fairness", () => {
  it("notifications fairness - one slow receiver with more work than the deliverer holds keeps its share only: another subscription is delivered while the slow requests are held", async ({
    derrick,
    receivers,
  }) => {
    const log: Log = [];
    const slowReceiver = receivers.start();
    const slow = holding(slowReceiver, "slow", log);
    const slowSub = await subscribe(derrick, "PlanShared", { callback_uri: slowReceiver.url }, "alpha");
    const healthy = receivers.start();
    const other = await subscribe(derrick, "ProjectCreated", { callback_uri: healthy.url }, "admin");
    await Promise.all(Array.from({ length: 4 }, (_, i) => publishOnNats(derrick, "PlanShared", { data: i })));
    await eventually(() => slow.held() === 2, { what: "the slow receiver's first two requests held" });
    // More than its share (4): the next message of the slow subscription waits outside the deliverer's room.
    const waiting = async () => ((s) => s.parked + s.overflowed)(await stats(derrick));
    const before = await waiting();
    await Promise.all(Array.from({ length: 4 }, (_, i) => publishOnNats(derrick, "PlanShared", { data: 4 + i })));
    await eventually(async () => (await waiting()) >= before + 4, {
      what: "the slow subscription's second message parked or sent away",
    });
    await publishOnNats(derrick, "ProjectCreated", { data: "other" });
    await eventually(() => healthy.received.length === 1, { what: "the other subscription's delivery" });
    // Nothing of the slow receiver's was answered: its share is held, and the rest of the deliverer is free.
    expect(log).toEqual(["slow", "slow"]);
    expect(slow.held()).toBe(2);
    while (slowReceiver.received.length < 8 || slow.held() > 0) {
      slow.release();
      await eventually(() => slow.held() > 0 || slowReceiver.received.length >= 8, { what: "the slow receiver's next requests" });
    }
    await eventually(async () => (await stats(derrick)).inFlight === 0, { what: "the slow deliveries done" });
    expect(slowReceiver.received).toHaveLength(8);
    await Promise.all([remove(derrick, slowSub.subscription_id, "alpha"), remove(derrick, other.subscription_id, "admin")]);
  });

  it("notifications fairness - slow receivers that together fill the deliverer hold up another subscription until one of their messages is done", async ({
    derrick,
    receivers,
    jsm,
  }) => {
    const log: Log = [];
    const clients = ["alpha", "beta"] as const;
    const slowReceivers = clients.map(() => receivers.start());
    const slow = slowReceivers.map((r, i) => holding(r, clients[i]!, log));
    const subs = await Promise.all(
      clients.map((client, i) => subscribe(derrick, "ReviewStateChanged", { callback_uri: slowReceivers[i]!.url }, client)),
    );
    const healthy = receivers.start();
    healthy.respond = () => {
      log.push("other");
      return new Response(null, { status: 204 });
    };
    const other = await subscribe(derrick, "ProjectCreated", { callback_uri: healthy.url }, "admin");
    await Promise.all(Array.from({ length: 4 }, (_, i) => publishOnNats(derrick, "ReviewStateChanged", { data: i })));
    await eventually(() => slow.every((s) => s.held() === 2), { what: "the slow receivers' first requests held" });
    await publishOnNats(derrick, "ProjectCreated", { data: "other" });
    // The other subscription's work is in DELIVERIES and handed to the deliverer, where it waits for room.
    const delivered = subjects.notifications.deliveries("opendes", other.subscription_id);
    await eventually(
      async () =>
        (await jsm.streams.getMessage(STREAMS.deliveries, { last_by_subj: delivered }).catch(() => undefined)) !== undefined &&
        (await jsm.consumers.info(STREAMS.deliveries, CONSUMERS.deliverer)).num_pending === 0,
      { what: "the other subscription's work received by the deliverer" },
    );
    // Time for a deliverer that let it through to post it (a correct one never does while all is held).
    await new Promise((resolve) => setTimeout(resolve, 500));
    while (slowReceivers.some((r) => r.received.length < 4) || slow.some((s) => s.held() > 0)) {
      for (const s of slow) s.release();
      await eventually(() => slow.some((s) => s.held() > 0) || slowReceivers.every((r) => r.received.length >= 4), {
        what: "the slow receivers' next requests",
      });
    }
    await eventually(() => healthy.received.length === 1, { what: "the other subscription's delivery" });
    // It came only once slow requests had been answered, not while every slow request was held.
    expect(log.indexOf("other")).toBeGreaterThan(log.findIndex((entry) => entry.startsWith("release")));
    expect(log.slice(0, 4).sort()).toEqual(["alpha", "alpha", "beta", "beta"]);
    await eventually(async () => (await stats(derrick)).inFlight === 0, { what: "the slow deliveries done" });
    await Promise.all([
      ...subs.map((s, i) => remove(derrick, s.subscription_id, clients[i])),
      remove(derrick, other.subscription_id, "admin"),
    ]);
  });
});
