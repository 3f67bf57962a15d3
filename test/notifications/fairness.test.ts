/**
 * What slow receivers cost the others (docs/notifications.md, "Fairness"). Each subscription may hold
 * DERRICK_DELIVERY_PER_SUBSCRIPTION + max(that, a quarter of DERRICK_DELIVERY_CONCURRENCY) deliveries
 * in the deliverer (here 2 + 2 = 4 of 8): fewer slow receivers than it takes to fill the concurrency
 * leave room for the others, enough of them fill it, and then other subscriptions wait until a
 * message of theirs is done — its deliveries, perSubscription at a time, each ending at the latest
 * with the delivery timeout.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, eventually, type TestDerrick, type TestNats } from "../harness/index.ts";
import { neverAnswer, receiverPool, type Receiver } from "./receiver.ts";
import { subjects } from "../../subjects/index.ts";
import { DELIVERY_ENV, publishOnNats, remove, subscribe } from "./helpers.ts";

const TIMEOUT_MS = 1_500;

describe("notifications fairness", () => {
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
        DERRICK_DELIVERY_CONCURRENCY: "8",
        DERRICK_DELIVERY_PER_SUBSCRIPTION: "2",
      },
    });
  });
  afterAll(async () => {
    receivers.stopAll();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  /** A receiver that never answers: each attempt ends with the delivery timeout. */
  const hanging = (): Receiver => {
    const r = receivers.start();
    r.respond = neverAnswer;
    return r;
  };
  /** Fills `slow` subscriptions with four deliveries each (two running, two waiting), then times one delivery to a healthy receiver. */
  async function delayOfOthers(slowClients: Array<"alpha" | "beta">, type: string): Promise<number> {
    const slow = slowClients.map(() => hanging());
    const subs = await Promise.all(slowClients.map((client, i) => subscribe(derrick, type, { callback_uri: slow[i]!.url }, client)));
    const healthy = receivers.start();
    const other = await subscribe(derrick, "ProjectCreated", { callback_uri: healthy.url }, "admin");
    await Promise.all(Array.from({ length: 4 }, (_, i) => publishOnNats(derrick, type, { data: i })));
    await eventually(() => slow.every((r) => r.received.length >= 2), { what: "the slow receivers' first attempts running" });
    const start = Date.now();
    await publishOnNats(derrick, "ProjectCreated", { data: "other" });
    const got = await eventually(() => healthy.received[0], { what: "the healthy receiver's delivery", timeoutMs: 4 * TIMEOUT_MS + 5_000 });
    const waited = got.at - start;
    // Nothing of this run left in the deliverer for the next: every slow attempt made and timed out.
    const inFlight = async () =>
      (await derrick.nc.request(subjects.notifications["deliverer.stats"](), "{}")).json<{ inFlight: number }>().inFlight;
    await eventually(async () => slow.every((r) => r.received.length === 4) && (await inFlight()) === 0, {
      what: "the slow deliveries done",
      timeoutMs: 4 * TIMEOUT_MS + 5_000,
    });
    await Promise.all([
      ...subs.map((s, i) => remove(derrick, s.subscription_id, slowClients[i])),
      remove(derrick, other.subscription_id, "admin"),
    ]);
    return waited;
  }

  it("notifications fairness - one slow receiver holds its share only: another subscription is delivered at once", {
    timeout: 30_000,
  }, async () => {
    // Held behind the slow receiver it would wait out a delivery timeout; the margin is for a loaded machine.
    expect(await delayOfOthers(["alpha"], "PlanShared")).toBeLessThan(TIMEOUT_MS);
  });

  it("notifications fairness - slow receivers that together fill the deliverer delay the others until a message of theirs is done: up to its deliveries / perSubscription timeouts", {
    timeout: 30_000,
  }, async () => {
    const waited = await delayOfOthers(["alpha", "beta"], "ReviewStateChanged");
    // Four deliveries per message, two at a time: the first message's slots come free after two
    // timeouts. Only the lower bound is asserted (an upper one would be a timing bet on a shared
    // machine): if this starts failing, the deliverer got fairer and the docs' bound is to be updated.
    expect(waited).toBeGreaterThan(TIMEOUT_MS);
  });
});
