import { BoundedCache } from "./bounded-cache.ts";

/**
 * At most one log line per key and interval, with the count of those held back: a receiver that fails
 * every attempt must not fill the log, yet its operator sees that it still fails and how often.
 * Bounded: the oldest keys are forgotten past `maxKeys`.
 */
export class LogThrottle {
  /** Read only with peek: the key logged longest ago is forgotten first. */
  private readonly last: BoundedCache<string, { at: number; held: number }>;

  constructor(
    private readonly intervalMs = 60_000,
    maxKeys = 10_000,
    private readonly now: () => number = Date.now,
  ) {
    this.last = new BoundedCache({ max: maxKeys });
  }

  /** Undefined when this key logged within the interval (counted); else how many were held back since. */
  take(key: string): number | undefined {
    const now = this.now();
    const seen = this.last.peek(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return undefined;
    }
    this.last.set(key, { at: now, held: 0 });
    return seen?.held ?? 0;
  }
}
