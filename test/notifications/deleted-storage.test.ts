/**
 * The notifications storage deleted at runtime (an operator, a tool, a lost store) is made again, as
 * every store of derrick is, and events go on reaching callbacks without a restart.
 */
import { describe, expect } from "vitest";
import { eventually } from "../harness/index.ts";
import { STREAMS } from "../../actors/notifications/journal.ts";
import { SUBSCRIPTIONS_BUCKET } from "../../actors/notifications/store.ts";
import { deliveryTest, publishedId, subscribe } from "./helpers.ts";

const it = deliveryTest();

describe("notifications after their storage was deleted", () => {
  it("subscriptions - a deleted subscriptions bucket is made again: its subscriptions are gone, new ones are listed and delivered to", {
    timeout: 20_000,
  }, async ({ derrick, jsm, receivers }) => {
    const before = receivers.start();
    await subscribe(derrick, "ProjectCreated", { callback_uri: before.url });
    expect(await jsm.streams.delete(`KV_${SUBSCRIPTIONS_BUCKET}`)).toBe(true);
    const list = await derrick.call("/v1/notifications/subscriptions");
    expect(list.status, await list.clone().text()).toBe(200);
    const after = receivers.start();
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: after.url });
    expect(sub.subscription_id).toBeTruthy();
    const eventId = await publishedId(derrick, "ProjectCreated", { data: "after the bucket was made again" });
    await eventually(() => after.received.find((r) => r.id === eventId), { timeoutMs: 10_000, what: "delivery to the new subscription" });
    // The subscription that went with the bucket is not delivered to (the dispatcher's copy started over).
    expect(before.received).toEqual([]);
  });

  it("events - a deleted EVENTS stream (and the delivery streams) are made again: an event published then is accepted and delivered", {
    timeout: 30_000,
  }, async ({ derrick, jsm, receiver: r }) => {
    await subscribe(derrick, "PlanShared", { callback_uri: r.url });
    expect(await publishedId(derrick, "PlanShared", { data: "before" })).toBeTruthy();
    await eventually(() => r.received.length === 1, { timeoutMs: 10_000, what: "the first delivery" });
    for (const stream of [STREAMS.events, STREAMS.deliveries]) expect(await jsm.streams.delete(stream)).toBe(true);
    const eventId = await publishedId(derrick, "PlanShared", { data: "after the streams were made again" });
    await eventually(() => r.received.find((x) => x.id === eventId), {
      timeoutMs: 20_000,
      what: "delivery of the event published after the deletion",
    });
  });
});
