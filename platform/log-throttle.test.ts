import { describe, expect, it } from "vitest";
import { LogThrottle } from "./log-throttle.ts";

describe("log throttle", () => {
  it("log throttle - one line per key and interval, with the count held back since", () => {
    let now = 0;
    const throttle = new LogThrottle(1_000, 2, () => now);
    expect(throttle.take("a")).toBe(0);
    expect(throttle.take("a")).toBeUndefined();
    expect(throttle.take("a")).toBeUndefined();
    expect(throttle.take("b")).toBe(0);
    now = 1_000;
    expect(throttle.take("a")).toBe(2);
    expect(throttle.take("a")).toBeUndefined();
  });

  it("log throttle - the oldest key is forgotten past the bound", () => {
    const now = 0;
    const throttle = new LogThrottle(1_000, 2, () => now);
    throttle.take("a");
    throttle.take("b");
    throttle.take("c"); // forgets a
    expect(throttle.take("a")).toBe(0);
    expect(throttle.take("c")).toBeUndefined();
  });
});
