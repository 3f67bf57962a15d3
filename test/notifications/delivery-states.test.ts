/**
 * The states `GET …/deliveries` gives each attempt: an attempt made that failed is `failed` even when
 * another follows, `pending` is only the booked attempt not made yet, and the last attempt of an
 * exhausted schedule is `dead`. A real receiver on loopback answers; it holds a request open while
 * the test reads the log, so what is in flight is known without timing.
 */
import { describe, expect } from "vitest";
import { eventually } from "../harness/index.ts";
import type { DeliveryAttempt } from "../../subjects/notifications.ts";
import { deliveries, deliveriesOnce, deliveryTest, publishedId, remove, subscribe } from "./helpers.ts";

/** The log as [attempt, state, status_code] rows, newest first. */
const rows = (log: DeliveryAttempt[]) => log.map((d) => [d.attempt, d.state, d.status_code]);

// A long delivery timeout: a request the receiver holds open stays one attempt in flight, however slow the machine.
const it = deliveryTest({ DERRICK_DELIVERY_SCHEDULE: "0,100ms,100ms", DERRICK_DELIVERY_TIMEOUT: "30s" });

describe("notifications delivery states", () => {
  it("notifications - a receiver failing twice then succeeding: each failed attempt is listed failed, the booked one pending until it is made", async ({
    derrick,
    receiver: r,
  }) => {
    // Request n waits for release[n] (n > 1); the first two answer 503, the third 200.
    const release = new Map<number, () => void>();
    r.respond = async (_req, count) => {
      if (count > 1) await new Promise<void>((resolve) => release.set(count, resolve));
      return new Response("nope", { status: count <= 2 ? 503 : 200 });
    };
    const sub = await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url });
    const event_id = await publishedId(derrick, "ReviewStateChanged", { data: { review: 1 } });

    // Attempt 2 is at the receiver: attempt 1 was made and failed; attempt 2 is not made yet.
    await eventually(() => release.has(2), { what: "the second attempt at the receiver" });
    let log = await deliveries(derrick, sub.subscription_id);
    expect(rows(log)).toEqual([
      [2, "pending", undefined],
      [1, "failed", 503],
    ]);
    expect(log.every((d) => d.event_id === event_id)).toBe(true);
    expect(log[0]!.next_attempt_at).toBe(log[1]!.next_attempt_at);
    expect(log[0]!.attempted_at).toBeUndefined();
    expect(log[1]!.attempted_at).toBeDefined();

    release.get(2)!();
    await eventually(() => release.has(3), { what: "the third attempt at the receiver" });
    log = await deliveries(derrick, sub.subscription_id);
    expect(rows(log)).toEqual([
      [3, "pending", undefined],
      [2, "failed", 503],
      [1, "failed", 503],
    ]);
    expect(log[0]!.next_attempt_at).toBe(log[1]!.next_attempt_at);

    release.get(3)!();
    log = await deliveriesOnce(derrick, sub.subscription_id, "succeeded", "the success recorded");
    expect(rows(log)).toEqual([
      [3, "succeeded", 200],
      [2, "failed", 503],
      [1, "failed", 503],
    ]);
    expect(log[0]!.next_attempt_at).toBeUndefined();
    for (const entry of log) expect(entry).toMatchObject({ event_id, attempted_at: expect.any(String), duration_ms: expect.any(Number) });
    expect(r.received.map((x) => x.id)).toEqual([event_id, event_id, event_id]);
    await remove(derrick, sub.subscription_id);
  });

  it("notifications - a receiver that always fails: the earlier attempts are listed failed and the last of the schedule dead", async ({
    derrick,
    receiver: r,
  }) => {
    r.respond = () => new Response(null, { status: 500 });
    const sub = await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url }, "beta");
    const event_id = await publishedId(derrick, "MasterPlanChanged", { data: "doomed" }, "opendes", "alpha");
    const log = await deliveriesOnce(derrick, sub.subscription_id, "dead", "the delivery dead", "beta");
    expect(rows(log)).toEqual([
      [3, "dead", 500],
      [2, "failed", 500],
      [1, "failed", 500],
    ]);
    for (const entry of log) expect(entry).toMatchObject({ event_id, attempted_at: expect.any(String), duration_ms: expect.any(Number) });
    // The failed ones booked a successor; the dead one booked none.
    expect(log.map((d) => d.next_attempt_at !== undefined)).toEqual([false, true, true]);
    expect(r.received.map((x) => x.id)).toEqual([event_id, event_id, event_id]);
    await remove(derrick, sub.subscription_id, "beta");
  });
});
