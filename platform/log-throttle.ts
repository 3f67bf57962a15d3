/**
 * At most one log line per key and interval, with the count of those held back: a receiver that fails
 * every attempt must not fill the log, yet its operator sees that it still fails and how often.
 * Bounded: the oldest keys are forgotten past `maxKeys`.
 */
export class LogThrottle {
  private readonly last = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly intervalMs = 60_000,
    private readonly maxKeys = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Undefined when this key logged within the interval (counted); else how many were held back since. */
  take(key: string): number | undefined {
    const now = this.now();
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.held++;
      return undefined;
    }
    this.last.delete(key);
    if (this.last.size >= this.maxKeys) this.last.delete(this.last.keys().next().value!);
    this.last.set(key, { at: now, held: 0 });
    return seen?.held ?? 0;
  }
}
