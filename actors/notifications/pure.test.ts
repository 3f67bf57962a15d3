import { describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { delayBefore, honourRetryAfter, parseRetryAfter } from "./schedule.ts";
import { newSecret, webhookHeaders } from "./signing.ts";
import { cloudEvent, matches } from "./matching.ts";
import { Slots } from "../runtime/slots.ts";
import { supersedes } from "./progress.ts";
import { upsertSubscription } from "./handlers.ts";
import { callbackPolicy } from "./callback-policy.ts";
import { deliveryLog } from "./delivery-log.ts";
import type { SubscriptionCache, SubscriptionStore } from "./store.ts";
import type { AttemptRecord, Journal } from "./journal.ts";
import { DerrickError } from "../../subjects/index.ts";

describe("notifications pure parts", () => {
  it("notifications - the dispatcher's stored progress moves only forward: a higher floor on its stream, or the stream EVENTS is now", () => {
    const old = "2026-11-20T10:00:00.123456789Z";
    const recreated = "2026-11-21T08:30:00.5Z";
    expect(supersedes({ events_created: old, ack_floor: 5 }, undefined, false)).toBe(true);
    expect(supersedes({ events_created: old, ack_floor: 6 }, { events_created: old, ack_floor: 5 }, false)).toBe(true);
    expect(supersedes({ events_created: old, ack_floor: 5 }, { events_created: old, ack_floor: 5 }, true)).toBe(false);
    expect(supersedes({ events_created: old, ack_floor: 4 }, { events_created: old, ack_floor: 5 }, true)).toBe(false);
    // A stream created again starts low, and wins; the old stream's floor, however high, does not come
    // back; creation times are not compared (another server's clock may run behind).
    expect(supersedes({ events_created: recreated, ack_floor: 1 }, { events_created: old, ack_floor: 900 }, true)).toBe(true);
    expect(supersedes({ events_created: old, ack_floor: 900 }, { events_created: recreated, ack_floor: 1 }, false)).toBe(false);
    expect(supersedes({ events_created: old, ack_floor: 1 }, { events_created: recreated, ack_floor: 900 }, true)).toBe(true);
  });

  it("notifications - a configured schedule is used as given and ends after its last entry", () => {
    const schedule = { delaysMs: [0, 1000, 2000], jitter: false };
    expect([1, 2, 3, 4].map((n) => delayBefore(schedule, n))).toEqual([0, 1000, 2000, undefined]);
  });

  it("notifications - the default schedule jitters by at most 20%", () => {
    const schedule = { delaysMs: [0, 5000], jitter: true };
    expect(delayBefore(schedule, 1, () => 0.99)).toBe(0);
    expect(delayBefore(schedule, 2, () => 0)).toBe(4000);
    expect(delayBefore(schedule, 2, () => 1)).toBe(6000);
  });

  it("notifications - Retry-After pushes a retry later within the clamp, never earlier", () => {
    expect(parseRetryAfter("7")).toBe(7000);
    expect(parseRetryAfter(new Date(Date.now() + 10_000).toUTCString())).toBeGreaterThan(8000);
    expect(honourRetryAfter(5000, 7000)).toBe(7000);
    expect(honourRetryAfter(5000, 1000)).toBe(5000);
    expect(honourRetryAfter(5000, 3_600_000)).toBe(60_000);
    expect(honourRetryAfter(300_000, 3_600_000)).toBe(600_000);
  });

  it("notifications - signatures verify with the standardwebhooks library, old and new secret alike", () => {
    const [current, previous] = [newSecret(), newSecret()];
    const body = JSON.stringify({ hello: "world" });
    const headers = webhookHeaders([current, previous], "evt_1", body);
    expect(new Webhook(current).verify(body, headers)).toEqual({ hello: "world" });
    expect(new Webhook(previous).verify(body, headers)).toEqual({ hello: "world" });
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow();
    // Signing again with the same secret (its decoded key now reused) still verifies, for another id.
    const again = webhookHeaders([current], "evt_2", body);
    expect(again["webhook-signature"]).not.toBe(headers["webhook-signature"]?.split(" ")[0]);
    expect(new Webhook(current).verify(body, again)).toEqual({ hello: "world" });
  });

  it("notifications - data_source and object type filters decide matching", () => {
    const sub = { subscription_type: "PublishData" as const, data_source: "wells", drill_plan_object_types: ["/well/api/wells"] };
    expect(matches(sub, { data_source: "wells", object_type: "/well/api/wells" })).toBe(true);
    expect(matches(sub, { data_source: null, object_type: "/well/api/wells" })).toBe(false);
    expect(matches(sub, { data_source: "wells", object_type: "/zone/api/zones" })).toBe(false);
    expect(matches({ ...sub, data_source: null, drill_plan_object_types: null }, {})).toBe(true);
  });

  it("notifications - the CloudEvent carries id, source, type, subject and partitionid", () => {
    const ce = cloudEvent("evt_9", {
      event_id: "x",
      event_seq: 1,
      partition: "opendes",
      type: "PlanShared",
      time: "2026-01-01T00:00:00.000Z",
      object_type: "/well/api/wells",
      data: { a: 1 },
    });
    expect(ce).toEqual({
      specversion: "1.0",
      id: "evt_9",
      source: "/partitions/opendes",
      type: "PlanShared",
      time: "2026-01-01T00:00:00.000Z",
      subject: "/well/api/wells",
      datacontenttype: "application/json",
      partitionid: "opendes",
      data: { a: 1 },
    });
  });

  it("notifications - the admit semaphore counts deliveries, serves waiters in order and lets an oversize batch through alone", async () => {
    const slots = new Slots(10);
    expect(slots.acquire(8)).toBeUndefined();
    const order: string[] = [];
    const big = Promise.resolve(slots.acquire(5)).then(() => order.push("big"));
    const small = Promise.resolve(slots.acquire(1)).then(() => order.push("small"));
    await Promise.resolve();
    expect(order).toEqual([]); // the small one waits behind the big one, in order
    slots.release(8);
    await Promise.all([big, small]);
    expect(order).toEqual(["big", "small"]);
    expect(slots.inUse).toBe(6);
    slots.release(6);
    expect(slots.acquire(64)).toBeUndefined(); // larger than the capacity, but nothing else is held
    const idle = slots.idle();
    slots.release(64);
    await idle;
    expect(slots.inUse).toBe(0);
  });
});

describe("notifications delivery log", () => {
  const at = (s: number) => new Date(Date.UTC(2026, 10, 25, 10, 0, s)).toISOString();
  const made = (event_id: string, attempt: number, state: AttemptRecord["state"], next?: number): AttemptRecord => ({
    event_id,
    event_seq: 1,
    attempt,
    state,
    status_code: state === "succeeded" ? 200 : 503,
    duration_ms: 5,
    attempted_at: at(attempt),
    ...(next !== undefined ? { next_attempt_at: at(next) } : {}),
  });
  const rows = (log: ReturnType<typeof deliveryLog>) => log.map((d) => [d.event_id, d.attempt, d.state]);

  it("notifications - the log lists failed attempts failed, the booked next one pending, and nothing pending once it is made", () => {
    expect(rows(deliveryLog([made("a", 1, "failed", 9)], 100))).toEqual([
      ["a", 2, "pending"],
      ["a", 1, "failed"],
    ]);
    expect(deliveryLog([made("a", 1, "failed", 9)], 100)[0]).toEqual({
      event_id: "a",
      attempt: 2,
      state: "pending",
      next_attempt_at: at(9),
    });
    expect(rows(deliveryLog([made("a", 1, "failed", 9), made("a", 2, "failed", 19), made("a", 3, "dead")], 100))).toEqual([
      ["a", 3, "dead"],
      ["a", 2, "failed"],
      ["a", 1, "failed"],
    ]);
    // Interleaved events: each pending entry sits just above its event's last attempt; a manual failure books nothing.
    expect(
      rows(deliveryLog([made("a", 1, "failed", 9), made("b", 1, "failed", 9), made("a", 2, "succeeded"), made("c", 4, "failed")], 100)),
    ).toEqual([
      ["c", 4, "failed"],
      ["a", 2, "succeeded"],
      ["b", 2, "pending"],
      ["b", 1, "failed"],
      ["a", 1, "failed"],
    ]);
  });

  it("notifications - records stored pending by earlier versions were attempts made: listed failed, with at most one pending successor", () => {
    expect(rows(deliveryLog([made("a", 1, "pending", 9), made("a", 2, "pending", 19)], 100))).toEqual([
      ["a", 3, "pending"],
      ["a", 2, "failed"],
      ["a", 1, "failed"],
    ]);
    expect(rows(deliveryLog([made("a", 1, "pending", 9), made("a", 2, "dead")], 100))).toEqual([
      ["a", 2, "dead"],
      ["a", 1, "failed"],
    ]);
  });

  it("notifications - the log keeps to its limit, newest first, the pending entry counted", () => {
    expect(rows(deliveryLog([made("a", 1, "succeeded"), made("b", 1, "failed", 9)], 2))).toEqual([
      ["b", 2, "pending"],
      ["b", 1, "failed"],
    ]);
    expect(rows(deliveryLog([made("a", 1, "succeeded"), made("b", 1, "failed", 9)], 1))).toEqual([["b", 2, "pending"]]);
  });
});

describe("notifications handlers without servers", () => {
  it("notifications - an upsert that keeps losing the race to concurrent writers answers 503 with Retry-After, like every 503", async () => {
    // A store where another writer always wins: no subscription is found, and each create finds one made meanwhile.
    const store = { indexOf: async () => undefined, create: async () => false } as unknown as SubscriptionStore;
    const deps = { store, view: {} as SubscriptionCache, journal: {} as Journal, policy: callbackPolicy({ allowHttp: false }) };
    const caller = { principal: { clientId: "alpha", subject: "alpha", groups: [], kind: "service" as const }, partition: "opendes" };
    const error = await upsertSubscription(
      "PublishData",
      { subscriber: "s", callback_uri: "https://example.com/hook" },
      caller,
      deps,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DerrickError);
    expect((error as DerrickError).status).toBe(503);
    expect(Number((error as DerrickError).headers["Retry-After"])).toBeGreaterThan(0);
  });
});
