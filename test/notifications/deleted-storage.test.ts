/**
 * The notifications storage deleted at runtime (an operator, a tool, a lost store) is made again, as
 * every store of derrick is, and events go on reaching callbacks without a restart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { eventually, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { STREAMS } from "../../actors/notifications/journal.ts";
import { SUBSCRIPTIONS_BUCKET } from "../../actors/notifications/store.ts";
import { receiverPool } from "./receiver.ts";
import { DELIVERY_ENV, publish, subscribe, type Json } from "./helpers.ts";

describe("notifications after their storage was deleted", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  let jsm: JetStreamManager;
  const receivers = receiverPool();
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["system", "identity", "notifications", "dispatcher", "deliverer"], env: DELIVERY_ENV });
    jsm = await jetstreamManager(derrick.nc);
  });
  afterAll(async () => {
    receivers.stopAll();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const published = async (type: string, data: string) => {
    const res = await publish(derrick, type, { data });
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    return ((await res.json()) as Json).event_id as string;
  };

  it("subscriptions - a deleted subscriptions bucket is made again: its subscriptions are gone, new ones are listed and delivered to", {
    timeout: 20_000,
  }, async () => {
    const before = receivers.start();
    await subscribe(derrick, "ProjectCreated", { callback_uri: before.url });
    expect(await jsm.streams.delete(`KV_${SUBSCRIPTIONS_BUCKET}`)).toBe(true);
    const list = await derrick.call("/v1/notifications/subscriptions");
    expect(list.status, await list.clone().text()).toBe(200);
    const after = receivers.start();
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: after.url });
    expect(sub.subscription_id).toBeTruthy();
    const eventId = await published("ProjectCreated", "after the bucket was made again");
    await eventually(() => after.received.find((r) => r.id === eventId), { timeoutMs: 10_000, what: "delivery to the new subscription" });
    // The subscription that went with the bucket is not delivered to (the dispatcher's copy started over).
    expect(before.received).toEqual([]);
  });

  it("events - a deleted EVENTS stream (and the delivery streams) are made again: an event published then is accepted and delivered", {
    timeout: 30_000,
  }, async () => {
    const r = receivers.start();
    await subscribe(derrick, "PlanShared", { callback_uri: r.url });
    expect(await published("PlanShared", "before")).toBeTruthy();
    await eventually(() => r.received.length === 1, { timeoutMs: 10_000, what: "the first delivery" });
    for (const stream of [STREAMS.events, STREAMS.deliveries]) expect(await jsm.streams.delete(stream)).toBe(true);
    const eventId = await published("PlanShared", "after the streams were made again");
    await eventually(() => r.received.find((x) => x.id === eventId), {
      timeoutMs: 20_000,
      what: "delivery of the event published after the deletion",
    });
  });
});
