import { describe, expect, it } from "vitest";
import { settle } from "../../../platform/clock.ts";
import { EVENT_WEIGHT_MAX, IN_FLIGHT, PULL_EVENTS, PullBudget, weightOf } from "./pull-budget.ts";

describe("notifications dispatcher: the pull budget", () => {
  it("notifications pull budget - a pull asks only for as many events as fit at the largest size; smaller events free the rest as they arrive", async () => {
    const budget = new PullBudget(10 * EVENT_WEIGHT_MAX);
    expect(await budget.reserve()).toBe(10);
    expect(budget.bytesInUse).toBe(10 * EVENT_WEIGHT_MAX);
    for (let i = 0; i < 3; i++) budget.arrived(100);
    budget.pulled(10, 3);
    // Three small events held: the next pull may ask for nearly ten again.
    expect(budget.bytesInUse).toBe(3 * weightOf(100));
    expect(await budget.reserve()).toBe(9);
    budget.pulled(9, 0);
    budget.done([100, 100, 100]);
    expect([budget.bytesInUse, budget.eventsInUse]).toEqual([0, 0]);
  });

  it("notifications pull budget - the byte bound holds whatever the events weigh: with large events held, a pull waits for room", async () => {
    const budget = new PullBudget(4 * EVENT_WEIGHT_MAX);
    expect(await budget.reserve()).toBe(4);
    const sizes = [1, 2, 3, 4].map(() => EVENT_WEIGHT_MAX - weightOf(0));
    for (const size of sizes) budget.arrived(size);
    budget.pulled(4, 4);
    expect(budget.bytesInUse).toBeLessThanOrEqual(4 * EVENT_WEIGHT_MAX);
    let asked: number | undefined;
    void budget.reserve().then((n) => (asked = n));
    await settle();
    expect(asked).toBeUndefined();
    budget.done(sizes.slice(0, 2));
    await settle();
    expect(asked).toBe(2);
  });

  it("notifications pull budget - at most IN_FLIGHT events are held or asked for, a pull's worth at a time", async () => {
    const budget = new PullBudget(1024 * 1024 * 1024);
    const pulls = IN_FLIGHT / PULL_EVENTS;
    for (let i = 0; i < pulls; i++) expect(await budget.reserve()).toBe(PULL_EVENTS);
    let more = false;
    void budget.reserve().then(() => (more = true));
    await settle();
    expect(more).toBe(false);
    budget.pulled(PULL_EVENTS, 0);
    await settle();
    expect(more).toBe(true);
  });
});
