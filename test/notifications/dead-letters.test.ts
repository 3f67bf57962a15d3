import { describe, expect } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { STREAMS } from "../../actors/notifications/journal.ts";
import type { SubscriptionStore } from "../../actors/notifications/store.ts";
import { eventually, type TestDerrick } from "../harness/index.ts";
import { expectProblem } from "../harness/json.ts";
import type { Receiver } from "./receiver.ts";
import {
  deliveries,
  deliveriesOnce,
  deliveryTest,
  publishOnNats,
  publishedId,
  remove,
  retry,
  subscribe,
  subscriptionStore,
} from "./helpers.ts";

const HOUR = 3_600_000;

// A one-hour pause window: the tests set a subscription's first failure in the past instead of waiting.
const it = deliveryTest({ DERRICK_DELIVERY_PAUSE_AFTER: "1h" }).extend("store", { scope: "file" }, async ({ derrick }) =>
  subscriptionStore(derrick),
);

const dead = (derrick: TestDerrick, id: string, eventId: string) =>
  eventually(
    async () => {
      const list = await deliveries(derrick, id);
      return list.find((d) => d.event_id === eventId)?.state === "dead" ? list : undefined;
    },
    { what: `${eventId} dead` },
  );
const failingSince = async (store: SubscriptionStore, id: string, at: number) => {
  await store.modify(id, (r) => ({ ...r, failing_since: at }));
};
/** A marker event reaching a receiver proves that what was published before it has been handled. */
const settle = async (derrick: TestDerrick, type: string, ...rs: Receiver[]) => {
  const event_id = await publishedId(derrick, type, { data: "marker" });
  await eventually(() => rs.every((r) => r.received.some((x) => x.id === event_id)), { what: "marker" });
};

describe("notifications dead letters, replay and pausing", () => {
  it("notifications - an event whose JSON grows past DEAD's message limit when re-serialized is still dead-lettered after its last attempt", async ({
    derrick,
    receiver: r,
  }) => {
    r.respond = () => new Response(null, { status: 500 });
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: r.url }, "beta");
    // ~100 KB on NATS; written out (1e20 as 21 digits) ~440 KB: more than a dead letter may hold.
    const h = natsHeaders();
    h.set("Nats-Msg-Id", "grows-1");
    await jetstream(derrick.nc).publish(subjects.events("opendes", "PlanShared"), `{"data":[${Array(20_000).fill("1e20").join(",")}]}`, {
      headers: h,
    });
    await eventually(
      async () => (await deliveries(derrick, sub.subscription_id, "beta")).find((d) => d.event_id === "grows-1" && d.state === "dead"),
      { what: "grows-1 dead" },
    );
    // The schedule has three attempts; a letter that could not be stored made the last one repeat every second.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(r.received).toHaveLength(3);
    expect(await deliveries(derrick, sub.subscription_id, "beta")).toHaveLength(3);
    // The letter went without its event; a replay reads it from EVENTS.
    r.respond = () => new Response(null, { status: 204 });
    expect((await retry(derrick, sub.subscription_id, "grows-1", "beta")).status).toBe(202);
    const replayed = await eventually(() => r.received[3], { what: "the replay" });
    expect(JSON.parse(replayed.body).data).toHaveLength(20_000);
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - a failed manual retry keeps the dead letter, so a later retry still delivers the event after it left EVENTS", async ({
    derrick,
    jsm,
    receiver: r,
  }) => {
    let healthy = false;
    r.respond = () => new Response(null, { status: healthy ? 204 : 500 });
    const sub = await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url });
    const seq = await publishOnNats(derrick, "MasterPlanChanged", { data: "keep me" }, "keep-me-1");
    await dead(derrick, sub.subscription_id, "keep-me-1");
    expect((await retry(derrick, sub.subscription_id, "keep-me-1")).status).toBe(202);
    await eventually(async () => (await deliveries(derrick, sub.subscription_id))[0]?.attempt === 4, { what: "the manual attempt" });
    expect((await deliveries(derrick, sub.subscription_id))[0]).toMatchObject({ attempt: 4, state: "failed", status_code: 500 });
    // EVENTS keeps events 7 days, DEAD 30: past EVENTS' retention only the dead letter holds the event.
    await jsm.streams.deleteMessage(STREAMS.events, seq);
    healthy = true;
    expect((await retry(derrick, sub.subscription_id, "keep-me-1")).status).toBe(202);
    const replayed = await eventually(() => r.received[4], { what: "the second manual attempt" });
    expect(replayed.id).toBe("keep-me-1");
    expect(JSON.parse(replayed.body).data).toBe("keep me");
    await eventually(async () => (await deliveries(derrick, sub.subscription_id))[0]?.state === "succeeded", {
      what: "the success recorded",
    });
    expect((await deliveries(derrick, sub.subscription_id))[0]!.attempt).toBe(5);
    // Delivered: the dead letter is gone, and so is the event.
    expect((await retry(derrick, sub.subscription_id, "keep-me-1")).status).toBe(410);
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - a replay after the event left EVENTS reaches only the replaying subscription, once, with the event's own id", async ({
    derrick,
    jsm,
    receivers,
  }) => {
    const [mine, theirs] = [receivers.start(), receivers.start()];
    let healthy = false;
    mine.respond = () => new Response(null, { status: healthy ? 204 : 500 });
    const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: mine.url });
    const other = await subscribe(derrick, "ReviewStateChanged", { callback_uri: theirs.url }, "beta");
    const seq = await publishOnNats(derrick, "ReviewStateChanged", { data: "once" }, "replay-once-1");
    await dead(derrick, sub.subscription_id, "replay-once-1");
    expect(theirs.received.map((x) => x.id)).toEqual(["replay-once-1"]);
    await jsm.streams.deleteMessage(STREAMS.events, seq);
    healthy = true;
    expect((await retry(derrick, sub.subscription_id, "replay-once-1")).status).toBe(202);
    await settle(derrick, "ReviewStateChanged", mine, theirs);
    expect(mine.received.map((x) => x.id).slice(3, -1)).toEqual(["replay-once-1"]);
    expect(theirs.received.map((x) => x.id).slice(0, -1)).toEqual(["replay-once-1"]);
    await Promise.all([remove(derrick, sub.subscription_id), remove(derrick, other.subscription_id, "beta")]);
  });

  it("notifications - an event gone from EVENTS before its retry is dead at once, not delivered empty, and a replay answers 410", async ({
    derrick,
    jsm,
    receiver: r,
  }) => {
    let seq: number | undefined;
    r.respond = async () => {
      // The first attempt fails, and meanwhile the event passes EVENTS' retention.
      await jsm.streams.deleteMessage(STREAMS.events, await eventually(() => seq));
      return new Response(null, { status: 500 });
    };
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url });
    seq = await publishOnNats(derrick, "ProjectCreated", { data: "short-lived" }, "gone-1");
    const log = await dead(derrick, sub.subscription_id, "gone-1");
    expect(log.map((d) => [d.attempt, d.state])).toEqual([
      [2, "dead"],
      [1, "failed"],
    ]);
    expect(log[0]!.error).toMatch(/no longer stored/);
    expect(r.received).toHaveLength(1);
    const replay = await retry(derrick, sub.subscription_id, "gone-1");
    expect((await expectProblem(replay, 410)).detail).toMatch(/no longer stored/);
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - a subscription that failed long ago has its next failing event retried, not dead-lettered, and stays active", async ({
    derrick,
    store,
    receiver: r,
  }) => {
    r.respond = (_req, count) => new Response(null, { status: count === 1 ? 503 : 204 });
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: r.url });
    // Its last failure streak began 1.5 h ago (beyond the 1 h window) and no success since.
    await failingSince(store, sub.subscription_id, Date.now() - 1.5 * HOUR);
    const event_id = await publishedId(derrick, "PlanShared", { data: "hiccup" });
    const log = await deliveriesOnce(derrick, sub.subscription_id, "succeeded", "delivered on the retry");
    expect(log.map((d) => [d.attempt, d.state])).toEqual([
      [2, "succeeded"],
      [1, "failed"],
    ]);
    expect(r.received.map((x) => x.id)).toEqual([event_id, event_id]);
    const record = await eventually(
      async () => {
        const value = (await store.get(sub.subscription_id))?.value;
        return value && value.failing_since === undefined ? value : undefined;
      },
      { what: "the failure streak cleared by the success" },
    );
    expect(record.paused_at).toBeUndefined();
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - an exhausted delivery pauses the subscription only when its failures began longer ago than the window", async ({
    derrick,
    store,
    receiver: r,
  }) => {
    r.respond = () => new Response(null, { status: 500 });
    const sub = await subscribe(derrick, "PublishData", { callback_uri: r.url });
    await failingSince(store, sub.subscription_id, Date.now() - 1.5 * HOUR);
    const first = await publishedId(derrick, "PublishData", { data: 1 });
    const log = await dead(derrick, sub.subscription_id, first);
    // Every attempt of the schedule is made before the subscription is paused.
    expect(log.map((d) => [d.attempt, d.state])).toEqual([
      [3, "dead"],
      [2, "failed"],
      [1, "failed"],
    ]);
    const paused = await eventually(async () => (await store.get(sub.subscription_id))?.value.paused_at, { what: "paused" });
    expect(paused).toBeDefined();
    // Paused: the next event goes to DEAD without an attempt (a replay finds it there).
    const second = await publishedId(derrick, "PublishData", { data: 2 });
    await eventually(async () => (await retry(derrick, sub.subscription_id, second)).status === 202, { what: "the second event in DEAD" });
    await eventually(() => r.received.some((x) => x.id === second), { what: "the replay" });
    const attempts = await eventually(
      async () => {
        const list = (await deliveries(derrick, sub.subscription_id)).filter((d) => d.event_id === second);
        return list.length > 0 ? list : undefined;
      },
      { what: "the replay's attempt" },
    );
    expect(attempts.map((d) => d.state)).toEqual(["failed"]); // the replay only
    expect(r.received.filter((x) => x.id === second)).toHaveLength(1);
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - a retry dead-lettered because the subscription was paused while it waited is logged dead, not left pending", async ({
    derrick,
    jsm,
    store,
    receiver: r,
  }) => {
    r.respond = async (_req, count) => {
      // The first attempt fails; while its retry waits (300 ms), the subscription is paused.
      if (count === 1)
        await store.modify(sub.subscription_id, (rec) => ({
          ...rec,
          paused_at: new Date().toISOString(),
          paused_reason: "paused by the test",
        }));
      return new Response(null, { status: 500 });
    };
    const sub = await subscribe(derrick, "ProjectCreated", { callback_uri: r.url }, "beta");
    await publishOnNats(derrick, "ProjectCreated", { data: "paused while waiting" }, "paused-wait-1");
    // The retry goes to DEAD without an attempt; its outcome is recorded before the letter is stored.
    const letter = await eventually(
      () =>
        jsm.streams
          .getMessage(STREAMS.dead, { last_by_subj: subjects.notifications.dead("opendes", sub.subscription_id) })
          .catch(() => undefined),
      { what: "the dead letter" },
    );
    expect(JSON.parse(new TextDecoder().decode(letter.data))).toMatchObject({
      event_id: "paused-wait-1",
      attempt: 2,
      reason: "subscription paused: paused by the test",
    });
    const log = await deliveries(derrick, sub.subscription_id, "beta");
    expect(log.map((d) => [d.attempt, d.state])).toEqual([
      [2, "dead"],
      [1, "failed"],
    ]);
    expect(log[0]!.error).toBe("subscription paused: paused by the test");
    expect(log[0]!.next_attempt_at).toBeUndefined();
    expect(r.received).toHaveLength(1);
    await remove(derrick, sub.subscription_id, "beta");
  });

  it("notifications - a first failure older than twice the window has expired: exhausting a delivery then does not pause", async ({
    derrick,
    store,
    receiver: r,
  }) => {
    r.respond = () => new Response(null, { status: 500 });
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: r.url }, "beta");
    const stale = Date.now() - 3 * HOUR;
    await failingSince(store, sub.subscription_id, stale);
    const event_id = await publishedId(derrick, "PlanShared", { data: 1 });
    await eventually(async () => (await deliveries(derrick, sub.subscription_id, "beta"))[0]?.state === "dead", {
      what: `${event_id} dead`,
    });
    const record = (await store.get(sub.subscription_id))!.value;
    expect(record.paused_at).toBeUndefined();
    // The streak starts over at this event's first failure.
    expect(record.failing_since).toBeGreaterThan(stale + HOUR);
    await remove(derrick, sub.subscription_id, "beta");
  });
});
