/**
 * The deliverer: DELIVERIES work (first-attempt batches and retries, on two consumers) POSTed to each
 * subscription's callback, each outcome stored before the ack. Its parts are in deliverer/; this wires
 * them (docs/notifications.md, "The deliverer and dispatcher in parts").
 */
import type { Logger } from "../../platform/logger.ts";
import { noTracer, type Tracer } from "../../platform/tracing.ts";
import { subjects } from "../../subjects/index.ts";
import type { CallbackPolicy } from "./callback-policy.ts";
import { systemClock, type Clock } from "../../platform/clock.ts";
import { EventSource } from "./deliverer/event-source.ts";
import { FairShare } from "./deliverer/fair-share.ts";
import { OutcomeRecorder } from "./deliverer/outcome-recorder.ts";
import { ackWaitFor, giveBack, PullLane } from "./deliverer/pull-lane.ts";
import { WebhookPoster } from "./deliverer/webhook-poster.ts";
import type { DeliveryMessage } from "./deliverer/work.ts";
import { WorkRunner, type ParkedWork } from "./deliverer/work-runner.ts";
import { HeldMessages, renewalPeriod } from "./held-messages.ts";
import { CONSUMERS, STREAMS, type Journal } from "./journal.ts";
import type { Schedule } from "./schedule.ts";
import type { SubscriptionCache, SubscriptionStore } from "./store.ts";
import type { DelivererStatsReply } from "../../subjects/notifications.ts";

export { discardBody, RESPONSE_DRAIN_BYTES } from "./deliverer/webhook-poster.ts";

export type DelivererOptions = {
  schedule: Schedule;
  timeoutMs: number;
  pauseAfterMs: number;
  concurrency: number;
  perSubscription: number;
  policy: CallbackPolicy;
  /** Hears each attempt's call duration (a metrics histogram). */
  observeDuration?: (seconds: number) => void;
  /** Records each attempt as a span (none exported when absent). */
  tracer?: Tracer;
};

/** What the deliverer counts is what its stats endpoint answers. */
export type DelivererStats = DelivererStatsReply;
export type Deliverer = { stats: DelivererStats; stop(): Promise<void> };

const SWEEP_EVERY_MS = 60_000;

export async function startDeliverer(
  journal: Journal,
  store: SubscriptionStore,
  cache: SubscriptionCache,
  options: DelivererOptions,
  log: Logger,
  clock: Clock = systemClock,
): Promise<Deliverer> {
  const ackWaitMs = ackWaitFor(options.timeoutMs);
  const fairShare = new FairShare<ParkedWork>(options, clock);
  const held = new HeldMessages<DeliveryMessage>(clock);
  const stats = {
    attempts: 0,
    succeeded: 0,
    failed: 0,
    dead: 0,
    overflowed: 0,
    parked: 0,
    get inFlight() {
      return fairShare.running;
    },
  };
  const runner = new WorkRunner({
    fairShare,
    held,
    events: new EventSource(journal),
    poster: new WebhookPoster(options, clock, log),
    recorder: new OutcomeRecorder(journal, store, options, stats, clock, log),
    cache,
    store,
    stats,
    clock,
    log,
    tracer: options.tracer ?? noTracer,
  });
  const timers = [clock.every(renewalPeriod(ackWaitMs), () => held.renew()), clock.every(SWEEP_EVERY_MS, () => fairShare.sweep())];
  // Work of saturated subscriptions and retries waits in the consumers (nak with delay, retries for up
  // to a day): no bound on how much may wait there (-1). Memory here is bounded by `concurrency`.
  const lane = (name: "deliveries" | "retries", filter: string, maxMessages: number) =>
    new PullLane(
      name,
      {
        stream: STREAMS.deliveries,
        name: name === "deliveries" ? CONSUMERS.deliverer : CONSUMERS.retries,
        filter,
        ackWaitMs,
        maxAckPending: -1,
      },
      maxMessages,
      { journal, room: fairShare.room, held, start: (msg, work, from) => runner.start(msg, work, from), clock, log },
    );
  // First-attempt messages are batches of up to 64 deliveries: a smaller buffer holds as much work.
  const lanes = [
    lane("deliveries", subjects.notifications.allDeliveries(), Math.min(options.concurrency, 256)),
    lane("retries", subjects.notifications.allRetries(), Math.min(options.concurrency, 1000)),
  ];
  const started: PullLane[] = [];
  try {
    for (const l of lanes) {
      await l.start();
      started.push(l);
    }
  } catch (error) {
    await Promise.allSettled(started.map((l) => l.stop()));
    for (const cancel of timers) cancel();
    throw error;
  }
  return {
    stats,
    async stop() {
      await Promise.allSettled(lanes.map((l) => l.stop()));
      // Parked work goes back at once, for another process (or the next start) to deliver.
      for (const parked of fairShare.close()) {
        held.release(parked.msg);
        giveBack(parked.msg);
      }
      await fairShare.room.idle();
      for (const cancel of timers) cancel();
    },
  };
}
