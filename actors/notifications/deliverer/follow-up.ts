import { delayBefore, honourRetryAfter, type Schedule } from "../schedule.ts";
import type { CallOutcome } from "./webhook-poster.ts";

/** What an attempt leads to, decided from its outcome alone. */
export type FollowUp =
  | "succeeded"
  /** The event left EVENTS before the attempt: dead at once, not counted against the receiver. */
  | "event-gone"
  /** Standard Webhooks: 410 Gone means the receiver wants no more: paused until re-posted. */
  | "receiver-gone"
  /** A manual retry that failed: recorded, nothing more (its dead letter stays). */
  | "record-only"
  /** A failed scheduled attempt: the next one is booked, or the delivery is dead. */
  | "retry";

export function followUp(outcome: CallOutcome, eventFound: boolean, manual: boolean): FollowUp {
  if (outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300) return "succeeded";
  if (!eventFound) return manual ? "record-only" : "event-gone";
  if (outcome.status === 410) return "receiver-gone";
  return manual ? "record-only" : "retry";
}

/** When the attempt after `attempt` is due, or undefined when the schedule is exhausted (the delivery is dead). */
export function nextAttemptAt(
  schedule: Schedule,
  attempt: number,
  finished: number,
  retryAfter: number | undefined,
  random: () => number = Math.random,
): number | undefined {
  const scheduled = delayBefore(schedule, attempt + 1, random);
  return scheduled === undefined ? undefined : finished + honourRetryAfter(scheduled, retryAfter);
}

/**
 * Whether a failure streak that began at `since` still counts at `now`. Like Svix's cached first-failure
 * time, a streak expires twice the pause window after it began: one failure long ago does not make
 * today's first failure count as failing for days.
 */
export function streakLive(since: number | undefined, now: number, pauseAfterMs: number): since is number {
  return since !== undefined && now - since < 2 * pauseAfterMs;
}

/** Svix's rule for disabling: a delivery that exhausted its retries pauses the subscription when its failures began a pause window ago. */
export function pausesSubscription(failingSince: number, finished: number, pauseAfterMs: number): boolean {
  return finished - failingSince >= pauseAfterMs;
}
