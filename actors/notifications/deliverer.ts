/**
 * The deliverer: takes delivery jobs from DELIVERIES (first attempts and retries on two durable
 * consumers, so waiting retries never hold up fresh work) and POSTs each event to its subscription's
 * callback. Every attempt is recorded in ATTEMPTS, and the follow-up (next retry, dead letter or
 * nothing) is stored, before the job is acked: a deliverer killed mid-attempt loses nothing, the job
 * comes back after the ack wait.
 *
 * Fairness: at most `perSubscription` attempts run at once per subscription in one process, with up to
 * a quarter of the process's capacity waiting behind them; further jobs of a saturated subscription move to the retry lane (first
 * attempts) or are nak'ed for a short while (retries). One slow receiver therefore holds a bounded
 * share of the process and never delays the others.
 */
import type { JsMsg } from "@nats-io/jetstream";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import type { Logger } from "../../platform/logger.ts";
import type { DeliveryJob } from "../../subjects/notifications.ts";
import { subjects } from "../../subjects/index.ts";
import { Slots } from "./slots.ts";
import { resolveCallback, type CallbackPolicy } from "./callback-policy.ts";
import { CONSUMERS, STREAMS, ensureConsumer, type AttemptRecord, type Journal, type StoredEvent } from "./journal.ts";
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

export type DelivererStats = { attempts: number; succeeded: number; failed: number; dead: number; overflowed: number; inFlight: number };
export type Deliverer = { stats: DelivererStats; stop(): Promise<void> };

type Lane = "deliveries" | "retries";
type Gate = { active: number; waiting: Array<() => void> };

const USER_AGENT = "derrick-webhooks/1";
const OVERFLOW_DELAY_MS = 200;
const EVENT_CACHE_SIZE = 2048;
const decoder = new TextDecoder();

export async function startDeliverer(journal: Journal, store: SubscriptionStore, cache: SubscriptionCache, options: DelivererOptions, log: Logger): Promise<Deliverer> {
  // The ack wait covers one attempt (working() restarts it when the attempt starts) plus recording.
  const ackWaitMs = options.timeoutMs + 3_000;
  await ensureConsumer(journal.jsm, STREAMS.deliveries, CONSUMERS.deliverer, subjects.notifications.allDeliveries(), ackWaitMs, Math.max(1000, options.concurrency * 4));
  // Retries wait in the consumer (nak with delay) for up to a day: no bound on how many may wait.
  await ensureConsumer(journal.jsm, STREAMS.deliveries, CONSUMERS.retries, subjects.notifications.allRetries(), ackWaitMs, -1);
  const stats: DelivererStats = { attempts: 0, succeeded: 0, failed: 0, dead: 0, overflowed: 0, inFlight: 0 };
  const admit = new Slots(options.concurrency);
  const gates = new Map<string, Gate>();
  // Jobs of one subscription may wait behind its running attempts up to a quarter of the process's
  // capacity: enough to keep one busy receiver saturated, bounded so a slow one cannot take it all.
  const queueLimit = Math.max(options.perSubscription, Math.floor(options.concurrency / 4));
  const events = new Map<number, Promise<StoredEvent | undefined>>();

  function readEvent(seq: number): Promise<StoredEvent | undefined> {
    let found = events.get(seq);
    if (!found) {
      found = journal.readEvent(seq);
      events.set(seq, found);
      if (events.size > EVENT_CACHE_SIZE) events.delete(events.keys().next().value!);
      void found.then((e) => e ?? events.delete(seq), () => events.delete(seq));
    }
    return found;
  }

  /** Waits for a slot of the subscription; false when the subscription is saturated. */
  async function enter(id: string): Promise<boolean> {
    let gate = gates.get(id);
    if (!gate) gates.set(id, (gate = { active: 0, waiting: [] }));
    if (gate.active < options.perSubscription) {
      gate.active++;
      return true;
    }
    if (gate.waiting.length >= queueLimit) return false;
    await new Promise<void>((resolve) => gate.waiting.push(resolve));
    return true;
  }

  function leave(id: string): void {
    const gate = gates.get(id);
    if (!gate) return;
    const next = gate.waiting.shift();
    if (next) next(); // the slot passes to the next waiter
    else if (--gate.active === 0) gates.delete(id);
  }

  async function handle(msg: JsMsg, lane: Lane): Promise<void> {
    let job: DeliveryJob;
    try {
      job = JSON.parse(decoder.decode(msg.data)) as DeliveryJob;
    } catch {
      msg.term("not a delivery job");
      return;
    }
    const subscription = await cache.load(job.subscription_id);
    if (!subscription) {
      msg.ack(); // deleted: nothing to deliver to
      return;
    }
    if (subscription.paused_at && !job.manual) {
      await bury(job, subscription, `subscription paused: ${subscription.paused_reason ?? "paused"}`);
      msg.ack();
      return;
    }
    const wait = job.due_at - Date.now();
    if (wait > 5) {
      msg.nak(wait);
      return;
    }
    // While waiting for the subscription's turn, keep the job ours (no redelivery to another process).
    const keepAlive = setInterval(() => msg.working(), Math.max(500, Math.floor(ackWaitMs / 2)));
    let entered: boolean;
    try {
      entered = await enter(job.subscription_id);
    } finally {
      clearInterval(keepAlive);
    }
    if (!entered) {
      if (lane === "deliveries") {
        stats.overflowed++;
        const dueAt = Date.now() + OVERFLOW_DELAY_MS;
        await journal.enqueue({ ...job, due_at: dueAt }, "retries", `overflow-${dueAt}`);
        msg.ack();
      } else {
        msg.nak(OVERFLOW_DELAY_MS + Math.floor(Math.random() * OVERFLOW_DELAY_MS));
      }
      return;
    }
    try {
      msg.working();
      stats.inFlight++;
      await attempt(job, (await cache.load(job.subscription_id)) ?? subscription);
      msg.ack();
    } finally {
      stats.inFlight--;
      leave(job.subscription_id);
    }
  }

  async function attempt(job: DeliveryJob, subscription: SubscriptionRecord): Promise<void> {
    stats.attempts++;
    const started = Date.now();
    const event = await readEvent(job.event_seq);
    let statusCode: number | undefined;
    let error: string | undefined;
    let retryAfter: number | undefined;
    if (!event) {
      error = "the event is no longer stored (EVENTS retention passed)";
    } else {
      try {
        const response = await post(subscription, job.event_id, event);
        statusCode = response.status;
        retryAfter = parseRetryAfter(response.retryAfter);
      } catch (e) {
        error = describeFailure(e, options.timeoutMs);
      }
    }
    const finished = Date.now();
    const base: AttemptRecord = {
      event_id: job.event_id,
      event_seq: job.event_seq,
      attempt: job.attempt,
      state: "failed",
      ...(statusCode !== undefined ? { status_code: statusCode } : {}),
      ...(error ? { error } : {}),
      duration_ms: finished - started,
      attempted_at: new Date(started).toISOString(),
    };
    if (statusCode !== undefined && statusCode >= 200 && statusCode < 300) {
      stats.succeeded++;
      await journal.recordAttempt(job.partition, job.subscription_id, { ...base, state: "succeeded" });
      if (subscription.failing_since) await store.modify(subscription.subscription_id, ({ failing_since: _f, ...rest }) => rest);
      return;
    }
    stats.failed++;
    if (statusCode === 410) {
      // Standard Webhooks: 410 Gone means the receiver wants no more; pause until re-posted.
      await journal.recordAttempt(job.partition, job.subscription_id, base);
      await pause(subscription, "the receiver answered 410 Gone");
      await bury(job, subscription, "the receiver answered 410 Gone");
      return;
    }
    if (job.manual) {
      await journal.recordAttempt(job.partition, job.subscription_id, base);
      return;
    }
    const failingSince = subscription.failing_since ?? finished;
    if (!subscription.failing_since) await store.modify(subscription.subscription_id, (r) => (r.failing_since ? undefined : { ...r, failing_since: finished }));
    const scheduled = delayBefore(options.schedule, job.attempt + 1);
    if (scheduled === undefined || finished - failingSince >= options.pauseAfterMs) {
      await journal.recordAttempt(job.partition, job.subscription_id, { ...base, state: "dead" });
      if (scheduled !== undefined) await pause(subscription, `failing without a success since ${new Date(failingSince).toISOString()}`);
      await bury(job, subscription, scheduled === undefined ? "retry schedule exhausted" : "subscription paused after failing too long");
      return;
    }
    const delay = honourRetryAfter(scheduled, retryAfter);
    const dueAt = finished + delay;
    await journal.recordAttempt(job.partition, job.subscription_id, { ...base, state: "pending", next_attempt_at: new Date(dueAt).toISOString() });
    await journal.enqueue({ ...job, attempt: job.attempt + 1, due_at: dueAt }, "retries");
  }

  async function post(subscription: SubscriptionRecord, eventId: string, event: StoredEvent): Promise<{ status: number; retryAfter: string | null }> {
    const target = await resolveCallback(options.policy, subscription.callback_uri);
    const body = JSON.stringify(cloudEvent(eventId, event));
    const secrets = [subscription.secret];
    if (subscription.previous_secret && (subscription.previous_secret_until ?? 0) > Date.now()) secrets.push(subscription.previous_secret);
    const headers: Record<string, string> = {
      ...(subscription.callback_headers ?? {}),
      "content-type": "application/cloudevents+json",
      "user-agent": USER_AGENT,
      ...webhookHeaders(secrets, eventId, body),
    };
    // Connect to the address that was checked; the Host header (and TLS server name) keep the name.
    const connect = new URL(target.url);
    const hostname = target.url.hostname;
    connect.hostname = target.family === 6 ? `[${target.address}]` : target.address;
    headers.host = target.url.host;
    const serverName = hostname.replace(/^\[|\]$/g, "");
    const tls = target.url.protocol === "https:" ? { serverName, checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(serverName, cert) } : undefined;
    const response = await fetch(connect, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(options.timeoutMs),
      ...(tls ? { tls } : {}),
    } as RequestInit);
    // Drain the body so the connection can be reused; its content is not kept.
    await response.arrayBuffer().catch(() => undefined);
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  }

  async function pause(subscription: SubscriptionRecord, reason: string): Promise<void> {
    await store.modify(subscription.subscription_id, (r) => (r.paused_at ? undefined : { ...r, paused_at: new Date().toISOString(), paused_reason: reason }));
    log.warn({ subscription: subscription.subscription_id, reason }, "subscription paused");
  }

  async function bury(job: DeliveryJob, subscription: SubscriptionRecord, reason: string): Promise<void> {
    stats.dead++;
    const event = await readEvent(job.event_seq);
    const { event_id: _i, event_seq: _s, partition: _p, type: _t, ...body } = event ?? { event_id: "", event_seq: 0, partition: "", type: "", time: new Date(0).toISOString(), data: null };
    await journal.deadLetter({ ...job, subscription_id: subscription.subscription_id, reason, event: body });
  }

  function run(messages: AsyncIterable<JsMsg>, lane: Lane): Promise<void> {
    return (async () => {
      for await (const msg of messages) {
        await admit.acquire();
        void handle(msg, lane)
          .catch((error) => {
            log.error({ err: error, subject: msg.subject }, "delivery handling failed; the job will come back");
            try {
              msg.nak(1000);
            } catch {
              // connection gone: the ack wait brings it back
            }
          })
          .finally(() => admit.release());
      }
    })();
  }

  const fresh = await (await journal.js.consumers.get(STREAMS.deliveries, CONSUMERS.deliverer)).consume({ max_messages: Math.min(options.concurrency, 1000) });
  const retries = await (await journal.js.consumers.get(STREAMS.deliveries, CONSUMERS.retries)).consume({ max_messages: Math.min(options.concurrency, 1000) });
  const loops = [run(fresh, "deliveries"), run(retries, "retries")];
  return {
    stats,
    async stop() {
      await Promise.allSettled([fresh.close(), retries.close()]);
      await Promise.allSettled(loops);
      await admit.idle();
    },
  };
}

function describeFailure(error: unknown, timeoutMs: number): string {
  const e = error as Error & { code?: string; cause?: { code?: string } };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return `timed out after ${timeoutMs} ms`;
  const code = e?.code ?? e?.cause?.code;
  return `${code ? `${code}: ` : ""}${e?.message ?? String(error)}`.slice(0, 500);
}
