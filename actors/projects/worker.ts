/**
 * Wiring of the `content-worker` actor: one pull consumer on the CONTENT_TASKS work queue shared by every worker process
 * (scale by starting more), up to DERRICK_CONTENT_CONCURRENCY tasks at once. A message is acked only once its task is
 * terminal, so a killed worker's task goes to another after the ack wait (docs/content.md#delivery-guarantees). Also a
 * NATS service (stats), so $SRV.PING and /readyz see it.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import type { JsMsg } from "@nats-io/jetstream";
import { TaskMessage, contentStats, type WorkerStats } from "../../subjects/projects.ts";
import type { Config } from "../../config/index.ts";
import type { Logger } from "../../platform/logger.ts";
import { noTracer, type Tracer } from "../../platform/tracing.ts";
import { traceOfMessage } from "../../platform/transport/index.ts";
import { check } from "../../subjects/validation.ts";
import { Slots } from "../runtime/slots.ts";
import { consumeForever } from "../runtime/follow.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { followCatalog } from "./actor.ts";
import { failTask, runContentTask, type Delivery, type WorkerDeps } from "./content-task.ts";
import {
  GIVE_UP_AFTER_DELIVERIES,
  TASK_STREAM,
  WORKER_CONSUMER,
  contentStore,
  openStores,
  projectStore,
  taskQueue,
  taskStore,
} from "./store.ts";

/** Backoff before a task whose run hit an infrastructure error is tried again. */
const RETRY_DELAYS_MS = [1_000, 2_000, 5_000, 10_000];

export async function startContentWorker(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "content-worker" });
  const tracer = options.tracer ?? noTracer;
  const stores = await openStores(nc, options.storage, log);
  const queue = taskQueue(nc, stores, { ackWaitMs: cfg.content.ackWaitMs, limits: cfg.content.queueLimits, policy: options.storage, log });
  const followed = await followCatalog(nc, cfg, stores, log);
  const deps: WorkerDeps = {
    catalog: followed.catalog,
    catalogFresh: followed.fresh,
    projects: projectStore(stores.projects, stores.guard.projects),
    tasks: taskStore(stores.tasks, stores.guard.tasks),
    content: contentStore(stores.content, stores.guard.content),
    delayMs: cfg.content.taskDelayMs,
  };
  const stats: WorkerStats = { instance: nuid.next(), completed: 0, failed: 0, redelivered: 0, inFlight: 0 };
  // Holds the consume loop while full: a message this process cannot start yet stays with JetStream
  // for another worker.
  const gate = new Slots(cfg.content.workerConcurrency);
  // nats.js would wait forever for a deleted durable consumer to come back: a missing consumer or stream ends the
  // iterator instead, and each re-opening creates what is missing, queuing unfinished tasks again when the stream
  // was gone (docs/content.md#delivery-guarantees).
  const loop = await consumeForever(
    async () => {
      await queue.ensure();
      const consumer = await stores.js.consumers.get(TASK_STREAM, WORKER_CONSUMER);
      return consumer.consume({ max_messages: cfg.content.workerConcurrency, abort_on_missing_resource: true });
    },
    async (msg) => {
      await gate.acquire();
      stats.inFlight++;
      void handleTask(msg, deps, cfg.content.ackWaitMs, stats, log, tracer).finally(() => {
        stats.inFlight--;
        gate.release();
      });
    },
    { what: "content tasks", log },
  );
  // A deleted work-queue stream: the loop re-opens now (making the stream again) rather than after
  // the pull's missed heartbeats.
  const unwatch = queue.watchDeletion(() => loop.reopen());

  const served = await serveActor(
    nc,
    {
      name: "content-worker",
      description: "runs content tasks from the CONTENT_TASKS work queue",
      endpoints: [endpoint(contentStats, () => ({ ...stats }))],
    },
    options,
  );
  return {
    ...served,
    async stop() {
      // Stop pulling; tasks in flight finish and ack; anything buffered but not started is
      // redelivered to another worker after the ack wait.
      unwatch();
      await loop.stop();
      await gate.idle();
      await followed.stop();
      stores.close();
      await served.stop();
    },
  };
}

function delivery(msg: JsMsg, ackWaitMs: number): Delivery {
  const attempt = msg.info.deliveryCount;
  return {
    attempt,
    last: attempt >= GIVE_UP_AFTER_DELIVERIES,
    working: () => msg.working(),
    async hold(ms) {
      const beat = Math.max(100, Math.floor(ackWaitMs / 3));
      const until = Date.now() + ms;
      while (Date.now() < until) {
        msg.working();
        await new Promise((resolve) => setTimeout(resolve, Math.min(beat, until - Date.now())));
      }
    },
  };
}

/**
 * Handles one message; never throws. Its log lines carry the trace of the request that queued the task, and its run is
 * a span of that trace (when spans are exported).
 */
export async function handleTask(
  msg: JsMsg,
  deps: WorkerDeps,
  ackWaitMs: number,
  stats: WorkerStats,
  rootLog: Logger,
  tracer: Tracer = noTracer,
): Promise<void> {
  const trace = traceOfMessage(msg.headers);
  const log = trace ? rootLog.child({ traceId: trace.traceId }) : rootLog;
  let message: TaskMessage;
  try {
    message = check(TaskMessage, msg.json());
  } catch {
    log.warn({ seq: msg.seq }, "dropping a malformed task message");
    msg.term("malformed task message");
    return;
  }
  const d = delivery(msg, ackWaitMs);
  if (d.attempt > 1) stats.redelivered++;
  const span = trace && tracer.exporting ? tracer.contentTask(trace, { taskId: message.taskId, attempt: d.attempt }) : undefined;
  let failure: string | undefined;
  try {
    const outcome = await runContentTask(message, deps, d);
    if (outcome === "failed") failure = "the task failed";
    if (outcome === "superseded") {
      // Neither ack nor nak: both would act on the message the newer run holds (see Outcome). If
      // that run's worker dies, JetStream redelivers after its ack wait.
      log.info({ taskId: message.taskId, attempt: d.attempt }, "content run overtaken by a newer run of its task; message left to it");
      return;
    }
    if (outcome === "completed") stats.completed++;
    else if (outcome === "failed") stats.failed++;
    msg.ack();
  } catch (error) {
    failure = (error as Error).message ?? String(error);
    log.warn({ err: error, taskId: message.taskId, attempt: d.attempt }, "content task hit an error");
    const retry = () => msg.nak(RETRY_DELAYS_MS[Math.min(d.attempt - 1, RETRY_DELAYS_MS.length - 1)]);
    if (!d.last) return retry();
    try {
      await failTask(deps, message, `the task could not be completed after ${d.attempt} deliveries`);
      stats.failed++;
      msg.term("gave up");
    } catch {
      // Not even the failure could be recorded: keep the message, or the task would stay unfinished.
      retry();
    }
  } finally {
    span?.end(failure ? { error: failure } : {});
  }
}
