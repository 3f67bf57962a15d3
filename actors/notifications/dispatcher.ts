/**
 * The dispatcher: reads EVENTS on a durable shared consumer, finds the matching subscriptions in the
 * watched cache, writes one delivery job per subscription to DELIVERIES, and acks the event only
 * after every job is stored. A crash before the ack redelivers the event; the job ids make the
 * re-sent jobs duplicates that JetStream drops.
 */
import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";
import type { Schedule } from "./schedule.ts";
import { delayBefore } from "./schedule.ts";
import { CONSUMERS, STREAMS, ensureConsumer, storedEvent, type Journal } from "./journal.ts";
import { matches } from "./matching.ts";
import type { SubscriptionCache } from "./store.ts";
import { subjects } from "../../subjects/index.ts";
import { Slots } from "./slots.ts";

export type DispatcherStats = { events: number; jobs: number; dropped: number; failures: number };

export type Dispatcher = { stats: DispatcherStats; stop(): Promise<void> };

const IN_FLIGHT = 512;
const ACK_WAIT_MS = 30_000;

export async function startDispatcher(journal: Journal, cache: SubscriptionCache, schedule: Schedule, log: Logger): Promise<Dispatcher> {
  await ensureConsumer(journal.jsm, STREAMS.events, CONSUMERS.dispatcher, subjects.notifications.allEvents(), ACK_WAIT_MS, 10_000);
  const consumer = await journal.js.consumers.get(STREAMS.events, CONSUMERS.dispatcher);
  const messages = await consumer.consume({ max_messages: IN_FLIGHT });
  const limiter = new Slots(IN_FLIGHT);
  const stats: DispatcherStats = { events: 0, jobs: 0, dropped: 0, failures: 0 };

  async function dispatch(msg: JsMsg): Promise<void> {
    const event = storedEvent({ subject: msg.subject, seq: msg.seq, data: msg.data, header: msg.headers, time: new Date(Math.floor(msg.info.timestampNanos / 1e6)) });
    if (!event || event.data === undefined) {
      stats.dropped++;
      log.warn({ subject: msg.subject, seq: msg.seq }, "dropping an event that is not {data_source?, object_type?, data}");
      msg.term("not an event body");
      return;
    }
    try {
      await cache.freshAsOf(Date.parse(event.time));
      const jobs = [];
      for (const subscription of cache.subscribersOf(event.partition, event.type)) {
        if (!matches(subscription, event)) continue;
        const delay = delayBefore(schedule, 1) ?? 0;
        jobs.push(
          journal.enqueue(
            {
              event_id: event.event_id,
              event_seq: event.event_seq,
              partition: event.partition,
              type: event.type,
              subscription_id: subscription.subscription_id,
              attempt: 1,
              due_at: Date.parse(event.time) + delay,
            },
            "deliveries",
          ),
        );
      }
      await Promise.all(jobs);
      stats.events++;
      stats.jobs += jobs.length;
      msg.ack();
    } catch (error) {
      stats.failures++;
      log.error({ err: error, seq: msg.seq }, "dispatch failed; the event will be redelivered");
      msg.nak(1000);
    }
  }

  const loop = (async () => {
    for await (const msg of messages) {
      await limiter.acquire();
      void dispatch(msg).finally(() => limiter.release());
    }
  })();

  return {
    stats,
    async stop() {
      await messages.close().catch(() => undefined);
      await loop.catch(() => undefined);
      await limiter.idle();
    },
  };
}
