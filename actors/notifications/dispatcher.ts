/**
 * The dispatcher: reads EVENTS on a durable shared consumer, finds the matching subscriptions in the
 * watched cache, and writes first-attempt work to DELIVERIES, acking the events only after all of it
 * is stored. A crash before the ack redelivers the events (delivery is at least once).
 *
 * Events are handled in rounds: whatever the consumer has handed over by the end of an event-loop turn
 * (up to ROUND_EVENTS) is matched together and becomes one DeliveryBatch per subscription (split at
 * BATCH_EVENTS events or BATCH_BYTES). One stored message per subscription per round instead of one
 * per (event, subscription) is what makes fan-out and floods cheap: NATS work per delivery falls with
 * the batch size. Small events travel inside the batch, so the deliverer does not read them back.
 * The batch's message id is derived from its event sequences and the first event's store time, so a
 * round re-sent after a crash with the same grouping is dropped by JetStream's duplicate window.
 *
 * Events are pulled with `fetch`, each pull sized to slots reserved for it (by count, and by bytes at
 * the largest event size: DispatcherLimits), so every event the
 * consumer has handed over sits in a slot: all of them are renewed (`working()`) while held, which is
 * what lets the ack wait be short (a killed dispatcher's events return to another one after 10 s). The
 * consume iterator could not do that: it holds up to a whole pull in its buffer where nothing can renew
 * it. Renewal stops after RENEW_FOR_MS: a round held that long is stuck, and its events go back to the
 * consumer after the ack wait, while the stuck dispatcher, its slots full, pulls no more.
 *
 * The consumer's ack floor is read every few seconds and kept in KV (progress.ts) with the identity
 * of the EVENTS stream it belongs to, so a consumer missing when a dispatcher starts is created
 * after the floor, not at the first of EVENTS' 7 days of events.
 */
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import { streamInfoIfAny } from "../runtime/storage.ts";
import type { Logger } from "../../platform/logger.ts";
import type { CarriedEvent, DeliveryBatch } from "../../subjects/notifications.ts";
import type { Schedule } from "./schedule.ts";
import { delayBefore } from "./schedule.ts";
import {
  CONSUMERS,
  EVENTS_MESSAGE_BYTES,
  STREAMS,
  carriedPart,
  decodeEvent,
  type DurableConsumer,
  type Journal,
  type StoredEvent,
} from "./journal.ts";
import { matches } from "./matching.ts";
import type { DispatcherProgress, EventsProgress } from "./progress.ts";
import type { SubscriptionCache, SubscriptionRecord } from "./store.ts";
import { subjects } from "../../subjects/index.ts";
import { Slots } from "../runtime/slots.ts";

export type DispatcherStats = {
  events: number;
  jobs: number;
  batches: number;
  /** Events skipped without delivery: not a valid event body (checked as over HTTP), each logged with subject, sequence and reason. */
  dropped: number;
  failures: number;
  /** The consumer's ack floor as last read (every event up to it is dispatched): a consumer created again starts after it. */
  ackFloor: number;
  /** The ack floor last known stored as the progress (0: none on this EVENTS stream yet). */
  storedFloor: number;
};

export type Dispatcher = { stats: DispatcherStats; stop(): Promise<void> };

/** Events held at once (received, not yet acked). */
const IN_FLIGHT = 1024;
/** Per-message bookkeeping counted with its payload (headers, the message and parsed objects' own fields). */
const MESSAGE_OVERHEAD_BYTES = 512;
/** What one event held can weigh at most: a pull reserves this much per event it asks for. */
const EVENT_WEIGHT_MAX = EVENTS_MESSAGE_BYTES + MESSAGE_OVERHEAD_BYTES;
/** Most events matched together in one round. */
const ROUND_EVENTS = 256;
/** Most events in one batch, and its size budget (DELIVERIES takes messages up to 64 KiB). */
const BATCH_EVENTS = 64;
const BATCH_BYTES = 48 * 1024;
/** Events up to this size (JSON bytes) travel inside the batch; larger ones are read from EVENTS. */
const CARRY_BYTES = 4 * 1024;
/** Events one pull asks for (reserved in slots before it is sent). */
const PULL_EVENTS = ROUND_EVENTS;
/** How long a pull waits for events before the next one is sent. */
const PULL_EXPIRES_MS = 5_000;
/** How long stop() waits for the last progress write. */
const STOP_STORE_MS = 2_000;
/** A failing progress write is logged at most this often (it is tried again at every floor read). */
const PROGRESS_WARN_EVERY_MS = 60_000;

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
   * Stored bytes of the events held at once (received, not yet acked), besides IN_FLIGHT events. A
   * pull asks only for as many events as fit in what is free at their largest size (EVENTS' message
   * limit), and the part a smaller event does not use is freed when it arrives, so the bound holds
   * whatever the events weigh: 1,024 events at the 256 KiB limit would otherwise be ~260 MiB raw,
   * twice that with their parsed copies.
   */
  inFlightBytes: number;
};

export const DISPATCHER_LIMITS: DispatcherLimits = { inFlightBytes: 64 * 1024 * 1024 };

export const DISPATCHER_TIMING: DispatcherTiming = { ackWaitMs: 10_000, renewEveryMs: 3_000, renewForMs: 20_000, ackFloorEveryMs: 5_000 };

type Pending = { msg: JsMsg; event: StoredEvent; carried: CarriedEvent | undefined; bytes: number };

export async function startDispatcher(
  journal: Journal,
  cache: SubscriptionCache,
  progress: DispatcherProgress,
  schedule: Schedule,
  log: Logger,
  timing: DispatcherTiming = DISPATCHER_TIMING,
  limits: DispatcherLimits = DISPATCHER_LIMITS,
): Promise<Dispatcher> {
  const durable: DurableConsumer = {
    stream: STREAMS.events,
    name: CONSUMERS.dispatcher,
    filter: subjects.notifications.allEvents(),
    ackWaitMs: timing.ackWaitMs,
    maxAckPending: 10_000,
  };
  const stats: DispatcherStats = { events: 0, jobs: 0, batches: 0, dropped: 0, failures: 0, ackFloor: 0, storedFloor: 0 };
  /** The EVENTS stream the ack floor was read on (its creation time): a stream created again starts over. */
  let eventsStream = "";

  /**
   * Opens the consumer, creating it (or EVENTS) when missing: at start, and after a failed pull (a
   * fetch on a deleted consumer fails; without this every later pull would fail too). EVENTS keeps
   * events for 7 days: a consumer created again from its first message would send them all again,
   * so it starts after the ack floor, which is at or before every event not acked (some dispatched
   * since may go again: at least once). The floor is the higher of the one last read here (on the
   * same stream) and the stored progress (when it belongs to this stream): a dispatcher that starts
   * has only the stored one. On an EVENTS stream created again every event is new, so the consumer
   * starts at its first one; the stream is checked again once the consumer exists, because it may
   * have been made again in between (then the floor means nothing on it, and a consumer started
   * there would skip what the new stream already holds).
   */
  async function open(): Promise<Consumer> {
    const events = await streamInfoIfAny(journal.jsm, STREAMS.events);
    const before = events?.created;
    let floor = before !== undefined && before === eventsStream ? stats.ackFloor : 0;
    // Read even when the consumer exists (its start position is then ignored): checking first would
    // leave a window where a consumer deleted in between is created from the first event.
    const stored = before !== undefined ? await progress.read() : undefined;
    if (stored && stored.events_created === before) floor = Math.max(floor, stored.ack_floor);
    // A floor past the stream's last event cannot be this stream's (were its messages lost, as with a
    // stream restored from an older backup under the same creation time, the events stored after
    // them would get sequences at or below that floor, and be skipped): start after its last event.
    if (events && floor > events.state.last_seq) {
      log.warn(
        { ackFloor: floor, lastSeq: events.state.last_seq },
        "the dispatcher's ack floor is past EVENTS' last event: starting after its last event",
      );
      floor = events.state.last_seq;
      stats.ackFloor = Math.min(stats.ackFloor, floor);
    }
    const resume = floor > 0;
    await journal.ensureConsumer(resume ? { ...durable, startSeq: floor + 1 } : durable);
    let after = await eventsCreated();
    if (resume && after !== before) {
      log.warn(
        { ackFloor: floor },
        "EVENTS was created again while the dispatcher's consumer was being opened: starting at its first event",
      );
      await journal.jsm.consumers.delete(STREAMS.events, CONSUMERS.dispatcher).catch(() => undefined);
      await journal.ensureConsumer(durable);
      after = await eventsCreated();
    }
    if (after !== before || before !== eventsStream) {
      // Another stream than the floors were read on (or the first opening): they start over.
      eventsStream = after ?? "";
      stats.ackFloor = 0;
      stats.storedFloor = 0;
    }
    if (resume && after === before) {
      // Every event up to the floor is dispatched on this stream, whichever of the two it came from.
      stats.ackFloor = Math.max(stats.ackFloor, floor);
      if (stored?.events_created === eventsStream) stats.storedFloor = Math.max(stats.storedFloor, stored.ack_floor);
    }
    return journal.js.consumers.get(STREAMS.events, CONSUMERS.dispatcher);
  }

  /** EVENTS' creation time; undefined when there is no such stream. Any other failure throws (the pull loop retries). */
  async function eventsCreated(): Promise<string | undefined> {
    return (await streamInfoIfAny(journal.jsm, STREAMS.events))?.created;
  }

  /** Reads the consumer's ack floor (it only moves forward on one stream; a failed read changes nothing). */
  async function readAckFloor(): Promise<void> {
    const stream = eventsStream;
    const info = await journal.jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher).catch(() => undefined);
    if (info && stream === eventsStream) stats.ackFloor = Math.max(stats.ackFloor, info.ack_floor.stream_seq);
  }

  let progressWarnedAt = 0;
  /**
   * Stores the ack floor as the progress when it moved past what is known stored. A failure is
   * logged (at most once a minute) and the write is tried again at the next floor read; it never
   * stops the dispatcher (the consumer, while it exists, holds the position anyway).
   */
  async function storeAckFloor(): Promise<void> {
    const next: EventsProgress = { events_created: eventsStream, ack_floor: stats.ackFloor };
    if (next.events_created === "" || next.ack_floor <= stats.storedFloor) return;
    try {
      const stored = await progress.advance(next, eventsCreated);
      // What is stored now may be another dispatcher's higher floor, or another stream's progress.
      if (eventsStream === next.events_created && stored.events_created === next.events_created)
        stats.storedFloor = Math.max(stats.storedFloor, stored.ack_floor);
    } catch (error) {
      if (Date.now() - progressWarnedAt < PROGRESS_WARN_EVERY_MS) return;
      progressWarnedAt = Date.now();
      log.warn(
        { err: error, ackFloor: next.ack_floor },
        "storing the dispatcher's progress failed; trying again at the next ack floor read",
      );
    }
  }

  /** The floor read and stored; one at a time (a slow server must not pile them up). */
  let floorTick: Promise<void> | undefined;
  const tickAckFloor = (): Promise<void> =>
    (floorTick ??= (async () => {
      try {
        await readAckFloor();
        await storeAckFloor();
      } finally {
        floorTick = undefined;
      }
    })());

  let consumer: Consumer | undefined = await open();
  await tickAckFloor();
  const ackFloorReads = setInterval(() => void tickAckFloor(), timing.ackFloorEveryMs);
  ackFloorReads.unref?.();
  const limiter = new Slots(IN_FLIGHT);
  /** The byte budget: each held event's weight, plus the largest weight for each event a pull may still bring. */
  const bytes = new Slots(Math.max(limits.inFlightBytes, EVENT_WEIGHT_MAX));
  const weightOf = (msg: JsMsg) => msg.data.length + MESSAGE_OVERHEAD_BYTES;
  let round: JsMsg[] = [];
  let stopping = false;
  /** The pull in flight, stopped by stop() and when a round is stuck. */
  let pull: { stop(): void } | undefined;
  /** Every event handed over and not yet acked, with when it came. */
  const held = new Map<JsMsg, number>();
  const settle = (msg: JsMsg, how: () => void) => {
    held.delete(msg);
    try {
      how();
    } catch {
      // Not sent (the connection is closed): the event comes back after the ack wait.
    }
  };
  /** Whether a round has been held past the renewal window (held is in arrival order). */
  const stuck = () => {
    for (const at of held.values()) return at <= Date.now() - timing.renewForMs;
    return false;
  };
  const renewal = setInterval(() => {
    const since = Date.now() - timing.renewForMs;
    for (const [msg, at] of held) {
      if (at <= since) continue;
      try {
        msg.working();
      } catch {
        // The connection is closed: the ack wait hands the events to another dispatcher.
      }
    }
    // A stuck dispatcher takes no more events (not even its own redeliveries) until its round ends.
    if (stuck()) pull?.stop();
  }, timing.renewEveryMs);
  renewal.unref?.();

  function take(msg: JsMsg): Pending | undefined {
    // Checked as the HTTP door checks (an event published on NATS was not): an invalid one would
    // become an invalid CloudEvent. It is skipped (terminated, never delivered), logged and counted.
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
    if (!("event" in decoded)) {
      stats.dropped++;
      log.warn(
        { subject: msg.subject, seq: msg.seq, reason: decoded.problem, dropped: stats.dropped },
        "event skipped: it is not a valid {data_source?, object_type?, data}",
      );
      settle(msg, () => msg.term(`invalid event: ${decoded.problem}`.slice(0, 256)));
      return undefined;
    }
    const event = decoded.event;
    // Measured as it is written into the batch, not as published: re-serializing can grow a body
    // (`1e20` is written out as 21 digits), and a batch over DELIVERIES' message limit fails its round for good.
    const carried = msg.data.length <= CARRY_BYTES ? carriedPart(event) : undefined;
    const carriedBytes = carried ? Buffer.byteLength(JSON.stringify(carried)) : 0;
    const small = carried !== undefined && carriedBytes <= CARRY_BYTES;
    return { msg, event, carried: small ? carried : undefined, bytes: (small ? carriedBytes : 0) + 96 };
  }

  /** Splits one subscription's events of the round into batches within the count and size budgets. */
  function batchesOf(subscription: SubscriptionRecord, items: Pending[]): Array<{ batch: DeliveryBatch; msgID: string }> {
    const out: Array<{ batch: DeliveryBatch; msgID: string }> = [];
    let current: Pending[] = [];
    let bytes = 0;
    const close = () => {
      if (current.length === 0) return;
      const first = current[0]!.event;
      let dueAt = 0;
      for (const p of current) dueAt = Math.max(dueAt, Date.parse(p.event.time) + (delayBefore(schedule, 1) ?? 0));
      const batch: DeliveryBatch = {
        partition: first.partition,
        type: first.type,
        subscription_id: subscription.subscription_id,
        due_at: dueAt,
        events: current.map((p) => ({
          event_id: p.event.event_id,
          event_seq: p.event.event_seq,
          ...(p.carried ? { event: p.carried } : {}),
        })),
      };
      const seqs = current.map((p) => p.event.event_seq);
      // The first event's store time tells an EVENTS stream created again (its sequences start over)
      // from the one before: without it, its first batches within the duplicate window were dropped.
      const id = `${seqs[0]}-${seqs.at(-1)}:${seqs.length}:${seqs.reduce((a, b) => (a * 31 + b) % 2 ** 31, 7)}:${Date.parse(first.time)}`;
      out.push({ batch, msgID: `deliveries:${subscription.subscription_id}:${id}` });
      current = [];
      bytes = 0;
    };
    for (const p of items) {
      if (current.length >= BATCH_EVENTS || (current.length > 0 && bytes + p.bytes > BATCH_BYTES)) close();
      current.push(p);
      bytes += p.bytes;
    }
    close();
    return out;
  }

  async function dispatch(msgs: JsMsg[]): Promise<void> {
    const taken = msgs.map(take).filter((p): p is Pending => p !== undefined);
    if (taken.length === 0) return;
    try {
      let newest = 0;
      for (const p of taken) newest = Math.max(newest, Date.parse(p.event.time));
      await cache.freshAsOf(newest);
      const bySubscription = new Map<string, { subscription: SubscriptionRecord; items: Pending[] }>();
      for (const p of taken) {
        for (const subscription of cache.subscribersOf(p.event.partition, p.event.type)) {
          if (!matches(subscription, p.event)) continue;
          let entry = bySubscription.get(subscription.subscription_id);
          if (!entry) bySubscription.set(subscription.subscription_id, (entry = { subscription, items: [] }));
          entry.items.push(p);
        }
      }
      const writes: Promise<void>[] = [];
      let jobs = 0;
      for (const { subscription, items } of bySubscription.values()) {
        for (const { batch, msgID } of batchesOf(subscription, items)) {
          writes.push(journal.enqueueBatch(batch, msgID));
          jobs += batch.events.length;
          stats.batches++;
        }
      }
      await Promise.all(writes);
      stats.events += taken.length;
      stats.jobs += jobs;
      for (const p of taken) settle(p.msg, () => p.msg.ack());
    } catch (error) {
      stats.failures++;
      log.error({ err: error, events: taken.length }, "dispatch failed; the events will be redelivered");
      for (const p of taken) settle(p.msg, () => p.msg.nak(1000));
    }
  }

  function closeRound(): void {
    const msgs = round;
    round = [];
    if (msgs.length === 0) return;
    void dispatch(msgs).finally(() => {
      let weight = 0;
      for (const msg of msgs) weight += weightOf(msg);
      limiter.release(msgs.length);
      bytes.release(weight);
    });
  }

  const loop = (async () => {
    let failures = 0;
    while (!stopping) {
      while (!stopping && stuck()) await new Promise((r) => setTimeout(r, timing.renewEveryMs));
      await limiter.acquire(PULL_EVENTS);
      // At least one event of the largest size must fit; then as many more as fit now (this loop is
      // the only one reserving bytes, so that part is taken at once).
      await bytes.acquire(EVENT_WEIGHT_MAX);
      const wanted = 1 + Math.max(0, Math.min(PULL_EVENTS - 1, Math.floor((limits.inFlightBytes - bytes.inUse) / EVENT_WEIGHT_MAX)));
      void bytes.acquire((wanted - 1) * EVENT_WEIGHT_MAX);
      let received = 0;
      try {
        if (stopping) continue;
        consumer ??= await open();
        const messages = await consumer.fetch({ max_messages: wanted, expires: PULL_EXPIRES_MS });
        pull = messages;
        // stop() came while the pull was being sent: do not wait out its expiry.
        if (stopping) messages.stop();
        for await (const msg of messages) {
          // The slot reserved for it becomes the event's own; dispatch releases it.
          received++;
          // Reserved at the largest size; it keeps what it weighs.
          bytes.release(EVENT_WEIGHT_MAX - weightOf(msg));
          held.set(msg, Date.now());
          round.push(msg);
          if (round.length === 1) setImmediate(closeRound);
          else if (round.length >= ROUND_EVENTS) closeRound();
        }
        failures = 0;
      } catch (error) {
        // NATS away, missed heartbeats, the consumer or EVENTS deleted on the server: pull again
        // after a pause, from the consumer opened again (and created again when missing).
        consumer = undefined;
        if (!stopping) {
          log.warn({ err: error, ackFloor: stats.ackFloor }, "pulling events failed; opening the consumer again");
          await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** failures++)));
        }
      } finally {
        pull = undefined;
        limiter.release(PULL_EVENTS - received);
        bytes.release((wanted - received) * EVENT_WEIGHT_MAX);
      }
    }
  })();

  return {
    stats,
    async stop() {
      stopping = true;
      pull?.stop();
      await loop.catch(() => undefined);
      closeRound();
      await limiter.idle();
      clearInterval(renewal);
      clearInterval(ackFloorReads);
      // The floor with this dispatcher's last acks, so a restart repeats as little as it can; not
      // waited for beyond STOP_STORE_MS (a server out of reach would hold the shutdown for its timeouts).
      await Promise.race([
        (async () => (await floorTick, await tickAckFloor()))(),
        new Promise((resolve) => setTimeout(resolve, STOP_STORE_MS).unref?.()),
      ]);
    },
  };
}
