import { LogThrottle } from "../../../platform/log-throttle.ts";
import type { Logger } from "../../../platform/logger.ts";
import type { Clock } from "../../../platform/clock.ts";
import { carriedPart, type AttemptRecord, type Journal, type StoredEvent } from "../journal.ts";
import type { Schedule } from "../schedule.ts";
import type { SubscriptionRecord, SubscriptionStore } from "../store.ts";
import { followUp, nextAttemptAt, pausesSubscription, streakLive } from "./follow-up.ts";
import type { CallOutcome } from "./webhook-poster.ts";
import type { Item } from "./work.ts";
import { traceIdField } from "../../../platform/trace-context.ts";

/** Why a delivery whose event left EVENTS (7 days) before its attempt could not be made. */
export const EVENT_GONE = "the event is no longer stored (EVENTS retention passed)";

export type OutcomeStats = { succeeded: number; failed: number; dead: number };

/** One attempt as made: the outcome of its call (or of finding its event), and when it began and ended. */
export type Attempt = {
  job: Item;
  subscription: SubscriptionRecord;
  event: StoredEvent | undefined;
  outcome: CallOutcome;
  started: number;
  finished: number;
};

/**
 * Records each attempt in ATTEMPTS and stores its follow-up (the next retry, a dead letter, a paused
 * subscription) before the caller acks: a deliverer killed in between loses nothing.
 */
export class OutcomeRecorder {
  /** A warning per failed attempt, at most one a minute per subscription (with the count held back). */
  private readonly failureLog: LogThrottle;

  constructor(
    private readonly journal: Pick<Journal, "recordAttempt" | "enqueue" | "deadLetter" | "forgetDead">,
    private readonly store: Pick<SubscriptionStore, "modify">,
    private readonly options: { schedule: Schedule; pauseAfterMs: number; observeDuration?: (seconds: number) => void },
    private readonly stats: OutcomeStats,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    this.failureLog = new LogThrottle(undefined, undefined, () => clock.now());
  }

  async record(a: Attempt): Promise<void> {
    const { job, subscription, event, outcome } = a;
    const record: AttemptRecord = {
      event_id: job.event_id,
      event_seq: job.event_seq,
      attempt: job.attempt,
      state: "failed",
      ...(outcome.status !== undefined ? { status_code: outcome.status } : {}),
      ...(outcome.error ? { error: outcome.error } : {}),
      duration_ms: a.finished - a.started,
      attempted_at: new Date(a.started).toISOString(),
    };
    if (event !== undefined) this.options.observeDuration?.((a.finished - a.started) / 1000);
    const next = followUp(outcome, event !== undefined, !!job.manual);
    if (next === "succeeded") return this.succeeded(job, subscription, record);
    this.stats.failed++;
    this.warnFailed(a, record);
    switch (next) {
      case "record-only":
        return this.journal.recordAttempt(job.partition, job.subscription_id, record);
      case "event-gone":
        await this.journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "dead" });
        return this.bury(job, subscription, EVENT_GONE, undefined);
      case "receiver-gone":
        return this.receiverGone(job, subscription, record, event);
      case "retry":
        return this.failed(job, subscription, record, event, a.finished, outcome.retryAfter);
    }
  }

  /**
   * Work of a paused subscription goes to DEAD unattempted. A retry's attempt is listed `pending`
   * (its predecessor booked it): its end is logged `dead` with the reason first, or the log would keep
   * it pending for good (first attempts have nothing in the log, so they add nothing).
   */
  async pausedAway(
    job: Item,
    subscription: SubscriptionRecord,
    reason: string,
    eventOf: (job: Item) => StoredEvent | undefined | Promise<StoredEvent | undefined>,
  ): Promise<void> {
    if (job.attempt > 1) {
      await this.journal.recordAttempt(job.partition, job.subscription_id, {
        event_id: job.event_id,
        event_seq: job.event_seq,
        attempt: job.attempt,
        state: "dead",
        error: reason,
        duration_ms: 0,
        attempted_at: new Date(this.clock.now()).toISOString(),
      });
    }
    await this.bury(job, subscription, reason, await eventOf(job));
  }

  private async succeeded(job: Item, subscription: SubscriptionRecord, record: AttemptRecord): Promise<void> {
    this.stats.succeeded++;
    await this.journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "succeeded" });
    if (subscription.failing_since) await this.store.modify(subscription.subscription_id, ({ failing_since: _f, ...rest }) => rest);
    // Only now is the replayed dead letter done with: until here a failure or a crash leaves it in DEAD.
    if (job.dead_seq !== undefined) await this.journal.forgetDead(job.dead_seq);
  }

  private async receiverGone(
    job: Item,
    subscription: SubscriptionRecord,
    record: AttemptRecord,
    event: StoredEvent | undefined,
  ): Promise<void> {
    await this.journal.recordAttempt(job.partition, job.subscription_id, record);
    await this.pause(subscription, "the receiver answered 410 Gone", job);
    // A replayed dead letter is still in DEAD: a second letter would only duplicate it.
    if (job.dead_seq === undefined) await this.bury(job, subscription, "the receiver answered 410 Gone", event);
  }

  /** The next attempt is booked, or, with the schedule exhausted, the delivery is dead (and the subscription maybe paused). */
  private async failed(
    job: Item,
    subscription: SubscriptionRecord,
    record: AttemptRecord,
    event: StoredEvent | undefined,
    finished: number,
    retryAfter: number | undefined,
  ): Promise<void> {
    const failingSince = await this.firstFailure(subscription, finished);
    const dueAt = nextAttemptAt(this.options.schedule, job.attempt, finished, retryAfter);
    if (dueAt === undefined) {
      await this.journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "dead" });
      if (pausesSubscription(failingSince, finished, this.options.pauseAfterMs))
        await this.pause(subscription, `failing without a success since ${new Date(failingSince).toISOString()}`, job);
      await this.bury(job, subscription, "retry schedule exhausted", event);
      return;
    }
    // Made and failed: `failed`, with when the next one is due (the log lists that one `pending` until it is made).
    await this.journal.recordAttempt(job.partition, job.subscription_id, { ...record, next_attempt_at: new Date(dueAt).toISOString() });
    const { event: _carried, ...next } = job;
    await this.journal.enqueue({ ...next, attempt: job.attempt + 1, due_at: dueAt }, "retries");
  }

  /** When the subscription's current failure streak began, starting one at `now` if there is none. */
  private async firstFailure(subscription: SubscriptionRecord, now: number): Promise<number> {
    const live = (since: number | undefined): since is number => streakLive(since, now, this.options.pauseAfterMs);
    if (live(subscription.failing_since)) return subscription.failing_since;
    // The cached copy may lag: KV decides, and a concurrent failure that started a streak wins.
    const current = await this.store.modify(subscription.subscription_id, (r) =>
      live(r.failing_since) ? undefined : { ...r, failing_since: now },
    );
    return live(current?.failing_since) ? current.failing_since : now;
  }

  /** `cause`: the delivery whose outcome paused it (its trace id goes in the log line). */
  private async pause(subscription: SubscriptionRecord, reason: string, cause: Item): Promise<void> {
    await this.store.modify(subscription.subscription_id, (r) =>
      r.paused_at ? undefined : { ...r, paused_at: new Date(this.clock.now()).toISOString(), paused_reason: reason },
    );
    this.log.warn({ subscription: subscription.subscription_id, reason, ...traceIdField(cause) }, "subscription paused");
  }

  /** Dead-letters a delivery with its event (without one when the event is gone: nothing to replay). */
  private async bury(job: Item, subscription: SubscriptionRecord, reason: string, event: StoredEvent | undefined): Promise<void> {
    this.stats.dead++;
    const { event: _carried, dead_seq: _d, ...letter } = job;
    await this.journal.deadLetter({
      ...letter,
      subscription_id: subscription.subscription_id,
      reason,
      ...(event ? { event: carriedPart(event) } : {}),
    });
  }

  private warnFailed({ job, subscription, outcome }: Attempt, record: AttemptRecord): void {
    const heldBack = this.failureLog.take(subscription.subscription_id);
    if (heldBack === undefined) return;
    this.log.warn(
      {
        subscription: subscription.subscription_id,
        partition: job.partition,
        eventId: job.event_id,
        attempt: job.attempt,
        statusCode: outcome.status,
        error: outcome.error,
        durationMs: record.duration_ms,
        failedAttemptsNotLogged: heldBack,
        ...traceIdField(job),
      },
      "a delivery attempt failed",
    );
  }
}
