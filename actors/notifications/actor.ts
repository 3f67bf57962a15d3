/**
 * Wiring of the three notifications actors, each startable on its own so operators scale them apart:
 *   notifications  subscriptions API, secrets, delivery log, replay, the HTTP door for events (request/reply)
 *   dispatcher     EVENTS → one delivery job per matching subscription
 *   deliverer      delivery jobs → signed HTTP POSTs, retries, dead letters
 * Dispatcher and deliverer are NATS services too (a stats endpoint), so $SRV.PING and /readyz see them.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import * as op from "../../subjects/notifications.ts";
import type { Config } from "../../config/index.ts";
import type { Logger } from "../../platform/logger.ts";
import { reply } from "../../subjects/reply.ts";
import { endpoint, serveActor, type ActorSpec, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { caller, requireGroup } from "../runtime/context.ts";
import { callbackPolicy } from "./callback-policy.ts";
import { startDeliverer } from "./deliverer.ts";
import { actorMetrics } from "../runtime/metrics.ts";
import { startDispatcher } from "./dispatcher.ts";
import {
  deleteSubscription,
  forgetClient,
  getSecret,
  listDeliveries,
  listSubscriptions,
  publishEvent,
  retryDelivery,
  rotateSecret,
  upsertSubscription,
  type NotificationDeps,
} from "./handlers.ts";
import { openJournal, type Journal } from "./journal.ts";
import { DispatcherProgress } from "./progress.ts";
import { SubscriptionCache, SubscriptionStore } from "./store.ts";

/** The group allowed to post events over HTTP. */
export const PUBLISHERS_GROUP = "notifications.publishers";

export async function startNotificationsActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "notifications" });
  const store = await SubscriptionStore.open(nc, options.storage, log);
  const view = new SubscriptionCache(store, log);
  await view.start();
  const deps: NotificationDeps = {
    store,
    view,
    journal: await openJournal(nc, options.storage, log),
    policy: callbackPolicy(cfg.delivery),
  };
  return serveActor(
    nc,
    {
      name: "notifications",
      description: "notification subscriptions, secrets, delivery log and replay; events over HTTP; forgets deleted clients",
      work: () => ({ pausedSubscriptions: view.pausedCount() }),
      endpoints: [
        endpoint(op.notificationsSubscriptionUpsert, (i, ctx) => upsertSubscription(i.type, i.subscription, caller(ctx), deps)),
        endpoint(op.notificationsSubscriptionList, (_i, ctx) => listSubscriptions(caller(ctx), deps)),
        endpoint(op.notificationsSubscriptionDelete, async (i, ctx) => {
          await deleteSubscription(i.subscription_id, caller(ctx), deps);
          return reply({}, 200);
        }),
        endpoint(op.notificationsSubscriptionSecret, (i, ctx) => getSecret(i.subscription_id, caller(ctx), deps)),
        endpoint(op.notificationsSubscriptionSecretRotate, (i, ctx) => rotateSecret(i.subscription_id, caller(ctx), deps)),
        endpoint(op.notificationsSubscriptionDeliveries, (i, ctx) => listDeliveries(i.subscription_id, caller(ctx), deps)),
        endpoint(op.notificationsSubscriptionRetry, async (i, ctx) =>
          reply(await retryDelivery(i.subscription_id, i.event_id, caller(ctx), deps, ctx.trace), 202),
        ),
        endpoint(op.notificationsEventPublish, async (i, ctx) => {
          requireGroup(ctx, PUBLISHERS_GROUP);
          return reply(await publishEvent(i.type, i.event, caller(ctx), deps, `evt_${nuid.next()}`, ctx.trace), 202);
        }),
        // Sent by the identity actor when it deletes a client; NATS is the trust boundary (README).
        endpoint(op.notificationsClientForget, (i) => forgetClient(i, deps)),
      ],
    },
    options,
    async () => {
      await view.stop();
      deps.store.close();
      deps.journal.close();
    },
  );
}

export async function startDispatcherActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "dispatcher" });
  const reads = await openWorkerReads(nc, options, log);
  const progress = await DispatcherProgress.open(nc, options.storage);
  const dispatcher = await startDispatcher(
    reads.journal,
    reads.cache,
    progress,
    { delaysMs: cfg.delivery.scheduleMs, jitter: cfg.delivery.scheduleJitter },
    log,
  );
  return serveWorker(nc, options, reads, dispatcher, {
    name: "dispatcher",
    description: "fans events out to per-subscription delivery jobs",
    endpoints: [endpoint(op.notificationsDispatcherStats, () => ({ ...dispatcher.stats }))],
  });
}

export async function startDelivererActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "deliverer" });
  const reads = await openWorkerReads(nc, options, log);
  const d = cfg.delivery;
  const metrics = options.metrics ? actorMetrics(options.metrics) : undefined;
  const deliverer = await startDeliverer(
    reads.journal,
    reads.store,
    reads.cache,
    {
      schedule: { delaysMs: d.scheduleMs, jitter: d.scheduleJitter },
      timeoutMs: d.timeoutMs,
      pauseAfterMs: d.pauseAfterMs,
      concurrency: d.concurrency,
      perSubscription: d.perSubscription,
      policy: callbackPolicy(d),
      ...(options.metrics ? { observeDuration: (seconds: number) => metrics?.deliveryDuration.observe(seconds) } : {}),
      ...(options.tracer ? { tracer: options.tracer } : {}),
    },
    log,
  );
  if (metrics) metrics.deliveries(() => deliverer.stats);
  return serveWorker(nc, options, reads, deliverer, {
    name: "deliverer",
    description: "delivers notifications to callbacks (signed, retried, dead-lettered)",
    work: () => ({ ...deliverer.stats }),
    endpoints: [endpoint(op.notificationsDelivererStats, () => ({ ...deliverer.stats }))],
  });
}

/** What the dispatcher and the deliverer read: the journal, and the subscriptions through a started cache. */
type WorkerReads = { journal: Journal; store: SubscriptionStore; cache: SubscriptionCache; close(): Promise<void> };

async function openWorkerReads(nc: NatsConnection, options: RuntimeOptions, log: Logger): Promise<WorkerReads> {
  const journal = await openJournal(nc, options.storage, log);
  const store = await SubscriptionStore.open(nc, options.storage, log);
  const cache = new SubscriptionCache(store, log);
  await cache.start();
  return {
    journal,
    store,
    cache,
    async close() {
      await cache.stop();
      store.close();
      journal.close();
    },
  };
}

/** Serves a worker's stats; its stop ends the work first (so nothing new starts), then its reads, then the service. */
async function serveWorker(
  nc: NatsConnection,
  options: RuntimeOptions,
  reads: WorkerReads,
  worker: { stop(): Promise<void> },
  spec: ActorSpec,
): Promise<ServedActor> {
  const served = await serveActor(nc, spec, options);
  return {
    ...served,
    async stop() {
      await worker.stop();
      await reads.close();
      await served.stop();
    },
  };
}
