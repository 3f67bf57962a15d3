/**
 * The retry schedule: which delay comes before attempt n, jitter on the default schedule, and how a
 * receiver's Retry-After moves the next attempt (never earlier than scheduled, at most twice as late
 * or one minute, whichever is more: Svix's clamp).
 */
export type Schedule = { delaysMs: readonly number[]; jitter: boolean };

const JITTER = 0.2;
const RETRY_AFTER_FLOOR_MS = 60_000;

/** Delay before attempt `attempt` (1-based), or undefined when the schedule has no such attempt. */
export function delayBefore(schedule: Schedule, attempt: number, random: () => number = Math.random): number | undefined {
  const base = schedule.delaysMs[attempt - 1];
  if (base === undefined) return undefined;
  if (!schedule.jitter || base === 0) return base;
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

/** Parses Retry-After (delta seconds or an HTTP date) into milliseconds from `now`. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The delay actually used: the scheduled one, pushed later by Retry-After within the clamp. */
export function honourRetryAfter(scheduledMs: number, retryAfterMs: number | undefined): number {
  if (retryAfterMs === undefined) return scheduledMs;
  const ceiling = Math.max(2 * scheduledMs, RETRY_AFTER_FLOOR_MS);
  return Math.min(Math.max(retryAfterMs, scheduledMs), ceiling);
}
