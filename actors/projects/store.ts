/**
 * Storage of the capability, all in JetStream:
 *   KV derrick_catalog   `<kind>.<itemId>`              → CatalogItem added by an admin
 *   KV derrick_projects  `<partition>.<projectId>`      → Project (members and values)
 *   KV derrick_tasks     `<partition>.<taskId>`         → TaskRecord (history 8: every state change; kept 7 days)
 *   KV derrick_task_index `<partition>.<projectId>`     → TaskIndex: the project's task ids, newest first (task-index.ts; kept 7 days)
 *   KV derrick_content   `<partition>.c.<contentId>`    → Content, `<partition>.p.<partId>` → ContentPart
 *                        (bucket max age 60 s: a result is gone one minute after it was written)
 *   stream CONTENT_TASKS (work queue) on derrick.content.tasks.<partition>.<queue>, durable consumer
 *                        content-workers; `<queue>` is the requester's token (requesterQueue), so the
 *                        stream's messages-per-subject limit (discard new) caps each requester's
 *                        unfinished tasks, and max_msgs the whole backlog (QueueLimits)
 * Ids are tokens ([A-Za-z0-9_-]), so every key is a valid KV key. Everything here is made again with its configuration
 * when found deleted at runtime, and unfinished tasks are queued again (docs/content.md#delivery-guarantees).
 */
import { SINGLE_NODE, bucketOptions, streamInfoIfAny, streamOptions, type StoragePolicy } from "../runtime/storage.ts";
import { nuid, type NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV, type KvOptions } from "@nats-io/kv";
import { casPut, encodeJson, isLive, isWrongRevision, readKv, readVersioned, type Versioned } from "../runtime/kv.ts";
import { BucketView, type BucketViewOptions } from "../runtime/bucket-view.ts";
import { NOT_HELD, type CachedKeys } from "../runtime/cached-keys.ts";
import {
  onStreamDeleted,
  recreateDelay,
  recreateOnDeletion,
  recreatingBucket,
  unguarded,
  withStream,
  type Guard,
  type RecreatingBucket,
} from "../runtime/recreate.ts";
import type { Logger } from "../../platform/logger.ts";
import type { TraceContext } from "../../platform/trace-context.ts";
import { traceMessageHeaders } from "../../platform/transport/index.ts";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  RetentionPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { republishedWrites, subjects } from "../../subjects/index.ts";
import { TASK_RETENTION_MS } from "./task-index.ts";
import { NO_QUEUE_LIMITS, TaskQueueFull, requesterQueue, type QueueLimits } from "./queue.ts";
import {
  CONTENT_TTL_MS,
  TaskState,
  type CatalogItem,
  type CatalogKind,
  type Content,
  type ContentPart,
  type ProjectRecord,
  type TaskRecord,
} from "../../subjects/projects.ts";

export const BUCKETS = {
  catalog: "derrick_catalog",
  projects: "derrick_projects",
  tasks: "derrick_tasks",
  taskIndex: "derrick_task_index",
  content: "derrick_content",
} as const;
export const TASK_STREAM = "CONTENT_TASKS";
export const WORKER_CONSUMER = "content-workers";
/**
 * Deliveries whose run kept hitting infrastructure errors before a task is failed for good (about three minutes of
 * backoff): the consumer has no max_deliver, which stops silently, and crash loops are bounded by MAX_RUNS instead
 * (docs/content.md#delivery-guarantees).
 */
export const GIVE_UP_AFTER_DELIVERIES = 20;

type BucketName = keyof typeof BUCKETS;

export type Stores = {
  catalog: KV;
  projects: KV;
  tasks: KV;
  taskIndex: KV;
  content: KV;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Each bucket's recovery (see Guard). */
  guard: Record<BucketName, Guard>;
  /** Stops making buckets again on deletion advisories (the guards stay). */
  close(): void;
};

export async function openStores(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE, log?: Logger): Promise<Stores> {
  const kvm = new Kvm(nc);
  const jsm = await jetstreamManager(nc);
  const options: Record<BucketName, Partial<KvOptions>> = {
    catalog: bucketOptions(policy, { history: 1, republish: republishedWrites(BUCKETS.catalog) }),
    projects: bucketOptions(policy, { history: 1, republish: republishedWrites(BUCKETS.projects) }),
    tasks: bucketOptions(policy, { history: 8, ttl: TASK_RETENTION_MS, republish: republishedWrites(BUCKETS.tasks) }),
    // Rewritten with each new task of the project: it outlives the project's last task by the tasks' retention.
    taskIndex: bucketOptions(policy, { history: 1, ttl: TASK_RETENTION_MS }),
    content: bucketOptions(policy, { history: 1, ttl: CONTENT_TTL_MS, republish: republishedWrites(BUCKETS.content) }),
  };
  const names = Object.keys(BUCKETS) as BucketName[];
  const [catalog, projects, tasks, taskIndex, content] = await Promise.all(names.map((name) => kvm.create(BUCKETS[name], options[name])));
  const recovery = Object.fromEntries(names.map((name) => [name, recreatingBucket(jsm, kvm, BUCKETS[name], options[name], log)])) as Record<
    BucketName,
    RecreatingBucket
  >;
  const advisories = recreateOnDeletion(nc, Object.fromEntries(names.map((name) => [BUCKETS[name], recovery[name]])), log);
  const guard = Object.fromEntries(names.map((name) => [name, recovery[name].guard])) as Record<BucketName, Guard>;
  return {
    catalog: catalog!,
    projects: projects!,
    tasks: tasks!,
    taskIndex: taskIndex!,
    content: content!,
    js: jetstream(nc),
    jsm,
    guard,
    close: () => advisories.unsubscribe(),
  };
}

/** The stream settings that carry the limits (discard new: a full queue refuses, it never drops). */
const limitSettings = (limits: QueueLimits) => ({
  max_msgs: limits.total > 0 ? limits.total : -1,
  max_msgs_per_subject: limits.perRequester > 0 ? limits.perRequester : -1,
  discard: DiscardPolicy.New,
  discard_new_per_subject: limits.perRequester > 0,
});

const taskStreamConfig = (policy: StoragePolicy, limits: QueueLimits) => ({
  name: TASK_STREAM,
  subjects: [subjects.content.allTasks()],
  retention: RetentionPolicy.Workqueue,
  duplicate_window: 120_000_000_000,
  ...limitSettings(limits),
  ...streamOptions(policy),
});

/** JetStream's refusal of a message past a discard-new limit (10077), as TaskQueueFull; anything else as is. */
function queueRefusal(error: unknown): unknown {
  if (!(error instanceof JetStreamApiError) || error.code !== 10077) return error;
  return new TaskQueueFull(/per subject/.test(error.message) ? "perRequester" : "total");
}

/**
 * The work-queue stream and the one durable consumer every worker process shares, made when
 * missing. True when this call made the stream (it was not there before).
 */
export async function ensureTaskQueue(
  nc: NatsConnection,
  ackWaitMs: number,
  policy: StoragePolicy = SINGLE_NODE,
  limits: QueueLimits = NO_QUEUE_LIMITS,
): Promise<boolean> {
  const jsm = await jetstreamManager(nc);
  let created = false;
  const info = await streamInfoIfAny(jsm, TASK_STREAM);
  if (info) {
    // A stream made before the limits existed, or with other ones: the configured limits apply from now
    // (messages already over a new limit stay queued; only new ones are refused).
    const wanted = limitSettings(limits);
    const current = info.config;
    const differs = (Object.keys(wanted) as Array<keyof typeof wanted>).some(
      (k) => (current[k] ?? (k === "discard_new_per_subject" ? false : undefined)) !== wanted[k],
    );
    if (differs) await jsm.streams.update(TASK_STREAM, { ...current, ...wanted });
  } else {
    created = await jsm.streams.add(taskStreamConfig(policy, limits)).then(
      () => true,
      async (error: Error) => {
        // Another process created it between the two calls (and queues the unfinished tasks).
        if (!(await streamInfoIfAny(jsm, TASK_STREAM))) throw error;
        return false;
      },
    );
  }
  const consumer = {
    durable_name: WORKER_CONSUMER,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: ackWaitMs * 1_000_000,
    max_deliver: -1,
    max_ack_pending: 10_000,
  };
  const existing = await jsm.consumers.info(TASK_STREAM, WORKER_CONSUMER).catch(() => undefined);
  if (!existing) await jsm.consumers.add(TASK_STREAM, consumer).catch(() => undefined);
  else if (existing.config.ack_wait !== consumer.ack_wait || (existing.config.max_deliver ?? -1) > 0) {
    await jsm.consumers.update(TASK_STREAM, WORKER_CONSUMER, { ack_wait: consumer.ack_wait, max_deliver: consumer.max_deliver });
  }
  return created;
}

/** Retry pauses of re-queuing the unfinished tasks after the stream was made again. */
const REQUEUE_RETRY_MS = [1_000, 2_000, 5_000, 10_000, 30_000];

export type TaskQueue = {
  /**
   * Makes the stream and the consumer when missing. When this made the stream, every task not yet
   * terminal is queued again, in the background (see requeueUnfinished).
   */
  ensure(): Promise<void>;
  /**
   * Publishes a new task on its requester's queue (deduplicated by task id); a deleted stream is made
   * again first. Throws TaskQueueFull when a limit refused it.
   */
  enqueue(partition: string, taskId: string, requester: { clientId: string; subject: string }, trace?: TraceContext): Promise<void>;
  /**
   * Publishes a task whose message was lost again, under a new message id (the task id may still be
   * in the duplicate window, which would drop it), on a queue of its own: it was admitted already, so
   * it is not held to its requester's limit again (only to the total).
   */
  requeue(partition: string, taskId: string): Promise<void>;
  /** Whether the work-queue stream holds no message (false when there is no stream). */
  empty(): Promise<boolean>;
  /**
   * Calls `onDeleted` (by default: ensure, after RECREATE_DELAY_MS) each time the server deletes the
   * work-queue stream, until the returned stop. A worker re-opens its consume loop instead (which
   * ensures): nats.js would otherwise notice only after missed heartbeats (up to a minute).
   */
  watchDeletion(onDeleted?: () => void): () => void;
};

export type TaskQueueOptions = { ackWaitMs: number; limits?: QueueLimits; policy?: StoragePolicy; log: Logger };

export function taskQueue(
  nc: NatsConnection,
  stores: Pick<Stores, "tasks" | "js" | "jsm" | "guard">,
  options: TaskQueueOptions,
): TaskQueue {
  const { ackWaitMs, limits = NO_QUEUE_LIMITS, policy = SINGLE_NODE, log } = options;
  const publishOn = (queue: string, partition: string, taskId: string, msgID = taskId, trace?: TraceContext) =>
    // The task id as message id: a retried publish inside the duplicate window is stored once. The requesting
    // request's trace goes in the headers, for the worker to continue.
    stores.js
      .publish(subjects.content.tasks(partition, queue), encodeJson({ partition, taskId }), {
        msgID,
        ...(trace ? { headers: traceMessageHeaders(trace) } : {}),
      })
      .then(
        () => undefined,
        (error: unknown) => Promise.reject(queueRefusal(error)),
      );
  // A task queued again (it was admitted before) goes on a queue of its own.
  const publish = (partition: string, taskId: string, msgID = taskId) => publishOn(taskId, partition, taskId, msgID);
  let requeuing: Promise<void> = Promise.resolve();
  const requeue = async () => {
    for (let attempt = 0; ; attempt++) {
      try {
        const count = await requeueUnfinished(stores, publish);
        // A first start makes the stream too, with nothing to queue again: not worth a warning.
        if (count > 0)
          log.warn(
            { stream: TASK_STREAM, count },
            `work-queue stream ${TASK_STREAM} was missing and is made again; ${count} unfinished tasks queued again`,
          );
        return;
      } catch (error) {
        if (attempt >= REQUEUE_RETRY_MS.length) {
          log.error(
            { err: error, stream: TASK_STREAM },
            "the unfinished tasks could not be queued again; they stay queued until the stream is made again",
          );
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, REQUEUE_RETRY_MS[attempt]));
      }
    }
  };
  const ensure = async () => {
    if (await ensureTaskQueue(nc, ackWaitMs, policy, limits)) requeuing = requeuing.then(requeue);
  };
  return {
    ensure,
    enqueue(partition, taskId, requester, trace) {
      // A publish to a deleted stream has no stream to answer it: it is made again, then published there.
      const queue = requesterQueue(requester);
      return withStream(
        stores.jsm,
        TASK_STREAM,
        ensure,
        () => publishOn(queue, partition, taskId, taskId, trace),
        (error) => error instanceof TaskQueueFull,
      );
    },
    requeue: (partition, taskId) => publish(partition, taskId, `${taskId}:${nuid.next()}`),
    empty: async () => (await streamInfoIfAny(stores.jsm, TASK_STREAM))?.state.messages === 0,
    watchDeletion(onDeleted) {
      const sub = onStreamDeleted(
        nc,
        () => {
          if (onDeleted) return onDeleted();
          void recreateDelay()
            .then(ensure)
            .catch((err: unknown) =>
              log.warn(
                { err, stream: TASK_STREAM },
                "the deleted work-queue stream could not be made again yet; the next request or worker does",
              ),
            );
        },
        TASK_STREAM,
      );
      return () => sub.unsubscribe();
    },
  };
}

/**
 * Publishes every task not yet terminal to the work queue again; how many. Called by whoever made the work-queue stream:
 * the accepted tasks' messages went with the old one. The task id as message id stores a task once, and a task run twice
 * is safe (docs/content.md#delivery-guarantees).
 */
export async function requeueUnfinished(
  stores: Pick<Stores, "tasks" | "guard">,
  publish: (partition: string, taskId: string) => Promise<void>,
): Promise<number> {
  const entries = await stores.guard.tasks(() => readKv(stores.tasks));
  const unfinished = entries
    .filter(isLive)
    .map((entry) => entry.json<TaskRecord>())
    .filter((task) => task.state === TaskState.queued || task.state === TaskState.running);
  for (let i = 0; i < unfinished.length; i += 256)
    await Promise.all(unfinished.slice(i, i + 256).map((task) => publish(task.partition, task.taskId)));
  return unfinished.length;
}

export const catalogKey = (kind: CatalogKind, id: string) => `${kind}.${id}`;
export const projectKey = (partition: string, projectId: string) => `${partition}.${projectId}`;
export const taskKey = (partition: string, taskId: string) => `${partition}.${taskId}`;
export const contentKey = (partition: string, contentId: string) => `${partition}.c.${contentId}`;
export const partKey = (partition: string, partId: string) => `${partition}.p.${partId}`;

export type ProjectStore = {
  get(partition: string, projectId: string): Promise<Versioned<ProjectRecord> | undefined>;
  /** get()'s answer when memory gives it without a wait; NOT_HELD otherwise. */
  peek(partition: string, projectId: string): Now<Versioned<ProjectRecord>>;
  /** Creates when absent (revision 0) or replaces the given revision; false when someone else wrote first. */
  write(partition: string, project: ProjectRecord, revision: number): Promise<boolean>;
  delete(partition: string, projectId: string): Promise<void>;
};

/** A read memory answers at once: the value (undefined when the key holds none), or NOT_HELD when only the bucket can tell. */
export type Now<T> = T | undefined | typeof NOT_HELD;

/** How a store reads one key: from the bucket, or through memory (CachedKeys); and at once, when memory may answer. */
type KeyReader = {
  read<T>(key: string): Promise<Versioned<T> | undefined>;
  peek<T>(key: string): Now<Versioned<T>>;
};

/** Reads guarded against a bucket made again, except those memory answers at once: they wait on no stream. */
function readerOf(kv: KV, guard: Guard, cached?: CachedKeys): KeyReader {
  if (!cached) return { read: (key) => guard(() => readVersioned(kv, key)), peek: () => NOT_HELD };
  return {
    read<T>(key: string) {
      const now = cached.peek<T>(key);
      return now === NOT_HELD ? guard(() => cached.read<T>(key)) : Promise.resolve(now);
    },
    peek: (key) => cached.peek(key),
  };
}

/** A compare-and-set whose loss drops the key from memory: the revision it expected was read stale, the next read goes to the bucket. */
async function casPutForgetting(cached: CachedKeys | undefined, ...args: Parameters<typeof casPut>): Promise<boolean> {
  const done = await casPut(...args);
  if (!done) cached?.forget(args[1]);
  return done;
}

export function projectStore(kv: KV, guard: Guard = unguarded, cached?: CachedKeys): ProjectStore {
  const { read, peek } = readerOf(kv, guard, cached);
  return {
    get: (partition, projectId) => read<ProjectRecord>(projectKey(partition, projectId)),
    peek: (partition, projectId) => peek<ProjectRecord>(projectKey(partition, projectId)),
    write: (partition, project, revision) =>
      guard(() => casPutForgetting(cached, kv, projectKey(partition, project.projectId), project, revision)),
    async delete(partition, projectId) {
      await guard(() => kv.delete(projectKey(partition, projectId)));
    },
  };
}

export type TaskStore = {
  get(partition: string, taskId: string): Promise<Versioned<TaskRecord> | undefined>;
  /** get()'s answer when memory gives it without a wait; NOT_HELD otherwise. */
  peek(partition: string, taskId: string): Now<Versioned<TaskRecord>>;
  create(task: TaskRecord): Promise<void>;
  /** Compare-and-set; false when the task changed since `revision`. */
  update(task: TaskRecord, revision: number): Promise<boolean>;
  /** Drops a task that was never queued, with its history. */
  remove(partition: string, taskId: string): Promise<void>;
};

export function taskStore(kv: KV, guard: Guard = unguarded, cached?: CachedKeys): TaskStore {
  const { read, peek } = readerOf(kv, guard, cached);
  return {
    get: (partition, taskId) => read<TaskRecord>(taskKey(partition, taskId)),
    peek: (partition, taskId) => peek<TaskRecord>(taskKey(partition, taskId)),
    create: (task) =>
      guard(async () => {
        const key = taskKey(task.partition, task.taskId);
        // A put expecting no previous message first: on a deleted bucket it fails at once, where
        // KV's create() follows its failure with a read that waits out the whole request timeout.
        // A key held before (a delete marker) is left to create(), which handles those.
        try {
          await kv.put(key, encodeJson(task), { previousSeq: 0 });
        } catch (error) {
          if (!isWrongRevision(error)) throw error;
          await kv.create(key, encodeJson(task));
        }
      }),
    update: (task, revision) => guard(() => casPutForgetting(cached, kv, taskKey(task.partition, task.taskId), task, revision, true)),
    remove: (partition, taskId) => guard(() => kv.purge(taskKey(partition, taskId))),
  };
}

/** A content or part as stored: with the run of its task that wrote it (absent when written before runs were recorded). */
export type OfRun<T> = T & { run?: number };

export type ContentStore = {
  get(partition: string, contentId: string): Promise<OfRun<Content> | undefined>;
  part(partition: string, partId: string): Promise<OfRun<ContentPart> | undefined>;
  /** get()'s answer when memory gives it without a wait; NOT_HELD otherwise. */
  peek(partition: string, contentId: string): Now<OfRun<Content>>;
  /**
   * Writes parts first, then the content (a reader who sees the content finds every part), each
   * with `run` and only over nothing or an older run's: false, and nothing more written, when a
   * newer run of the task wrote first.
   */
  write(partition: string, content: Content, parts: ContentPart[], run: number): Promise<boolean>;
};

/** Compare-and-set ATTEMPTS for one write of a run's result. */
const RUN_WRITE_ATTEMPTS = 5;

/**
 * Puts a run's value unless a newer run's is held: a compare-and-set on the revision read, so a run
 * that stalled between its check and its write cannot replace the result of a run that overtook it.
 */
async function putForRun(kv: KV, key: string, value: object, run: number): Promise<boolean> {
  for (let attempt = 0; attempt < RUN_WRITE_ATTEMPTS; attempt++) {
    const held = await readVersioned<{ run?: number }>(kv, key);
    if (held && (held.value.run ?? 0) > run) return false;
    if (await casPut(kv, key, { ...value, run }, held?.revision ?? 0, held !== undefined)) return true;
  }
  throw new Error(`${key} kept changing under run ${run}`);
}

export function contentStore(kv: KV, guard: Guard = unguarded, cached?: CachedKeys): ContentStore {
  const { read, peek } = readerOf(kv, guard, cached);
  return {
    get: async (partition, contentId) => (await read<OfRun<Content>>(contentKey(partition, contentId)))?.value,
    peek(partition, contentId) {
      const now = peek<OfRun<Content>>(contentKey(partition, contentId));
      return now === NOT_HELD ? now : now?.value;
    },
    part: async (partition, partId) => (await read<OfRun<ContentPart>>(partKey(partition, partId)))?.value,
    // Tried again whole on a bucket made again: each write is over nothing or an older run's, so
    // the parts this run wrote before the failure are simply written again.
    write: (partition, content, parts, run) =>
      guard(async () => {
        const written = await Promise.all(parts.map((part) => putForRun(kv, partKey(partition, part.contentPartId), part, run)));
        if (written.includes(false)) return false;
        return putForRun(kv, contentKey(partition, content.contentId), content, run);
      }),
  };
}

export type CatalogStore = {
  put(kind: CatalogKind, item: CatalogItem): Promise<number>;
  /**
   * Every addition with its revision, then each later change as it happens, until stopped.
   * An item may come more than once (a re-opened watch may repeat one): apply it by revision. One that
   * cannot be read is logged and skipped.
   */
  follow(
    onItem: (kind: CatalogKind, item: CatalogItem, revision: number) => void,
    log: Logger,
    options?: Pick<BucketViewOptions, "checkEveryMs" | "lastMessage" | "nc"> & { onRecreated?: () => void },
  ): Promise<CatalogFollow>;
};

/** A running catalog follow. */
export type CatalogFollow = {
  /** Resolves once every addition acknowledged before the call, by any process, was handed to onItem. */
  fresh(): Promise<void>;
  stop(): Promise<void>;
};

export function catalogStore(kv: KV, guard: Guard = unguarded): CatalogStore {
  return {
    // A bucket made again here is noticed by every process's follow (its creation time changed), which
    // then starts over from the new bucket's beginning.
    put: (kind, item) => guard(() => kv.put(catalogKey(kind, item.id), encodeJson(item))),
    async follow(onItem, log, options = {}) {
      // A view, not a bare watch: its freshness look gives read-your-writes across processes.
      // A bucket made again replays its items from revision 1: `onRecreated` must drop what was held first, or the
      // replayed items would lose to the old, higher revisions.
      const view = new BucketView(
        kv,
        {
          what: "catalog",
          checkEveryMs: options.checkEveryMs,
          lastMessage: options.lastMessage,
          nc: options.nc,
          reset: () => options.onRecreated?.(),
          apply: (entry) => {
            if (entry.operation !== "PUT" || entry.length === 0) return;
            const dot = entry.key.indexOf(".");
            const item = entry.json<CatalogItem>();
            if (typeof item?.id !== "string" || item.id !== entry.key.slice(dot + 1))
              throw new Error(`catalog entry ${entry.key} holds no item of that id`);
            onItem(entry.key.slice(0, dot) as CatalogKind, item, entry.revision);
          },
        },
        log,
      );
      await view.start();
      return { fresh: () => view.fresh(), stop: () => view.stop() };
    },
  };
}
