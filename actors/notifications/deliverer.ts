/**
 * The deliverer: takes delivery work from DELIVERIES (first attempts as per-subscription batches and
 * retries as single jobs, on two durable consumers, so waiting retries never hold up fresh work) and
 * POSTs each event to its subscription's callback. Every attempt is recorded in ATTEMPTS, and its
 * follow-up (next retry, dead letter or nothing) is stored, before the message is acked: a deliverer
 * killed mid-attempt loses nothing, the message comes back after the ack wait (a batch comes back
 * whole: receivers deduplicate on webhook-id).
 *
 * Fairness: at most `perSubscription` requests run at once per subscription in one process, with up
 * to a quarter of the process's capacity held behind them. Work of a saturated subscription that keeps
 * a pace is parked (received, unacknowledged, kept alive, not counting against the process's
 * capacity) up to about PARK_MS of its work, and starts the moment there is room. Beyond that, and
 * for slow subscriptions, work is nak'ed with a delay that gives it a place in the subscription's own
 * queue: behind what is held or parked here and what was sent away before it, at the pace the
 * subscription is observed to complete work, so it comes back about when there is room, instead of
 * being re-published. One slow receiver therefore holds a bounded share of the process (a fast
 * receiver with a large backlog is fed at its pace), but the shares of several can add up to the
 * whole concurrency (four at default settings): then every subscription's work waits until one of
 * their messages is done, up to ⌈its deliveries / perSubscription⌉ delivery timeouts per release
 * (docs/notifications.md, "What slow receivers cost the others"; test/notifications/fairness.test.ts).
 * Work waiting that long is not handed over again: every message is renewed from its receipt until
 * it is acked (test/notifications/ack-wait.test.ts).
 */
import { LogThrottle } from "../../platform/log-throttle.ts";
import type { Consumer, JsMsg } from "@nats-io/jetstream";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import type { Logger } from "../../platform/logger.ts";
import type { CarriedEvent, DeliveryBatch, DeliveryJob } from "../../subjects/notifications.ts";
import { subjects } from "../../subjects/index.ts";
import { Slots } from "../runtime/slots.ts";
import { CallbackRefused, resolveCallback, type CallbackPolicy, type ResolvedTarget } from "./callback-policy.ts";
import {
  CONSUMERS,
  STREAMS,
  carriedPart,
  fromCarried,
  letterEvent,
  type AttemptRecord,
  type DurableConsumer,
  type Journal,
  type StoredEvent,
} from "./journal.ts";
import { cloudEvent } from "./matching.ts";
import { delayBefore, honourRetryAfter, parseRetryAfter, type Schedule } from "./schedule.ts";
import { webhookHeaders } from "./signing.ts";
import type { SubscriptionCache, SubscriptionRecord, SubscriptionStore } from "./store.ts";

export type DelivererOptions = {
  schedule: Schedule;
  timeoutMs: number;
  pauseAfterMs: number;
  concurrency: number;
  perSubscription: number;
  policy: CallbackPolicy;
};

export type DelivererStats = {
  attempts: number;
  succeeded: number;
  failed: number;
  dead: number;
  overflowed: number;
  parked: number;
  inFlight: number;
};
export type Deliverer = { stats: DelivererStats; stop(): Promise<void> };

type Lane = "deliveries" | "retries";
/** One delivery to make: a retry job, or one event of a first-attempt batch (maybe carrying the event). */
type Item = DeliveryJob & { event?: CarriedEvent };
/** What one DELIVERIES message asks for. */
type Work = { subscriptionId: string; dueAt: number; manual: boolean; items: Item[] };
type Parked = { msg: JsMsg; work: Work; lane: Lane };
/**
 * One subscription's share of this process: requests running, items held in memory (running, waiting
 * or being recorded), messages parked (received, not started, not counted as held), items sent away
 * to come back later, and its pace: items completed per ms while it was saturated (measured over
 * windows of PACE_WINDOW_MS).
 */
type Gate = {
  active: number;
  held: number;
  waiting: Array<() => void>;
  parked: Parked[];
  parkedItems: number;
  away: number;
  pace: number;
  completed: number;
  windowStart: number;
  usedAt: number;
};

const USER_AGENT = "derrick-webhooks/1";
/** Why a delivery whose event left EVENTS (7 days) before its attempt could not be made. */
const EVENT_GONE = "the event is no longer stored (EVENTS retention passed)";
/**
 * Pace assumed for a subscription not seen yet (items per ms), optimistic: work booked too early only
 * costs another nak, work booked too late leaves the receiver idle. It is learnt from completions.
 */
const INITIAL_PACE = 8;
/** Booked delays are shortened by this factor for the same reason. */
const BOOKING_FACTOR = 0.75;
const PACE_WINDOW_MS = 250;
/**
 * The longest work of a saturated subscription is sent away for (it is booked again if it returns too
 * early). Short for fast receivers, whose pace estimate can be off while the process is congested (an
 * over-long booking would leave them idle), long for slow ones, whose pace is what the receiver sets.
 */
const MAX_BOOKING_FAST_MS = 1_000;
const MAX_BOOKING_SLOW_MS = 60_000;
/** Below this pace (items per ms, i.e. 100/s) a subscription counts as slow. */
const SLOW_PACE = 0.1;
/**
 * A saturated subscription that is not slow parks the work it cannot hold yet, up to what it completes
 * in this long at its pace: parked work starts the moment there is room, where work sent away comes
 * back when its booking says, which under load is often later than the receiver could have taken it
 * (measured: one fast subscription idled a third of the time). Parked messages are kept ours with
 * `working()`, so nothing is lost or redelivered while they wait.
 */
const PARK_MS = 1000;
/** How many sent-away messages are remembered (to count them back in); beyond, the count is reset. */
const AWAY_REMEMBERED = 100_000;
const EVENT_CACHE_SIZE = 2048;
/**
 * Bytes of events read from EVENTS, and as many of CloudEvent bodies, kept for reuse across
 * subscriptions. Counting entries alone let a burst of large events pin about 2 × 2048 × 256 KiB.
 */
const EVENT_CACHE_BYTES = 16 * 1024 * 1024;
/** Resolved and checked callback targets are reused this long (DNS answers are re-checked after). */
const TARGET_TTL_MS = 5_000;
const TARGET_CACHE_SIZE = 4096;
/** How long a pull waits for delivery work before the next one is sent; the longest pause after failed pulls. */
const PULL_EXPIRES_MS = 5_000;
const PULL_RETRY_MAX_MS = 2_000;
const decoder = new TextDecoder();

export async function startDeliverer(
  journal: Journal,
  store: SubscriptionStore,
  cache: SubscriptionCache,
  options: DelivererOptions,
  log: Logger,
): Promise<Deliverer> {
  // The ack wait covers one attempt plus recording; a held message is kept alive while it waits.
  const ackWaitMs = options.timeoutMs + 3_000;
  // Work of saturated subscriptions and retries waits in the consumers (nak with delay, retries for up
  // to a day): no bound on how much may wait there (-1). Memory here is bounded by `concurrency`.
  const consumers: Record<Lane, DurableConsumer> = {
    deliveries: {
      stream: STREAMS.deliveries,
      name: CONSUMERS.deliverer,
      filter: subjects.notifications.allDeliveries(),
      ackWaitMs,
      maxAckPending: -1,
    },
    retries: {
      stream: STREAMS.deliveries,
      name: CONSUMERS.retries,
      filter: subjects.notifications.allRetries(),
      ackWaitMs,
      maxAckPending: -1,
    },
  };
  const stats: DelivererStats = { attempts: 0, succeeded: 0, failed: 0, dead: 0, overflowed: 0, parked: 0, inFlight: 0 };
  /** A warning per failed attempt, at most one a minute per subscription (with the count held back). */
  const failureLog = new LogThrottle();
  const admit = new Slots(options.concurrency);
  const gates = new Map<string, Gate>();
  // Items of one subscription may wait behind its running attempts up to a quarter of the process's
  // capacity: enough to keep one busy receiver saturated, bounded so a slow one cannot take it all.
  const queueLimit = Math.max(options.perSubscription, Math.floor(options.concurrency / 4));
  const events = new BoundedCache<number, Promise<StoredEvent | undefined>>(EVENT_CACHE_SIZE, EVENT_CACHE_BYTES);
  const bodies = new BoundedCache<number, { id: string; partition: string; time: string; body: string }>(
    EVENT_CACHE_SIZE,
    EVENT_CACHE_BYTES,
  );
  const targets = new Map<string, { at: number; target: Promise<Target> }>();
  // Messages sent away by booking (stream sequence → items and their gate), counted back on return.
  const away = new Map<number, { gate: Gate; n: number }>();

  function readEvent(seq: number): Promise<StoredEvent | undefined> {
    let found = events.get(seq);
    if (!found) {
      const read = journal.readSizedEvent(seq);
      found = read.then((sized) => sized?.event);
      events.set(seq, found, 0);
      const entry = found;
      // Weighed once read; an event that is not there is not kept.
      void read.then(
        (sized) => (sized ? events.weigh(seq, entry, sized.bytes) : events.delete(seq, entry)),
        () => events.delete(seq, entry),
      );
    }
    return found;
  }

  /** The event of a delivery: carried in its batch, held by the dead letter it replays, or read from EVENTS. */
  function eventOf(item: Item): StoredEvent | undefined | Promise<StoredEvent | undefined> {
    if (item.event) return fromCarried(item, item.event);
    if (item.dead_seq !== undefined) return fromDeadLetter(item, item.dead_seq);
    return storedEventOf(item);
  }

  /**
   * The item's event as EVENTS holds it at its sequence, only if it is that event: an EVENTS stream
   * created again numbers its events from 1 again, so the sequence may now hold (or this process's
   * copy may still hold) another event, of another partition even. Then the item's event is gone.
   */
  async function storedEventOf(item: Item): Promise<StoredEvent | undefined> {
    const isItems = (e: StoredEvent | undefined) => e?.event_id === item.event_id && e.partition === item.partition && e.type === item.type;
    const event = await readEvent(item.event_seq);
    if (!event || isItems(event)) return event;
    // A copy from before the stream was created again: read what the sequence holds now.
    events.delete(item.event_seq);
    const current = await readEvent(item.event_seq);
    return isItems(current) ? current : undefined;
  }

  async function fromDeadLetter(item: Item, deadSeq: number): Promise<StoredEvent | undefined> {
    const letter = await journal.readDead(deadSeq);
    const event = letter?.event_id === item.event_id && letter.subscription_id === item.subscription_id ? letterEvent(letter) : undefined;
    // The letter may be gone already (a concurrent replay succeeded): EVENTS may still hold the event.
    return event ? fromCarried(item, event) : storedEventOf(item);
  }

  /** The CloudEvent body of an event: the same bytes for every subscription it goes to. */
  function bodyOf(eventId: string, event: StoredEvent): string {
    const cached = bodies.get(event.event_seq);
    // The id alone does not tell: `evt_<sequence>` names another event on an EVENTS stream created again.
    if (cached?.id === eventId && cached.partition === event.partition && cached.time === event.time) return cached.body;
    const body = JSON.stringify(cloudEvent(eventId, event));
    bodies.set(event.event_seq, { id: eventId, partition: event.partition, time: event.time, body }, body.length);
    return body;
  }

  /** The checked target of a callback, reused for a few seconds (a refusal is never reused). */
  function targetOf(uri: string): Promise<Target> {
    const now = Date.now();
    const cached = targets.get(uri);
    if (cached && now - cached.at < TARGET_TTL_MS) return cached.target;
    const target = resolveCallback(options.policy, uri).then(prepare);
    if (targets.size >= TARGET_CACHE_SIZE) targets.clear();
    targets.set(uri, { at: now, target });
    target.catch(() => targets.get(uri)?.target === target && targets.delete(uri));
    return target;
  }

  function parse(msg: JsMsg): Work | undefined {
    try {
      const value = JSON.parse(decoder.decode(msg.data)) as DeliveryJob | DeliveryBatch;
      if ("events" in value && Array.isArray(value.events)) {
        const { events: list, ...batch } = value;
        const items = list.map(
          (e): Item => ({
            ...e,
            partition: batch.partition,
            type: batch.type,
            subscription_id: batch.subscription_id,
            attempt: 1,
            due_at: batch.due_at,
          }),
        );
        return { subscriptionId: batch.subscription_id, dueAt: batch.due_at, manual: false, items };
      }
      const job = value as DeliveryJob;
      if (typeof job.subscription_id !== "string" || typeof job.event_seq !== "number") return undefined;
      return { subscriptionId: job.subscription_id, dueAt: job.due_at, manual: !!job.manual, items: [job] };
    } catch {
      return undefined;
    }
  }

  function gateOf(id: string): Gate {
    let gate = gates.get(id);
    if (!gate)
      gates.set(
        id,
        (gate = {
          active: 0,
          held: 0,
          waiting: [],
          parked: [],
          parkedItems: 0,
          away: 0,
          pace: INITIAL_PACE,
          completed: 0,
          windowStart: Date.now(),
          usedAt: 0,
        }),
      );
    gate.usedAt = Date.now();
    return gate;
  }

  /** Whether `n` more items of the subscription fit in memory (an idle subscription takes any message). */
  function admits(gate: Gate, n: number): boolean {
    return gate.held === 0 || gate.held + n <= options.perSubscription + queueLimit;
  }

  /** Waits for one of the subscription's attempt slots. */
  function slot(gate: Gate): Promise<void> | void {
    if (gate.active < options.perSubscription) {
      gate.active++;
      return;
    }
    return new Promise<void>((resolve) => gate.waiting.push(resolve));
  }

  function leave(gate: Gate): void {
    const next = gate.waiting.shift();
    if (next)
      next(); // the slot passes to the next waiter
    else gate.active--;
  }

  /** Counts completed items; while the subscription is saturated, the window's rate becomes its pace. */
  function completed(gate: Gate): void {
    gate.completed++;
    const now = Date.now();
    const elapsed = now - gate.windowStart;
    if (elapsed < PACE_WINDOW_MS) return;
    if (gate.held >= options.perSubscription || gate.away > 0 || gate.parkedItems > 0)
      gate.pace += (gate.completed / elapsed - gate.pace) / 2;
    gate.completed = 0;
    gate.windowStart = now;
  }

  /**
   * How long `n` items of a saturated subscription stay away: until the items ahead of them (held here
   * or sent away before them) have drained enough for them to fit in memory, at the subscription's pace.
   */
  function booking(gate: Gate, n: number): number {
    const ahead = gate.held + gate.parkedItems + gate.away + n - (options.perSubscription + queueLimit);
    const longest = gate.pace < SLOW_PACE ? MAX_BOOKING_SLOW_MS : MAX_BOOKING_FAST_MS;
    return Math.round(Math.min(Math.max((BOOKING_FACTOR * ahead) / gate.pace, 1), longest) * (1 + Math.random() * 0.1));
  }

  function sendAway(msg: JsMsg, gate: Gate, n: number): void {
    const delay = booking(gate, n);
    if (away.size >= AWAY_REMEMBERED) {
      for (const entry of away.values()) entry.gate.away = 0;
      away.clear();
    }
    away.set(msg.seq, { gate, n });
    gate.away += n;
    msg.nak(delay);
  }

  /** A message back from being sent away no longer counts as away. */
  function returned(msg: JsMsg): void {
    const entry = away.get(msg.seq);
    if (!entry) return;
    away.delete(msg.seq);
    entry.gate.away = Math.max(0, entry.gate.away - entry.n);
  }

  // Forget the pace of subscriptions not seen for a while (bounded memory).
  const sweep = setInterval(() => {
    const idleSince = Date.now() - 5 * 60_000;
    for (const [id, gate] of gates)
      if (gate.held === 0 && gate.away === 0 && gate.parked.length === 0 && gate.usedAt < idleSince) gates.delete(id);
  }, 60_000);
  sweep.unref?.();

  // Parked work: at most `parkTotal` items in the process, half of it for one subscription.
  const parkTotal = 8 * options.concurrency;
  let parkedItems = 0;
  let stopping = false;
  // Messages received but not started, waiting for room in the process (`admit`): behind slow
  // receivers that fill the concurrency that can take longer than the ack wait, after which JetStream
  // would hand them over again (delivered twice). Renewed on entering, every tick and on leaving.
  const waitingForRoom = new Set<JsMsg>();
  const renewal = setInterval(
    () => {
      for (const msg of waitingForRoom) renew(msg);
      if (parkedItems === 0) return;
      for (const gate of gates.values()) for (const p of gate.parked) renew(p.msg);
    },
    Math.max(500, Math.floor(ackWaitMs / 2)),
  );
  renewal.unref?.();

  /** Takes room for `n` items of the message in the process, keeping the message ours while it waits. */
  function room(msg: JsMsg, n: number): Promise<void> | void {
    const wait = admit.acquire(n);
    if (!wait) return;
    renew(msg);
    waitingForRoom.add(msg);
    return wait.then(() => {
      waitingForRoom.delete(msg);
      renew(msg); // handle()'s own renewal starts half an ack wait from now
    });
  }

  /** Parks work the saturated subscription cannot hold yet, if it is not slow and there is room. */
  function park(gate: Gate, parked: Parked): boolean {
    const n = parked.work.items.length;
    if (stopping || gate.pace < SLOW_PACE) return false;
    if (parkedItems + n > parkTotal || gate.parkedItems + n > Math.min(gate.pace * PARK_MS, parkTotal / 2)) return false;
    gate.parked.push(parked);
    gate.parkedItems += n;
    parkedItems += n;
    stats.parked += n;
    return true;
  }

  /** Starts parked work of the subscription while it fits (its items count as held from here on). */
  function unpark(gate: Gate): void {
    while (gate.parked.length > 0) {
      const next = gate.parked[0]!;
      const n = next.work.items.length;
      if (!admits(gate, n)) return;
      gate.parked.shift();
      gate.parkedItems -= n;
      parkedItems -= n;
      gate.held += n;
      void Promise.resolve(room(next.msg, n)).then(() => launch(next.msg, next.work, next.lane, gate));
    }
  }

  /**
   * Handles one message. `reserved` is the gate whose held count already includes the work (parked
   * work being started); otherwise the work is admitted here, or parked, or sent away.
   */
  async function handle(msg: JsMsg, work: Work, lane: Lane, reserved?: Gate): Promise<void> {
    const n = work.items.length;
    let gate = reserved;
    try {
      if (away.size > 0) returned(msg);
      const subscription = await subscriptionFor(work.subscriptionId);
      if (!subscription) {
        msg.ack(); // deleted: nothing to deliver to
        return;
      }
      if (subscription.paused_at && !work.manual) {
        await Promise.all(
          work.items.map(async (item) => pausedAway(item, subscription, `subscription paused: ${subscription.paused_reason ?? "paused"}`)),
        );
        msg.ack();
        return;
      }
      const now = Date.now();
      if (work.dueAt - now > 5) {
        msg.nak(work.dueAt - now);
        return;
      }
      if (!gate) {
        const candidate = gateOf(work.subscriptionId);
        if (!admits(candidate, n)) {
          // Saturated: the work waits here if the subscription keeps up a pace; otherwise it goes back
          // to JetStream (still unacknowledged, so nothing can be lost) and returns about when the
          // subscription can take it.
          if (park(candidate, { msg, work, lane })) return;
          stats.overflowed += n;
          sendAway(msg, candidate, n);
          return;
        }
        candidate.held += n;
        gate = candidate;
      }
      const held = gate;
      // While items wait for the subscription's turn or run, keep the message ours (no redelivery).
      const keepAlive = setInterval(() => renew(msg), Math.max(500, Math.floor(ackWaitMs / 2)));
      try {
        const outcomes = await Promise.allSettled(work.items.map((item) => deliver(held, item, subscription)));
        const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
        if (failure) throw failure.reason;
        msg.ack();
      } finally {
        clearInterval(keepAlive);
      }
    } finally {
      if (gate) {
        gate.held -= n;
        unpark(gate);
      }
    }
  }

  /**
   * The subscription as the watched cache has it, except that a paused copy is confirmed in KV first:
   * the cache may not have seen yet the re-post that resumed it, and burying cannot be undone.
   */
  async function subscriptionFor(id: string): Promise<SubscriptionRecord | undefined> {
    const cached = cache.get(id) ?? (await cache.load(id));
    return cached?.paused_at ? (await store.get(id))?.value : cached;
  }

  /** Runs `handle` for work already admitted to the process (`admit` holds its items until it ends). */
  function launch(msg: JsMsg, work: Work, lane: Lane, reserved?: Gate): void {
    const n = work.items.length;
    void handle(msg, work, lane, reserved)
      .catch((error) => {
        log.error({ err: error, subject: msg.subject, lane }, "delivery handling failed; the work will come back");
        try {
          msg.nak(1000);
        } catch {
          // connection gone: the ack wait brings it back
        }
      })
      .finally(() => admit.release(n));
  }

  /**
   * One item: a slot of the subscription for the HTTP call only (the limit is on concurrent requests
   * to the receiver), then the outcome is recorded while the slot serves the next item.
   */
  async function deliver(gate: Gate, item: Item, subscription: SubscriptionRecord): Promise<void> {
    await slot(gate);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      stats.inFlight--;
      leave(gate);
    };
    stats.inFlight++;
    try {
      // Changes made while the item waited (a rotated secret, a new callback) apply; a paused copy in
      // the cache may be older than the record handle() confirmed.
      const latest = cache.get(item.subscription_id);
      await attempt(item, latest && !latest.paused_at ? latest : subscription, release);
    } finally {
      release();
      completed(gate);
    }
  }

  async function attempt(job: Item, subscription: SubscriptionRecord, release: () => void): Promise<void> {
    stats.attempts++;
    const started = Date.now();
    const event = await eventOf(job);
    const outcome = event ? await call(subscription, job.event_id, event) : { error: EVENT_GONE };
    const finished = Date.now();
    release();
    const record: AttemptRecord = {
      event_id: job.event_id,
      event_seq: job.event_seq,
      attempt: job.attempt,
      state: "failed",
      ...(outcome.status !== undefined ? { status_code: outcome.status } : {}),
      ...(outcome.error ? { error: outcome.error } : {}),
      duration_ms: finished - started,
      attempted_at: new Date(started).toISOString(),
    };
    if (outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300) return succeeded(job, subscription, record);
    stats.failed++;
    const heldBack = failureLog.take(subscription.subscription_id);
    if (heldBack !== undefined) {
      log.warn(
        {
          subscription: subscription.subscription_id,
          partition: job.partition,
          eventId: job.event_id,
          attempt: job.attempt,
          statusCode: outcome.status,
          error: outcome.error,
          durationMs: record.duration_ms,
          failedAttemptsNotLogged: heldBack,
        },
        "a delivery attempt failed",
      );
    }
    if (!event) return eventGone(job, subscription, record);
    if (outcome.status === 410) return receiverGone(job, subscription, record, event);
    if (job.manual) return journal.recordAttempt(job.partition, job.subscription_id, record);
    return failed(job, subscription, record, event, finished, outcome.retryAfter);
  }

  /** One HTTP call; its status (and Retry-After) or why there was none. */
  async function call(
    subscription: SubscriptionRecord,
    eventId: string,
    event: StoredEvent,
  ): Promise<{ status?: number; retryAfter?: number; error?: string }> {
    try {
      const response = await post(subscription, eventId, event);
      return { status: response.status, retryAfter: parseRetryAfter(response.retryAfter) };
    } catch (e) {
      if (e instanceof CallbackRefused) log.warn({ subscription: subscription.subscription_id, detail: e.detail }, e.message);
      return { error: describeFailure(e, options.timeoutMs) };
    }
  }

  async function succeeded(job: Item, subscription: SubscriptionRecord, record: AttemptRecord): Promise<void> {
    stats.succeeded++;
    await journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "succeeded" });
    if (subscription.failing_since) await store.modify(subscription.subscription_id, ({ failing_since: _f, ...rest }) => rest);
    // Only now is the replayed dead letter done with: until here a failure or a crash leaves it in DEAD.
    if (job.dead_seq !== undefined) await journal.forgetDead(job.dead_seq);
  }

  /**
   * The event left EVENTS before this attempt (a retry waited past its retention): no attempt can
   * deliver it, so it is dead at once, and it does not count against the receiver.
   */
  async function eventGone(job: Item, subscription: SubscriptionRecord, record: AttemptRecord): Promise<void> {
    if (job.manual) return journal.recordAttempt(job.partition, job.subscription_id, record);
    await journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "dead" });
    await bury(job, subscription, EVENT_GONE, undefined);
  }

  /**
   * Work of a paused subscription goes to DEAD unattempted. A retry's attempt is listed `pending`
   * (its predecessor booked it): its end is logged `dead` with the reason first, or the log would keep
   * it pending for good (first attempts have nothing in the log, so they add nothing).
   */
  async function pausedAway(job: Item, subscription: SubscriptionRecord, reason: string): Promise<void> {
    if (job.attempt > 1) {
      await journal.recordAttempt(job.partition, job.subscription_id, {
        event_id: job.event_id,
        event_seq: job.event_seq,
        attempt: job.attempt,
        state: "dead",
        error: reason,
        duration_ms: 0,
        attempted_at: new Date().toISOString(),
      });
    }
    await bury(job, subscription, reason, await eventOf(job));
  }

  /** Standard Webhooks: 410 Gone means the receiver wants no more; pause until re-posted. */
  async function receiverGone(job: Item, subscription: SubscriptionRecord, record: AttemptRecord, event: StoredEvent): Promise<void> {
    await journal.recordAttempt(job.partition, job.subscription_id, record);
    await pause(subscription, "the receiver answered 410 Gone");
    // A replayed dead letter is still in DEAD: a second letter would only duplicate it.
    if (job.dead_seq === undefined) await bury(job, subscription, "the receiver answered 410 Gone", event);
  }

  /**
   * A failed scheduled attempt: the next one is booked, or, with the schedule exhausted, the delivery
   * is dead. Svix's rule for disabling: only a message that exhausted its retries pauses the
   * subscription, and only when the subscription's failures began longer ago than the pause window.
   */
  async function failed(
    job: Item,
    subscription: SubscriptionRecord,
    record: AttemptRecord,
    event: StoredEvent,
    finished: number,
    retryAfter: number | undefined,
  ): Promise<void> {
    const failingSince = await firstFailure(subscription, finished);
    const scheduled = delayBefore(options.schedule, job.attempt + 1);
    if (scheduled === undefined) {
      await journal.recordAttempt(job.partition, job.subscription_id, { ...record, state: "dead" });
      if (finished - failingSince >= options.pauseAfterMs)
        await pause(subscription, `failing without a success since ${new Date(failingSince).toISOString()}`);
      await bury(job, subscription, "retry schedule exhausted", event);
      return;
    }
    const dueAt = finished + honourRetryAfter(scheduled, retryAfter);
    // Made and failed: `failed`, with when the next one is due (the log lists that one `pending` until it is made).
    await journal.recordAttempt(job.partition, job.subscription_id, { ...record, next_attempt_at: new Date(dueAt).toISOString() });
    const { event: _carried, ...next } = job;
    await journal.enqueue({ ...next, attempt: job.attempt + 1, due_at: dueAt }, "retries");
  }

  /**
   * When the subscription's current failure streak began (epoch ms), starting one at `now` if there is
   * none. Like Svix's cached first-failure time, a streak expires twice the pause window after it
   * began: one failure long ago does not make today's first failure count as failing for days.
   */
  async function firstFailure(subscription: SubscriptionRecord, now: number): Promise<number> {
    const live = (since: number | undefined): since is number => since !== undefined && now - since < 2 * options.pauseAfterMs;
    if (live(subscription.failing_since)) return subscription.failing_since;
    // The cached copy may lag: KV decides, and a concurrent failure that started a streak wins.
    const current = await store.modify(subscription.subscription_id, (r) =>
      live(r.failing_since) ? undefined : { ...r, failing_since: now },
    );
    return live(current?.failing_since) ? current.failing_since : now;
  }

  async function post(
    subscription: SubscriptionRecord,
    eventId: string,
    event: StoredEvent,
  ): Promise<{ status: number; retryAfter: string | null }> {
    const target = await targetOf(subscription.callback_uri);
    const body = bodyOf(eventId, event);
    const secrets = [subscription.secret];
    if (subscription.previous_secret && (subscription.previous_secret_until ?? 0) > Date.now()) secrets.push(subscription.previous_secret);
    const headers: Record<string, string> = {
      ...(subscription.callback_headers ?? {}),
      "content-type": "application/cloudevents+json",
      "user-agent": USER_AGENT,
      host: target.host,
      ...webhookHeaders(secrets, eventId, body),
    };
    const response = await fetch(target.connect, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(options.timeoutMs),
      ...(target.tls ? { tls: target.tls } : {}),
    } as RequestInit);
    await discardBody(response, RESPONSE_DRAIN_BYTES);
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  }

  async function pause(subscription: SubscriptionRecord, reason: string): Promise<void> {
    await store.modify(subscription.subscription_id, (r) =>
      r.paused_at ? undefined : { ...r, paused_at: new Date().toISOString(), paused_reason: reason },
    );
    log.warn({ subscription: subscription.subscription_id, reason }, "subscription paused");
  }

  /** Dead-letters a delivery with its event (without one when the event is gone: nothing to replay). */
  async function bury(job: Item, subscription: SubscriptionRecord, reason: string, event: StoredEvent | undefined): Promise<void> {
    stats.dead++;
    const { event: _carried, dead_seq: _d, ...letter } = job;
    await journal.deadLetter({
      ...letter,
      subscription_id: subscription.subscription_id,
      reason,
      ...(event ? { event: carriedPart(event) } : {}),
    });
  }

  /**
   * One lane's pull loop. Messages are pulled with `fetch`, never more than `maxMessages` received and
   * not yet started, and every received message is at once in `waitingForRoom`, renewed until it
   * starts: the consume iterator held up to a pull of messages in its buffer, where nothing could renew
   * them, and behind slow receivers that fill the concurrency they waited past the ack wait and were
   * handed over again (delivered twice). Messages start in the order received, each when its items fit
   * in `admit`. A failed pull (NATS away, the consumer or DELIVERIES deleted on the server) is retried
   * after a pause from the consumer opened again, created when missing (nats.js would wait forever
   * for a deleted consumer, and nothing else brings it back while the process runs). DELIVERIES is a
   * work queue: the work not yet acked is still there and goes to the new consumer (work held here
   * when the old one went is delivered again: at least once, as after a crash).
   */
  async function run(lane: Lane, maxMessages: number): Promise<{ stop(): Promise<void> }> {
    const durable = consumers[lane];
    const open = async () => {
      await journal.ensureConsumer(durable);
      return journal.js.consumers.get(durable.stream, durable.name);
    };
    let consumer: Consumer | undefined = await open();
    let stopped = false;
    let pull: { stop(): void } | undefined;
    /** Received, not yet started; the loop pulls only while there are fewer than maxMessages. */
    let unstarted = 0;
    let wake: (() => void) | undefined;
    let line: Promise<void> = Promise.resolve();
    const queued = new Set<JsMsg>();
    const take = (msg: JsMsg) => {
      const work = parse(msg);
      if (!work) {
        msg.term("not a delivery job");
        return;
      }
      const n = work.items.length;
      unstarted++;
      queued.add(msg);
      waitingForRoom.add(msg);
      line = line
        .then(async () => {
          if (!queued.has(msg)) return; // given back by stop()
          await admit.acquire(n);
          if (!queued.has(msg)) return admit.release(n);
          queued.delete(msg);
          waitingForRoom.delete(msg);
          unstarted--;
          wake?.();
          renew(msg); // handle()'s own renewal starts half an ack wait from now
          launch(msg, work, lane);
        })
        .catch((error: unknown) =>
          log.error({ err: error, subject: msg.subject, lane }, "starting delivery work failed; it comes back after the ack wait"),
        );
    };
    const loop = (async () => {
      let failures = 0;
      while (!stopped) {
        while (!stopped && unstarted >= maxMessages) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        if (stopped) break;
        try {
          consumer ??= await open();
          const messages = await consumer.fetch({ max_messages: maxMessages - unstarted, expires: PULL_EXPIRES_MS });
          pull = messages;
          if (stopped) messages.stop();
          for await (const msg of messages) take(msg);
          failures = 0;
        } catch (error) {
          consumer = undefined;
          if (!stopped) {
            log.warn({ err: error, consumer: durable.name }, "pulling delivery work failed; opening the consumer again");
            await new Promise((resolve) => setTimeout(resolve, Math.min(PULL_RETRY_MAX_MS, 100 * 2 ** failures++)));
          }
        } finally {
          pull = undefined;
        }
      }
    })();
    return {
      async stop() {
        stopped = true;
        pull?.stop();
        wake?.();
        await loop;
        // Work not started goes back at once, for another process (or the next start) to deliver.
        for (const msg of queued) {
          waitingForRoom.delete(msg);
          giveBack(msg);
        }
        queued.clear();
      },
    };
  }

  // First-attempt messages are batches of up to 64 deliveries: a smaller buffer holds as much work.
  const fresh = await run("deliveries", Math.min(options.concurrency, 256));
  const retries = await run("retries", Math.min(options.concurrency, 1000)).catch(async (error: unknown) => {
    await fresh.stop();
    throw error;
  });
  const loops = [fresh, retries];
  return {
    stats,
    async stop() {
      await Promise.allSettled(loops.map((loop) => loop.stop()));
      // Parked work goes back at once, for another process (or the next start) to deliver.
      stopping = true;
      for (const gate of gates.values()) {
        for (const p of gate.parked.splice(0)) {
          try {
            p.msg.nak();
          } catch {
            // connection gone: the ack wait brings it back
          }
        }
        parkedItems -= gate.parkedItems;
        gate.parkedItems = 0;
      }
      await admit.idle();
      clearInterval(sweep);
      clearInterval(renewal);
    },
  };
}

/** Gives the message back to JetStream for redelivery now (with the connection gone, the ack wait will). */
function giveBack(msg: JsMsg): void {
  try {
    msg.nak();
  } catch {
    // the ack wait brings it back
  }
}

/** Extends the message's ack deadline; with the connection gone there is nothing to extend. */
function renew(msg: JsMsg): void {
  try {
    msg.working();
  } catch {
    // the ack wait brings it back
  }
}

/** A map bounded by entries and by bytes (each entry's weight as given): the oldest entries go first. */
class BoundedCache<K, V> {
  private readonly entries = new Map<K, { value: V; bytes: number }>();
  private bytes = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
  ) {}

  get(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  set(key: K, value: V, bytes: number): void {
    this.delete(key);
    this.entries.set(key, { value, bytes });
    this.bytes += bytes;
    this.trim();
  }

  /** Sets the weight of an entry known only later, if the key still holds `value`. */
  weigh(key: K, value: V, bytes: number): void {
    const entry = this.entries.get(key);
    if (entry?.value !== value) return;
    this.bytes += bytes - entry.bytes;
    entry.bytes = bytes;
    this.trim();
  }

  /** Removes the key (only while it holds `value`, when given). */
  delete(key: K, value?: V): void {
    const entry = this.entries.get(key);
    if (!entry || (value !== undefined && entry.value !== value)) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }

  private trim(): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) return;
      this.entries.delete(key);
      this.bytes -= entry.bytes;
    }
  }
}

/** A checked callback as fetch wants it: the URL of the checked address, the Host header, TLS names. */
type Target = {
  connect: string;
  host: string;
  tls?: { serverName: string; checkServerIdentity: (name: string, cert: PeerCertificate) => Error | undefined };
};

/** Connect to the address that was checked; the Host header (and TLS server name) keep the name. */
function prepare(target: ResolvedTarget): Target {
  const connect = new URL(target.url);
  connect.hostname = target.family === 6 ? `[${target.address}]` : target.address;
  const serverName = target.url.hostname.replace(/^\[|\]$/g, "");
  return {
    connect: connect.href,
    host: target.url.host,
    ...(target.url.protocol === "https:"
      ? { tls: { serverName, checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(serverName, cert) } }
      : {}),
  };
}

function describeFailure(error: unknown, timeoutMs: number): string {
  const e = error as Error & { code?: string; cause?: { code?: string } };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return `timed out after ${timeoutMs} ms`;
  const code = e?.code ?? e?.cause?.code;
  return `${code ? `${code}: ` : ""}${e?.message ?? String(error)}`.slice(0, 500);
}

/** A receiver's answer body up to this size is read (so its connection can be reused); a longer one is cut off. */
export const RESPONSE_DRAIN_BYTES = 64 * 1024;

/**
 * Reads and drops a response body of at most `maxBytes`, cancelling a longer one: only the status
 * counts, and a receiver that streams an endless body must not fill the deliverer's memory (the
 * whole body used to be read, 1 GiB in 3 s from one attempt in a review's test).
 */
export async function discardBody(response: Response, maxBytes: number): Promise<void> {
  const reader = response.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
      if (read > maxBytes) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // Reset or timed out mid-body: the status has arrived, and that is the answer.
  }
}
