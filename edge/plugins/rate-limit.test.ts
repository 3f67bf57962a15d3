import { describe, expect, it } from "vitest";
import { createRateLimiter } from "./rate-limit.ts";
import { DerrickError } from "../../subjects/index.ts";

describe("token bucket", () => {
  it("rate limit - a client gets its burst, then one request per refill interval, each client its own bucket", () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 10, burst: 3, now: () => now });
    for (let i = 0; i < 3; i++) limiter.take("a");
    expect(() => limiter.take("a")).toThrow(DerrickError);
    limiter.take("b");
    now += 100; // one token back at 10/s
    limiter.take("a");
    expect(() => limiter.take("a")).toThrow(DerrickError);
    now += 10_000; // refills only up to the burst
    for (let i = 0; i < 3; i++) limiter.take("a");
    expect(() => limiter.take("a")).toThrow(DerrickError);
  });

  it("rate limit - the refusal is 429 with Retry-After in whole seconds until a token is back", () => {
    let now = 0;
    const limiter = createRateLimiter({ perSecond: 0.25, burst: 1, now: () => now });
    limiter.take("a");
    try {
      limiter.take("a");
      expect.unreachable();
    } catch (error) {
      expect((error as DerrickError).status).toBe(429);
      expect((error as DerrickError).headers["Retry-After"]).toBe("4");
    }
    now += 4_000;
    limiter.take("a");
  });

  it("rate limit - 0 per second lets everything through", () => {
    const limiter = createRateLimiter({ perSecond: 0, burst: 1 });
    for (let i = 0; i < 1000; i++) limiter.take("a");
  });
});

describe("rate configuration", () => {
  it("rate limit - DERRICK_RATE_LIMIT reads 200, 200/s, 6000/m and 50/100ms as requests per second, and refuses nonsense", async () => {
    const { loadConfig, ConfigError } = await import("../../config/index.ts");
    const rate = (raw: string) => loadConfig({ DERRICK_RATE_LIMIT: raw }).http.rateLimit;
    expect([rate("200"), rate("200/s"), rate("6000/m"), rate("20/100ms"), rate("0")]).toEqual([200, 200, 100, 200, 0]);
    expect(() => rate("fast")).toThrow(ConfigError);
  });
});
