import { describe, expect, it } from "vitest";
import { FailureThrottle } from "./throttle.ts";
import { AdmissionGate } from "../runtime/limiter.ts";

describe("token endpoint guards", () => {
  it("auth - a client id is locked after maxFailures failures in its window, until the window ends", () => {
    let now = 0;
    const throttle = new FailureThrottle({ maxFailures: 3, windowMs: 60_000, now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(throttle.retryAfter("alpha")).toBe(0);
      throttle.failed("alpha");
      now += 1_000;
    }
    // The window began at the first failure (t = 0): 57 s of it are left.
    expect(throttle.retryAfter("alpha")).toBe(57);
    expect(throttle.retryAfter("beta")).toBe(0);
    now = 59_500;
    expect(throttle.retryAfter("alpha")).toBe(1);
    now = 60_000;
    expect(throttle.retryAfter("alpha")).toBe(0);
    throttle.failed("alpha"); // a new window
    expect(throttle.retryAfter("alpha")).toBe(0);
  });

  it("auth - a success clears the failures of its client id; maxFailures 0 never locks", () => {
    const throttle = new FailureThrottle({ maxFailures: 2, windowMs: 60_000 });
    throttle.failed("alpha");
    throttle.succeeded("alpha");
    throttle.failed("alpha");
    expect(throttle.retryAfter("alpha")).toBe(0);
    const off = new FailureThrottle({ maxFailures: 0, windowMs: 60_000 });
    for (let i = 0; i < 100; i++) off.failed("alpha");
    expect(off.retryAfter("alpha")).toBe(0);
    expect(off.size).toBe(0);
  });

  it("auth - the failure table stays bounded: ended windows go first, then the oldest", () => {
    let now = 0;
    const throttle = new FailureThrottle({ maxFailures: 1, windowMs: 10_000, now: () => now, maxTracked: 3 });
    throttle.failed("old");
    now = 5_000;
    throttle.failed("locked-1");
    throttle.failed("locked-2");
    now = 11_000; // "old" has ended, the others are live
    throttle.failed("new");
    expect(throttle.size).toBe(3);
    expect(throttle.retryAfter("locked-1")).toBe(4);
    expect(throttle.retryAfter("locked-2")).toBe(4);
    throttle.failed("newer"); // full of live windows: the oldest one goes
    expect(throttle.size).toBe(3);
    expect(throttle.retryAfter("locked-1")).toBe(0);
    expect(throttle.retryAfter("newer")).toBe(10);
  });

  it("auth - the admission gate runs at most max tasks, queues at most queueMax, refuses the rest without running them", async () => {
    const gate = new AdmissionGate(2, 1);
    const releases: Array<() => void> = [];
    let started = 0;
    const task = () => {
      const id = ++started;
      return new Promise<number>((resolve) => releases.push(() => resolve(id)));
    };
    const running = [gate.tryRun(task), gate.tryRun(task)];
    const queued = gate.tryRun(task);
    expect(running.every(Boolean) && queued).toBeTruthy();
    expect(gate.tryRun(task)).toBeUndefined();
    expect(started).toBe(2);
    expect(gate.load).toEqual({ running: 2, waiting: 1 });
    const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
    releases.shift()!();
    await running[0];
    await settle();
    // The freed slot went to the queued task, not back to the pool.
    expect(started).toBe(3);
    expect(gate.load).toEqual({ running: 2, waiting: 0 });
    const last = gate.tryRun(task);
    expect(last).toBeDefined();
    expect(gate.tryRun(task)).toBeUndefined();
    while (releases.length) {
      releases.shift()!();
      await settle();
    }
    expect(await queued).toBe(3);
    expect(await last).toBe(4);
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it("auth - a failing task frees its slot", async () => {
    const gate = new AdmissionGate(1, 0);
    await expect(gate.tryRun(() => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
    expect(await gate.tryRun(async () => 7)).toBe(7);
  });
});
