/**
 * The dispatcher: EVENTS → one DeliveryBatch per matching subscription and round on DELIVERIES, the
 * events acked once all of it is stored (a crash before redelivers them). Its parts are in dispatcher/;
 * this wires them (docs/notifications.md, "The deliverer and dispatcher in parts").
 */
import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";
import { subjects } from "../../subjects/index.ts";
import { sleep, systemClock, type Clock } from "../../platform/clock.ts";
import { ConsumerPull } from "./consumer-pull.ts";
import { AckFloor } from "./dispatcher/ack-floor.ts";
import { PullBudget } from "./dispatcher/pull-budget.ts";
import { Rounds } from "./dispatcher/rounds.ts";
import { HeldMessages } from "./held-messages.ts";
import { CONSUMERS, STREAMS, type DurableConsumer, type Journal } from "./journal.ts";
import type { DispatcherProgress } from "./progress.ts";
import type { Schedule } from "./schedule.ts";
import type { SubscriptionCache } from "./store.ts";
import type { DispatcherStatsReply } from "../../subjects/notifications.ts";

/** What the dispatcher counts is what its stats endpoint answers. */
export type DispatcherStats = DispatcherStatsReply;

export type Dispatcher = { stats: DispatcherStats; stop(): Promise<void> };

/** How long stop() waits for the last progress write (a server out of reach would hold the shutdown for its timeouts). */
const STOP_STORE_MS = 2_000;

export type DispatcherTiming = {
  /** The consumer's ack wait: how long a dead dispatcher's events wait before another one takes them. */
  ackWaitMs: number;
  /** Held events are renewed this often. */
  renewEveryMs: number;
  /** Events held longer than this are no longer renewed. */
  renewForMs: number;
  /** The consumer's ack floor is read this often (`stats.ackFloor`), and stored (when it moved) as the dispatcher's progress. */
  ackFloorEveryMs: number;
};

export type DispatcherLimits = {
  /**
   * Stored bytes of the events held at once (received, not yet acked), besides their count. A pull asks
   * only for as many events as fit in what is free at their largest size (EVENTS' message limit).
   */
  inFlightBytes: number;
};

export const DISPATCHER_LIMITS: DispatcherLimits = { inFlightBytes: 64 * 1024 * 1024 };

export const DISPATCHER_TIMING: DispatcherTiming = { ackWaitMs: 10_000, renewEveryMs: 3_000, renewForMs: 20_000, ackFloorEveryMs: 5_000 };

export async function startDispatcher(
  journal: Journal,
  cache: SubscriptionCache,
  progress: DispatcherProgress,
  schedule: Schedule,
  log: Logger,
  timing: DispatcherTiming = DISPATCHER_TIMING,
  limits: DispatcherLimits = DISPATCHER_LIMITS,
  clock: Clock = systemClock,
): Promise<Dispatcher> {
  const durable: DurableConsumer = {
    stream: STREAMS.events,
    name: CONSUMERS.dispatcher,
    filter: subjects.notifications.allEvents(),
    ackWaitMs: timing.ackWaitMs,
    maxAckPending: 10_000,
  };
  const stats: DispatcherStats = { events: 0, jobs: 0, batches: 0, dropped: 0, failures: 0, ackFloor: 0, storedFloor: 0 };
  const floor = new AckFloor(journal, progress, durable, stats, clock, log);
  const consumer = await floor.open();
  await floor.tick();
  const stopFloorTicks = clock.every(timing.ackFloorEveryMs, () => void floor.tick());
  const budget = new PullBudget(limits.inFlightBytes);
  // Held events are renewed while their round is stored; a round held past renewForMs is stuck: its
  // events go back after the ack wait, and no more are pulled (not even its own redeliveries) until it ends.
  const held = new HeldMessages<JsMsg>(clock, timing.renewForMs);
  const rounds = new Rounds({ journal, cache, schedule, stats, held, budget, log });
  const pull: ConsumerPull = new ConsumerPull(
    {
      open: () => floor.open(),
      async reserve() {
        while (!pull.stopping && held.stuck()) await sleep(clock, timing.renewEveryMs);
        return budget.reserve();
      },
      take(msg) {
        budget.arrived(msg.data.length);
        held.hold(msg);
        rounds.add(msg);
      },
      pulled: (asked, received) => budget.pulled(asked, received),
      failed: (error) => log.warn({ err: error, ackFloor: stats.ackFloor }, "pulling events failed; opening the consumer again"),
    },
    clock,
  );
  const stopRenewal = clock.every(timing.renewEveryMs, () => {
    held.renew();
    if (held.stuck()) pull.interrupt();
  });
  await pull.start(consumer);

  return {
    stats,
    async stop() {
      pull.halt();
      await pull.done.catch(() => undefined);
      rounds.close();
      await budget.idle();
      stopRenewal();
      stopFloorTicks();
      // The floor with this dispatcher's last acks, so a restart repeats as little as it can.
      let cancel = () => {};
      await Promise.race([floor.last(), new Promise<void>((resolve) => (cancel = clock.after(STOP_STORE_MS, resolve)))]);
      cancel();
    },
  };
}
