import type { Logger } from "../../../platform/logger.ts";
import type { Clock } from "../../../platform/clock.ts";
import type { HeldMessages } from "../held-messages.ts";
import type { SubscriptionCache, SubscriptionRecord, SubscriptionStore } from "../store.ts";
import type { EventSource } from "./event-source.ts";
import type { FairShare, Share } from "./fair-share.ts";
import { EVENT_GONE, type OutcomeRecorder } from "./outcome-recorder.ts";
import type { WebhookPoster } from "./webhook-poster.ts";
import { triage, type DeliveryMessage, type Item, type Lane, type Work } from "./work.ts";
import { parseTraceparent } from "../../../platform/trace-context.ts";
import type { Tracer } from "../../../platform/tracing.ts";

/** Work parked in the fair share: the message, what it asks for and the lane it came on. */
export type ParkedWork = { msg: DeliveryMessage; work: Work; lane: Lane };

export type WorkRunnerStats = { attempts: number; overflowed: number; parked: number };

export type WorkRunnerDeps = {
  fairShare: FairShare<ParkedWork>;
  held: HeldMessages<DeliveryMessage>;
  events: Pick<EventSource, "eventOf" | "bodyOf">;
  poster: Pick<WebhookPoster, "call">;
  recorder: Pick<OutcomeRecorder, "record" | "pausedAway">;
  cache: Pick<SubscriptionCache, "get" | "load">;
  store: Pick<SubscriptionStore, "get">;
  stats: WorkRunnerStats;
  clock: Clock;
  log: Logger;
  /** Each attempt is a span (a client span when exported) whose context the POST's traceparent names. */
  tracer: Tracer;
};

/**
 * Runs the DELIVERIES messages that have room in the process: each is triaged, given its place in its
 * subscription's share (held, parked or sent away), its items attempted, and it is acked once every
 * item's outcome and follow-up are stored; a failure naks it to come back.
 */
export class WorkRunner {
  constructor(private readonly deps: WorkRunnerDeps) {}

  /** Runs a message already given room in the process (`fairShare.room` holds its items until it ends). */
  start(msg: DeliveryMessage, work: Work, lane: Lane, reserved?: Share<ParkedWork>): void {
    const n = work.items.length;
    void this.handle(msg, work, lane, reserved)
      .catch((error) => {
        this.deps.log.error({ err: error, subject: msg.subject, lane }, "delivery handling failed; the work will come back");
        this.answer(msg, () => msg.nak(1000));
      })
      .finally(() => this.deps.fairShare.room.release(n));
  }

  /** Answers a message (ack, nak, term): it is no longer held; with the connection gone, the ack wait brings it back. */
  private answer(msg: DeliveryMessage, how: () => void): void {
    this.deps.held.release(msg);
    try {
      how();
    } catch {
      // connection gone: the ack wait brings it back
    }
  }

  /**
   * Handles one message. `reserved` is the share whose held count already includes the work (parked
   * work being started); otherwise the work is held here, or parked, or sent away.
   */
  private async handle(msg: DeliveryMessage, work: Work, lane: Lane, reserved?: Share<ParkedWork>): Promise<void> {
    const { fairShare, held, stats } = this.deps;
    const n = work.items.length;
    let share = reserved;
    try {
      fairShare.returned(msg.seq);
      const verdict = triage(work, await this.subscriptionFor(work.subscriptionId), this.deps.clock.now());
      if (verdict.kind === "gone") return this.ack(msg);
      if (verdict.kind === "paused") {
        const eventOf = (item: Item) => this.deps.events.eventOf(item);
        await Promise.all(work.items.map((item) => this.deps.recorder.pausedAway(item, verdict.subscription, verdict.reason, eventOf)));
        return this.ack(msg);
      }
      if (verdict.kind === "not-due") {
        held.release(msg);
        msg.nak(verdict.delayMs);
        return;
      }
      if (!share) {
        const decision = fairShare.offer(work.subscriptionId, n, msg.seq, { msg, work, lane });
        if (decision.kind === "park") {
          stats.parked += n;
          return;
        }
        if (decision.kind === "send-away") {
          // Still unacknowledged, so nothing can be lost: it returns about when the subscription can take it.
          stats.overflowed += n;
          held.release(msg);
          msg.nak(decision.delayMs);
          return;
        }
        share = decision.share;
      }
      const running = share;
      const outcomes = await Promise.allSettled(work.items.map((item) => this.deliver(running, item, verdict.subscription)));
      const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
      if (failure) throw failure.reason;
      this.ack(msg);
    } finally {
      if (share) for (const parked of fairShare.finish(share, n)) this.startParked(parked, share);
    }
  }

  private ack(msg: DeliveryMessage): void {
    this.deps.held.release(msg);
    msg.ack();
  }

  /** Parked work that fits its share now: it waits for room in the process like any message (it is still held). */
  private startParked(parked: ParkedWork, share: Share<ParkedWork>): void {
    const n = parked.work.items.length;
    void Promise.resolve(this.deps.fairShare.room.acquire(n)).then(() => this.start(parked.msg, parked.work, parked.lane, share));
  }

  /**
   * The subscription as the watched cache has it, except that a paused copy is confirmed in KV first:
   * the cache may not have seen yet the re-post that resumed it, and burying cannot be undone.
   */
  private async subscriptionFor(id: string): Promise<SubscriptionRecord | undefined> {
    const { cache, store } = this.deps;
    const cached = cache.get(id) ?? (await cache.load(id));
    return cached?.paused_at ? (await store.get(id))?.value : cached;
  }

  /** One item: a request slot of the subscription for the HTTP call only; the outcome is recorded while the slot serves the next item. */
  private deliver(share: Share<ParkedWork>, item: Item, subscription: SubscriptionRecord): Promise<void> {
    return this.deps.fairShare.attempt(share, async (release) => {
      // Changes made while the item waited (a rotated secret, a new callback) apply; a paused copy in
      // the cache may be older than the record handle() confirmed.
      const latest = this.deps.cache.get(item.subscription_id);
      await this.attempt(item, latest && !latest.paused_at ? latest : subscription, release);
    });
  }

  private async attempt(job: Item, subscription: SubscriptionRecord, release: () => void): Promise<void> {
    const { clock, events, poster } = this.deps;
    this.deps.stats.attempts++;
    const started = clock.now();
    const span = this.deps.tracer.delivery(parseTraceparent(job.traceparent, job.tracestate), {
      callbackUri: subscription.callback_uri,
      eventId: job.event_id,
      subscriptionId: subscription.subscription_id,
      attempt: job.attempt,
    });
    const event = await events.eventOf(job);
    const outcome = event
      ? await poster.call(subscription, job.event_id, events.bodyOf(job.event_id, event), span.context)
      : { error: EVENT_GONE };
    const failed = outcome.status === undefined || outcome.status < 200 || outcome.status >= 300;
    span.end({ status: outcome.status, ...(failed ? { error: outcome.error ?? `answered ${outcome.status}` } : {}) });
    const finished = clock.now();
    release();
    await this.deps.recorder.record({ job, subscription, event, outcome, started, finished });
  }
}
