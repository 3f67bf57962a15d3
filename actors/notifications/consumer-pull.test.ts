import { describe, expect, it } from "vitest";
import { pullRetryDelay } from "./consumer-pull.ts";

describe("notifications consumer pull", () => {
  it("notifications consumer pull - failed pulls are retried after 100 ms, doubling up to 2 s", () => {
    expect([0, 1, 2, 3, 4, 5, 10].map(pullRetryDelay)).toEqual([100, 200, 400, 800, 1_600, 2_000, 2_000]);
  });
});
