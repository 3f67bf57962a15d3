import { describe, expect, it } from "vitest";
import { followUp, nextAttemptAt, pausesSubscription, streakLive } from "./follow-up.ts";

describe("notifications deliverer: what follows an attempt", () => {
  it("notifications follow-up - a 2xx succeeds; 410 pauses the subscription; other failures are retried, a manual replay only recorded", () => {
    for (const status of [200, 204, 299]) expect(followUp({ status }, true, false)).toBe("succeeded");
    expect(followUp({ status: 410 }, true, false)).toBe("receiver-gone");
    expect(followUp({ status: 410 }, true, true)).toBe("receiver-gone");
    for (const outcome of [{ status: 300 }, { status: 500 }, { status: 429, retryAfter: 5000 }, { error: "timed out after 1000 ms" }]) {
      expect(followUp(outcome, true, false)).toBe("retry");
      expect(followUp(outcome, true, true)).toBe("record-only");
    }
  });

  it("notifications follow-up - an event gone before its attempt is dead at once (a manual replay of it is only recorded)", () => {
    expect(followUp({ error: "the event is no longer stored" }, false, false)).toBe("event-gone");
    expect(followUp({ error: "the event is no longer stored" }, false, true)).toBe("record-only");
  });

  it("notifications follow-up - the next attempt is due after the schedule's delay, pushed later by Retry-After within the clamp; none after the last", () => {
    const schedule = { delaysMs: [0, 1_000, 60_000], jitter: false };
    expect(nextAttemptAt(schedule, 1, 10_000, undefined)).toBe(11_000);
    expect(nextAttemptAt(schedule, 1, 10_000, 30_000)).toBe(10_000 + 30_000);
    expect(nextAttemptAt(schedule, 1, 10_000, 3_600_000)).toBe(10_000 + 60_000);
    expect(nextAttemptAt(schedule, 2, 10_000, undefined)).toBe(70_000);
    expect(nextAttemptAt(schedule, 3, 10_000, undefined)).toBeUndefined();
    expect(nextAttemptAt({ delaysMs: [0, 10_000], jitter: true }, 1, 0, undefined, () => 0)).toBe(8_000);
  });

  it("notifications follow-up - a failure streak counts for twice the pause window; an exhausted delivery pauses the subscription once the streak is a window old", () => {
    const pauseAfter = 1_000;
    expect(streakLive(undefined, 5_000, pauseAfter)).toBe(false);
    expect(streakLive(4_000, 5_000, pauseAfter)).toBe(true);
    expect(streakLive(3_001, 5_000, pauseAfter)).toBe(true);
    expect(streakLive(3_000, 5_000, pauseAfter)).toBe(false);
    expect(pausesSubscription(4_000, 5_000, pauseAfter)).toBe(true);
    expect(pausesSubscription(4_001, 5_000, pauseAfter)).toBe(false);
  });
});
