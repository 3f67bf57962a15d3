import { noTracer } from "../../../platform/tracing.ts";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../../platform/logger.ts";
import { ManualClock, sleep } from "../../../platform/clock.ts";
import { HeldMessages, renewalPeriod } from "../held-messages.ts";
import type { StoredEvent } from "../journal.ts";
import type { SubscriptionRecord } from "../store.ts";
import {
  FairShare,
  INITIAL_PACE,
  MAX_BOOKING_FAST_MS,
  MAX_BOOKING_SLOW_MS,
  PACE_WINDOW_MS,
  SLOW_PACE,
  type FairShareOptions,
} from "./fair-share.ts";
import { ackWaitFor, PullLane } from "./pull-lane.ts";
import type { DeliveryMessage, ReceivedMessage } from "./work.ts";
import { WorkRunner, type ParkedWork } from "./work-runner.ts";

const encoder = new TextEncoder();

describe("notifications deliverer: the fair-share scheduler's decisions", () => {
  const options: FairShareOptions = { concurrency: 8, perSubscription: 2 };
  const scheduler = (o = options) => {
    const clock = new ManualClock();
    return { clock, fair: new FairShare<string>(o, clock, () => 0) };
  };

  it("notifications fair share - an idle subscription takes any message; a busy one holds at most perSubscription + max(that, a quarter of the concurrency)", () => {
    const { fair } = scheduler({ concurrency: 64, perSubscription: 2 });
    expect(fair.holdLimit).toBe(2 + 16);
    expect(fair.offer("s", 100, 1, "huge").kind).toBe("hold");
    const { fair: other } = scheduler();
    expect(other.holdLimit).toBe(4);
    expect(other.offer("s", 3, 1, "a").kind).toBe("hold");
    expect(other.offer("s", 1, 2, "b").kind).toBe("hold");
    expect(other.offer("s", 1, 3, "c").kind).not.toBe("hold");
    // Another subscription's share is its own.
    expect(other.offer("t", 4, 4, "d").kind).toBe("hold");
  });

  it("notifications fair share - at most perSubscription requests of a subscription run at once; a freed slot goes to the next waiting one", async () => {
    const { clock, fair } = scheduler();
    const decision = fair.offer("s", 4, 1, "m");
    if (decision.kind !== "hold") throw new Error("held expected");
    const started: number[] = [];
    const runs = [0, 1, 2, 3].map((i) =>
      fair.attempt(decision.share, async () => {
        started.push(i);
        await sleep(clock, 100 * (i + 1));
      }),
    );
    await clock.advance(0);
    expect(started).toEqual([0, 1]);
    expect(fair.running).toBe(2);
    await clock.advance(100);
    expect(started).toEqual([0, 1, 2]);
    await clock.advance(1000);
    await Promise.all(runs);
    expect(started).toEqual([0, 1, 2, 3]);
    expect(fair.running).toBe(0);
  });

  it("notifications fair share - a slot released early (the call is over) serves the next request while the first is still being recorded", async () => {
    const { clock, fair } = scheduler({ concurrency: 8, perSubscription: 1 });
    const decision = fair.offer("s", 2, 1, "m");
    if (decision.kind !== "hold") throw new Error("held expected");
    const started: number[] = [];
    const attempt = (i: number) =>
      fair.attempt(decision.share, async (release) => {
        started.push(i);
        release();
        await sleep(clock, 1000); // recording
      });
    const runs = [attempt(0), attempt(1)];
    await clock.advance(0);
    expect(started).toEqual([0, 1]);
    await clock.advance(1000);
    await Promise.all(runs);
  });

  it("notifications fair share - a subscription's pace is learnt from completions while it is saturated, not while it has room", async () => {
    const { clock, fair } = scheduler();
    const run = async (subscription: string, n: number, eachMs: number) => {
      const decision = fair.offer(subscription, n, 0, "m");
      if (decision.kind !== "hold") throw new Error("held expected");
      const runs = Array.from({ length: n }, () => fair.attempt(decision.share, () => sleep(clock, eachMs)));
      await clock.advance(eachMs * n);
      await Promise.all(runs);
      fair.finish(decision.share, n);
      return fair.shareOf(subscription)!;
    };
    // One item at a time (below perSubscription): completions tell nothing of the receiver's capacity.
    const idle = await run("idle", 1, 10 * PACE_WINDOW_MS);
    expect(idle.pace).toBe(INITIAL_PACE);
    // Four held, two at a time, each taking 10 windows: the pace halves towards 2 items per 10 windows.
    const busy = await run("busy", 4, 10 * PACE_WINDOW_MS);
    expect(busy.pace).toBeLessThan(INITIAL_PACE);
    expect(busy.pace).toBeGreaterThan(0);
  });

  it("notifications fair share - work beyond a fast subscription's share is parked (up to its pace × PARK_MS, half the process's parking), then sent away booked at its pace", () => {
    const { fair } = scheduler();
    expect(fair.offer("s", 4, 1, "held").kind).toBe("hold");
    // Parking: at most 8 × concurrency = 64 items in the process, 32 for one subscription.
    expect(fair.offer("s", 20, 2, "p1")).toEqual({ kind: "park" });
    expect(fair.offer("s", 12, 3, "p2")).toEqual({ kind: "park" });
    expect(fair.parked).toBe(32);
    // Sent away behind what is held (4) and parked (32), beyond the share (4): (4 + 32 + 8 − 4) × 0.75 / pace 8 = 3.75 ms.
    expect(fair.offer("s", 8, 4, "a1")).toEqual({ kind: "send-away", delayMs: 4 });
    // Then behind that too: + 8 away, (4 + 32 + 8 + 8 − 4) × 0.75 / 8 = 4.5 ms.
    expect(fair.offer("s", 8, 5, "a2")).toEqual({ kind: "send-away", delayMs: 5 });
    // A message back from being sent away is no longer counted as ahead.
    fair.returned(4);
    fair.returned(5);
    expect(fair.offer("s", 8, 6, "a3")).toEqual({ kind: "send-away", delayMs: 4 });
  });

  it("notifications fair share - parked work starts when its subscription's share has room, in the order parked, counted as held", () => {
    const { fair } = scheduler();
    const held = fair.offer("s", 4, 1, "first");
    if (held.kind !== "hold") throw new Error("held expected");
    fair.offer("s", 2, 2, "second");
    fair.offer("s", 3, 3, "third");
    fair.offer("s", 1, 4, "fourth");
    // Four items done: 2 + 1 fit in the share (4); the third (3) does not fit beside the second.
    expect(fair.finish(held.share, 4)).toEqual(["second"]);
    expect(fair.shareOf("s")!.held).toBe(2);
    expect(fair.finish(held.share, 2)).toEqual(["third", "fourth"]);
    expect(fair.parked).toBe(0);
  });

  it("notifications fair share - a slow subscription's work is never parked, and is booked at its pace up to a minute away", async () => {
    const { clock, fair } = scheduler();
    const decision = fair.offer("slow", 4, 1, "m");
    if (decision.kind !== "hold") throw new Error("held expected");
    // Each request answers after 10 s while the share is saturated: the pace halves each time towards 1 per 10 s.
    for (let i = 0; i < 20; i++) {
      const attempt = fair.attempt(decision.share, () => sleep(clock, 10_000));
      await clock.advance(10_000);
      await attempt;
    }
    const pace = fair.shareOf("slow")!.pace;
    expect(pace).toBeLessThan(SLOW_PACE);
    // One item beyond the share: booked for when one item has drained (×0.75), not parked.
    expect(fair.offer("slow", 1, 2, "one")).toEqual({ kind: "send-away", delayMs: Math.round((0.75 * 1) / pace) });
    expect(fair.offer("slow", 100, 3, "many")).toEqual({ kind: "send-away", delayMs: MAX_BOOKING_SLOW_MS });
    expect(fair.parked).toBe(0);
  });

  it("notifications fair share - a fast subscription's work is booked at most a second away (its pace estimate can be off under load)", () => {
    const { fair } = scheduler();
    fair.offer("fast", 4, 1, "held");
    expect(fair.offer("fast", 50_000, 2, "flood")).toEqual({ kind: "send-away", delayMs: MAX_BOOKING_FAST_MS });
  });

  it("notifications fair share - a closed scheduler parks nothing more and hands back what was parked", () => {
    const { fair } = scheduler();
    fair.offer("s", 4, 1, "held");
    fair.offer("s", 2, 2, "parked");
    expect(fair.close()).toEqual(["parked"]);
    expect(fair.parked).toBe(0);
    expect(fair.offer("s", 2, 3, "late").kind).toBe("send-away");
  });

  it("notifications fair share - a subscription unseen for five minutes with nothing held, parked or away is forgotten (its pace with it)", async () => {
    const { clock, fair } = scheduler();
    const decision = fair.offer("gone", 1, 1, "m");
    if (decision.kind !== "hold") throw new Error("held expected");
    await clock.advance(6 * 60_000);
    fair.sweep();
    expect(fair.shareOf("gone")).toBeDefined(); // still holds its item
    fair.finish(decision.share, 1);
    fair.sweep();
    expect(fair.shareOf("gone")).toBeUndefined();
  });
});

/**
 * The scheduler as the deliverer runs it: messages received by a pull lane (in order, each started
 * once its items have room), run by the work runner, posted to receivers that answer after a set time
 * on a manual clock. Only NATS and HTTP are left out.
 */
function deliverer(options: FairShareOptions & { timeoutMs: number }) {
  const clock = new ManualClock();
  const fairShare = new FairShare<ParkedWork>(options, clock, () => 0);
  const held = new HeldMessages<DeliveryMessage>(clock);
  const requests: Array<{ subscription: string; at: number }> = [];
  /** How long each subscription's receiver takes to answer (ms); a hanging one answers never, so the timeout ends it. */
  const answerAfter = new Map<string, number>();
  const stats = { attempts: 0, overflowed: 0, parked: 0 };
  const record = (id: string) => ({ subscription_id: id, callback_uri: `http://127.0.0.1/${id}` }) as SubscriptionRecord;
  const log = createLogger("silent");
  const runner = new WorkRunner({
    fairShare,
    held,
    events: { eventOf: (item) => ({ event_id: item.event_id }) as StoredEvent, bodyOf: () => "{}" },
    poster: {
      async call(subscription) {
        requests.push({ subscription: subscription.subscription_id, at: clock.now() });
        const after = answerAfter.get(subscription.subscription_id) ?? 0;
        await sleep(clock, Math.min(after, options.timeoutMs));
        return after > options.timeoutMs ? { error: `timed out after ${options.timeoutMs} ms` } : { status: 204 };
      },
    },
    recorder: { record: async () => undefined, pausedAway: async () => undefined },
    cache: { get: record, load: async (id) => record(id) },
    store: { get: async () => undefined },
    stats,
    clock,
    log,
    tracer: noTracer,
  });
  const lane = new PullLane("deliveries", {} as never, Number.POSITIVE_INFINITY, {
    journal: {} as never,
    room: fairShare.room,
    held,
    start: (msg, work, from) => runner.start(msg, work, from),
    clock,
    log,
  });
  const stopRenewal = clock.every(renewalPeriod(ackWaitFor(options.timeoutMs)), () => held.renew());
  let seq = 0;
  /** A first-attempt batch of `n` events for the subscription, handed to the lane now; the message records what was done with it and when. */
  const receive = (subscription: string, n: number) => {
    const answers: Array<{ what: string; at: number }> = [];
    const note = (what: string) => () => void answers.push({ what, at: clock.now() });
    const batch = {
      partition: "opendes",
      type: "PlanShared",
      subscription_id: subscription,
      due_at: 0,
      events: Array.from({ length: n }, (_, i) => ({ event_id: `${subscription}-${seq}-${i}`, event_seq: i + 1 })),
    };
    const msg = {
      seq: ++seq,
      subject: `derrick.deliveries.opendes.${subscription}`,
      data: encoder.encode(JSON.stringify(batch)),
      ack: note("ack"),
      nak: (ms?: number) => void answers.push({ what: `nak ${ms ?? 0}`, at: clock.now() }),
      term: note("term"),
      working: note("working"),
      answers,
      receivedAt: clock.now(),
    };
    lane.receive(msg as ReceivedMessage);
    return msg;
  };
  const startsOf = (subscription: string) => requests.filter((r) => r.subscription === subscription).map((r) => r.at);
  return { clock, receive, startsOf, answerAfter, stats, fairShare, stopRenewal };
}

describe("notifications deliverer: fair share as the deliverer runs it", () => {
  const TIMEOUT_MS = 1_500;

  it("notifications fair share - one slow receiver holds its share only: another subscription is delivered at once", async () => {
    const d = deliverer({ concurrency: 8, perSubscription: 2, timeoutMs: TIMEOUT_MS });
    d.answerAfter.set("slow", Number.POSITIVE_INFINITY);
    // More work for the slow receiver than the whole process takes: it holds 4 (2 running), the rest waits elsewhere.
    const slow = [d.receive("slow", 4), d.receive("slow", 4), d.receive("slow", 4)];
    d.receive("other", 1);
    await d.clock.advance(0);
    expect(d.startsOf("other")).toEqual([0]);
    expect(d.startsOf("slow")).toEqual([0, 0]);
    expect(d.stats.parked).toBe(8);
    // The slow receiver's work goes on at its pace: every message is done and acked once.
    await d.clock.advance(6 * TIMEOUT_MS);
    expect(d.startsOf("slow")).toHaveLength(12);
    for (const m of slow) expect(m.answers.filter((a) => a.what !== "working").map((a) => a.what)).toEqual(["ack"]);
    d.stopRenewal();
  });

  it("notifications fair share - slow receivers that together fill the deliverer delay the others until a message of theirs is done: its deliveries / perSubscription timeouts", async () => {
    const d = deliverer({ concurrency: 8, perSubscription: 2, timeoutMs: TIMEOUT_MS });
    for (const s of ["alpha", "beta"]) d.answerAfter.set(s, Number.POSITIVE_INFINITY);
    d.receive("alpha", 4);
    d.receive("beta", 4);
    d.receive("other", 1);
    await d.clock.advance(TIMEOUT_MS);
    // One timeout: each slow message's first two deliveries ended, the other two run; no room was freed.
    expect(d.startsOf("alpha")).toEqual([0, 0, TIMEOUT_MS, TIMEOUT_MS]);
    expect(d.startsOf("other")).toEqual([]);
    await d.clock.advance(TIMEOUT_MS);
    // Four deliveries, two at a time: the messages are done, and their room goes to the waiting one, after exactly two timeouts.
    expect(d.startsOf("other")).toEqual([Math.ceil(4 / 2) * TIMEOUT_MS]);
    d.stopRenewal();
  });

  it("notifications ack wait - messages that wait for room longer than the ack wait are renewed from receipt until they are answered, and answered once", async () => {
    // The deliverer held by one hanging receiver's batch of four, one at a time, for four timeouts.
    const d = deliverer({ concurrency: 2, perSubscription: 1, timeoutMs: 2_000 });
    const ackWait = ackWaitFor(2_000);
    d.answerAfter.set("slow", Number.POSITIVE_INFINITY);
    const slow = d.receive("slow", 4);
    const first = d.receive("first", 1);
    await d.clock.advance(300);
    const second = d.receive("second", 1);
    await d.clock.advance(10 * ackWait);
    expect(d.startsOf("first")[0]).toBeGreaterThan(ackWait);
    for (const m of [slow, first, second]) {
      const answers = m.answers.filter((a) => a.what !== "working");
      expect(answers.map((a) => a.what)).toEqual(["ack"]);
      // From receipt to the ack, never an ack wait without a renewal (JetStream would hand the message over again).
      const times = [m.receivedAt, ...m.answers.filter((a) => a.what === "working").map((a) => a.at), answers[0]!.at];
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      expect(Math.max(...gaps)).toBeLessThan(ackWait);
      // Nothing renewed once answered.
      expect(m.answers.at(-1)!.what).toBe("ack");
    }
    d.stopRenewal();
  });
});
