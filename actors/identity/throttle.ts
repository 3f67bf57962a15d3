/**
 * Failed client authentications per client id, so secrets cannot be guessed online without limit: after `maxFailures`
 * within `windowMs` (from the first) the id is refused until the window ends, unknown ids counted alike. In memory, not
 * KV: a count is worthless after its window, a restart gives one more window at most, and a KV write per failure would
 * let anyone load JetStream (docs/authentication.md). Bounded: entries cost a secret check each, and those are bounded
 * (AdmissionGate), so a flood of made-up ids ends windows by time long before it pushes a live one out.
 */
import { BoundedCache } from "../../platform/bounded-cache.ts";

/** Client ids tracked at once; the oldest entry goes first beyond this. */
const MAX_TRACKED = 50_000;

export type FailureThrottleOptions = { maxFailures: number; windowMs: number; now?: () => number; maxTracked?: number };

export class FailureThrottle {
  /** Read only with peek, so in insertion order: ended windows lead it and go first when full, then the oldest live one. */
  private readonly failures: BoundedCache<string, { count: number; since: number }>;
  private readonly now: () => number;

  constructor(private readonly options: FailureThrottleOptions) {
    this.now = options.now ?? Date.now;
    this.failures = new BoundedCache({ max: options.maxTracked ?? MAX_TRACKED, ttlMs: options.windowMs, now: this.now });
  }

  /** Seconds until `key` may try again (≥ 1), or 0 when it may try now. */
  retryAfter(key: string): number {
    if (this.options.maxFailures <= 0) return 0;
    const entry = this.failures.peek(key);
    if (!entry || entry.count < this.options.maxFailures) return 0;
    return Math.max(1, Math.ceil((entry.since + this.options.windowMs - this.now()) / 1000));
  }

  failed(key: string): void {
    if (this.options.maxFailures <= 0) return;
    const entry = this.failures.peek(key);
    if (entry) {
      entry.count++;
      return;
    }
    this.failures.set(key, { count: 1, since: this.now() });
  }

  /** A success clears the id's failures. */
  succeeded(key: string): void {
    this.failures.delete(key);
  }

  /** How many ids are tracked (for tests and stats). */
  get size(): number {
    return this.failures.size;
  }
}
