import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../../platform/logger.ts";
import type { HeldMessages } from "../held-messages.ts";
import { causingTrace, decodeEvent, type Journal } from "../journal.ts";
import { traceIdField } from "../../../platform/trace-context.ts";
import type { Schedule } from "../schedule.ts";
import type { SubscriptionCache } from "../store.ts";
import { batchesOf, bySubscription, pendingOf, ROUND_EVENTS, type Pending } from "./batches.ts";
import type { PullBudget } from "./pull-budget.ts";

export type RoundStats = { events: number; jobs: number; batches: number; dropped: number; failures: number };

export type RoundsDeps = {
  journal: Pick<Journal, "enqueueBatch">;
  cache: Pick<SubscriptionCache, "freshAsOf" | "subscribersOf">;
  schedule: Schedule;
  stats: RoundStats;
  held: HeldMessages<JsMsg>;
  budget: PullBudget;
  log: Logger;
};

/**
 * Events in rounds: whatever the consumer hands over by the end of an event-loop turn (up to
 * ROUND_EVENTS) is matched together and written as one batch per subscription, then acked; a failed
 * round is nak'ed to come back. One stored message per subscription per round is what makes fan-out cheap.
 */
export class Rounds {
  private round: JsMsg[] = [];

  constructor(private readonly deps: RoundsDeps) {}

  /** An event handed over by the consumer (held and counted in the budget from here). */
  add(msg: JsMsg): void {
    this.round.push(msg);
    if (this.round.length === 1) setImmediate(() => this.close());
    else if (this.round.length >= ROUND_EVENTS) this.close();
  }

  /** Dispatches the round gathered so far. */
  close(): void {
    const msgs = this.round;
    this.round = [];
    if (msgs.length === 0) return;
    void this.dispatch(msgs).finally(() => this.deps.budget.done(msgs.map((m) => m.data.length)));
  }

  private settle(msg: JsMsg, how: () => void): void {
    this.deps.held.release(msg);
    try {
      how();
    } catch {
      // Not sent (the connection is closed): the event comes back after the ack wait.
    }
  }

  /**
   * The event, checked as the HTTP door checks (an event published on NATS was not): an invalid one
   * would become an invalid CloudEvent, so it is skipped (terminated, never delivered), logged and counted.
   */
  private take(msg: JsMsg): Pending<JsMsg> | undefined {
    const { stats, log } = this.deps;
    const decoded = decodeEvent(
      {
        subject: msg.subject,
        seq: msg.seq,
        data: msg.data,
        header: msg.headers,
        time: new Date(Math.floor(msg.info.timestampNanos / 1e6)),
      },
      true,
    );
    const trace = causingTrace(msg.headers);
    if (!("event" in decoded)) {
      stats.dropped++;
      log.warn(
        { subject: msg.subject, seq: msg.seq, reason: decoded.problem, dropped: stats.dropped, ...traceIdField(trace) },
        "event skipped: it is not a valid {data_source?, object_type?, data}",
      );
      this.settle(msg, () => msg.term(`invalid event: ${decoded.problem}`.slice(0, 256)));
      return undefined;
    }
    return pendingOf(msg, decoded.event, msg.data.length, trace);
  }

  private async dispatch(msgs: JsMsg[]): Promise<void> {
    const { cache, journal, schedule, stats, log } = this.deps;
    const taken = msgs.map((m) => this.take(m)).filter((p): p is Pending<JsMsg> => p !== undefined);
    if (taken.length === 0) return;
    try {
      let newest = 0;
      for (const p of taken) newest = Math.max(newest, Date.parse(p.event.time));
      await cache.freshAsOf(newest);
      const writes: Promise<void>[] = [];
      let jobs = 0;
      for (const { subscription, items } of bySubscription(taken, (partition, type) => cache.subscribersOf(partition, type))) {
        for (const { batch, msgID } of batchesOf(subscription, items, schedule)) {
          writes.push(journal.enqueueBatch(batch, msgID));
          jobs += batch.events.length;
          stats.batches++;
        }
      }
      await Promise.all(writes);
      stats.events += taken.length;
      stats.jobs += jobs;
      for (const p of taken) this.settle(p.msg, () => p.msg.ack());
    } catch (error) {
      stats.failures++;
      log.error({ err: error, events: taken.length }, "dispatch failed; the events will be redelivered");
      for (const p of taken) this.settle(p.msg, () => p.msg.nak(1000));
    }
  }
}
