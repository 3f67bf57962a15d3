/**
 * Request rate per client: one token bucket per client id (the verified token's client), refilled at
 * `DERRICK_RATE_LIMIT` per second up to `DERRICK_RATE_BURST`. A request finding its bucket empty is
 * refused with 429 problem+json and `Retry-After` (whole seconds until one token is back), before any
 * NATS request is made. Keyed after authentication, so a forged token cannot drain another client's
 * bucket. Buckets live in this edge process only: N edges allow N× the rate (documented).
 */
import { tooManyRequests } from "../../subjects/index.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";

/** Idle buckets beyond this many are dropped, least recently used first. */
const MAX_BUCKETS = 50_000;

export type RateLimiter = {
  /** Takes one token for `key` or throws 429 with Retry-After. */
  take(key: string): void;
};

export type TokenBucketOptions = { perSecond: number; burst: number; now?: () => number };

/** A limiter of `perSecond` tokens per second with room for `burst`; perSecond 0 lets everything through. */
export function createRateLimiter({ perSecond, burst, now = () => performance.now() }: TokenBucketOptions): RateLimiter {
  if (perSecond <= 0) return { take() {} };
  // Least recently used first: an idle bucket is full again, so dropping it loses nothing.
  const buckets = new BoundedCache<string, { tokens: number; at: number }>({ max: MAX_BUCKETS });
  const perMs = perSecond / 1000;
  return {
    take(key) {
      const t = now();
      let bucket = buckets.get(key);
      if (bucket) {
        bucket.tokens = Math.min(burst, bucket.tokens + (t - bucket.at) * perMs);
        bucket.at = t;
      } else {
        bucket = { tokens: burst, at: t };
        buckets.set(key, bucket);
      }
      if (bucket.tokens < 1) {
        const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000));
        throw tooManyRequests(
          `client ${key} is over its request rate of ${perSecond}/s (burst ${burst}); retry after ${retryAfter} s`,
          retryAfter,
        );
      }
      bucket.tokens -= 1;
    },
  };
}
