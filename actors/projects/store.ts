/**
 * Storage of the capability, all in JetStream:
 *   KV derrick_catalog   `<kind>.<itemId>`              → CatalogItem added by an admin
 *   KV derrick_projects  `<partition>.<projectId>`      → Project (members and values)
 *   KV derrick_tasks     `<partition>.<taskId>`         → TaskRecord (history 8: every state change; kept 7 days)
 *   KV derrick_content   `<partition>.c.<contentId>`    → Content, `<partition>.p.<partId>` → ContentPart
 *                        (bucket max age 60 s: a result is gone one minute after it was written)
 *   stream CONTENT_TASKS (work queue) on derrick.content.tasks.<partition>, durable consumer content-workers
 * Ids are tokens ([A-Za-z0-9_-]), so every key is a valid KV key.
 */
import { SINGLE_NODE, bucketOptions, streamOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import { casPut, encodeJson, readKv, readVersioned, type Versioned } from "../runtime/kv.ts";
import { followBucket, type FollowOptions } from "../runtime/follow.ts";
import type { Logger } from "../../platform/logger.ts";
import { AckPolicy, DeliverPolicy, RetentionPolicy, jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { subjects } from "../../subjects/index.ts";
import { CONTENT_TTL_MS, type CatalogItem, type CatalogKind, type Content, type ContentPart, type ProjectRecord, type TaskRecord } from "../../subjects/projects.ts";

export const BUCKETS = { catalog: "derrick_catalog", projects: "derrick_projects", tasks: "derrick_tasks", content: "derrick_content" } as const;
export const TASK_STREAM = "CONTENT_TASKS";
export const WORKER_CONSUMER = "content-workers";
/**
 * Deliveries whose run kept hitting infrastructure errors before a task is failed for good (the
 * worker naks with a backoff of 1 s, 2 s, 5 s, then 10 s: about three minutes in all). The consumer
 * itself redelivers without limit: JetStream's max_deliver stops redelivering silently, and a worker
 * killed on that last delivery would leave the task `running` forever. Crash loops are bounded by
 * the runner's count of runs that never finished (MAX_RUNS in handlers.ts) instead; a run that ends
 * in an infrastructure error is not one of those, so an outage spends this budget, not that one.
 */
export const GIVE_UP_AFTER_DELIVERIES = 20;
const TASK_RETENTION_MS = 7 * 86_400_000;


export type Stores = {
  catalog: KV;
  projects: KV;
  tasks: KV;
  content: KV;
  js: JetStreamClient;
};

export async function openStores(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): Promise<Stores> {
  const kvm = new Kvm(nc);
  const [catalog, projects, tasks, content] = await Promise.all([
    kvm.create(BUCKETS.catalog, bucketOptions(policy, { history: 1 })),
    kvm.create(BUCKETS.projects, bucketOptions(policy, { history: 1 })),
    kvm.create(BUCKETS.tasks, bucketOptions(policy, { history: 8, ttl: TASK_RETENTION_MS })),
    kvm.create(BUCKETS.content, bucketOptions(policy, { history: 1, ttl: CONTENT_TTL_MS })),
  ]);
  return { catalog, projects, tasks, content, js: jetstream(nc) };
}

/** The work-queue stream and the one durable consumer every worker process shares. */
export async function ensureTaskQueue(nc: NatsConnection, ackWaitMs: number, policy: StoragePolicy = SINGLE_NODE): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const stream = { name: TASK_STREAM, subjects: [subjects.content.allTasks()], retention: RetentionPolicy.Workqueue, duplicate_window: 120_000_000_000, ...streamOptions(policy) };
  try {
    await jsm.streams.info(TASK_STREAM);
  } catch {
    await jsm.streams.add(stream).catch(async (error: Error) => {
      // Another process created it between the two calls.
      if (!(await jsm.streams.info(TASK_STREAM).catch(() => undefined))) throw error;
    });
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
}

export const catalogKey = (kind: CatalogKind, id: string) => `${kind}.${id}`;
export const projectKey = (partition: string, projectId: string) => `${partition}.${projectId}`;
export const taskKey = (partition: string, taskId: string) => `${partition}.${taskId}`;
export const contentKey = (partition: string, contentId: string) => `${partition}.c.${contentId}`;
export const partKey = (partition: string, partId: string) => `${partition}.p.${partId}`;


export type ProjectStore = {
  get(partition: string, projectId: string): Promise<Versioned<ProjectRecord> | undefined>;
  /** Creates when absent (revision 0) or replaces the given revision; false when someone else wrote first. */
  write(partition: string, project: ProjectRecord, revision: number): Promise<boolean>;
  delete(partition: string, projectId: string): Promise<void>;
};

export function projectStore(kv: KV): ProjectStore {
  return {
    get: (partition, projectId) => readVersioned<ProjectRecord>(kv, projectKey(partition, projectId)),
    async write(partition, project, revision) {
      return casPut(kv, projectKey(partition, project.projectId), project, revision);
    },
    async delete(partition, projectId) {
      await kv.delete(projectKey(partition, projectId));
    },
  };
}

export type TaskStore = {
  get(partition: string, taskId: string): Promise<Versioned<TaskRecord> | undefined>;
  create(task: TaskRecord): Promise<void>;
  /** Compare-and-set; false when the task changed since `revision`. */
  update(task: TaskRecord, revision: number): Promise<boolean>;
};

export function taskStore(kv: KV): TaskStore {
  return {
    get: (partition, taskId) => readVersioned<TaskRecord>(kv, taskKey(partition, taskId)),
    async create(task) {
      await kv.create(taskKey(task.partition, task.taskId), encodeJson(task));
    },
    update: (task, revision) => casPut(kv, taskKey(task.partition, task.taskId), task, revision, true),
  };
}

/** A content or part as stored: with the run of its task that wrote it (absent when written before runs were recorded). */
export type OfRun<T> = T & { run?: number };

export type ContentStore = {
  get(partition: string, contentId: string): Promise<OfRun<Content> | undefined>;
  part(partition: string, partId: string): Promise<OfRun<ContentPart> | undefined>;
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

export function contentStore(kv: KV): ContentStore {
  return {
    get: async (partition, contentId) => (await readVersioned<OfRun<Content>>(kv, contentKey(partition, contentId)))?.value,
    part: async (partition, partId) => (await readVersioned<OfRun<ContentPart>>(kv, partKey(partition, partId)))?.value,
    async write(partition, content, parts, run) {
      const written = await Promise.all(parts.map((part) => putForRun(kv, partKey(partition, part.contentPartId), part, run)));
      if (written.includes(false)) return false;
      return putForRun(kv, contentKey(partition, content.contentId), content, run);
    },
  };
}

export type CatalogStore = {
  put(kind: CatalogKind, item: CatalogItem): Promise<number>;
  /**
   * Every addition with its revision, then each later change as it happens, until the returned stop.
   * An item may come more than once (the load and the watch overlap; a re-opened watch may repeat
   * one): apply it by revision. One that cannot be read is logged and skipped.
   */
  follow(onItem: (kind: CatalogKind, item: CatalogItem, revision: number) => void, log: Logger, options?: Pick<FollowOptions, "onRecreated" | "checkEveryMs">): Promise<() => Promise<void>>;
};

export function catalogStore(kv: KV): CatalogStore {
  return {
    put: (kind, item) => kv.put(catalogKey(kind, item.id), encodeJson(item)),
    async follow(onItem, log, options = {}) {
      const deliver = (entry: KvEntry) => {
        if (entry.operation !== "PUT" || entry.length === 0) return;
        const dot = entry.key.indexOf(".");
        const item = entry.json<CatalogItem>();
        if (typeof item?.id !== "string" || item.id !== entry.key.slice(dot + 1)) throw new Error(`catalog entry ${entry.key} holds no item of that id`);
        onItem(entry.key.slice(0, dot) as CatalogKind, item, entry.revision);
      };
      // Watch first, then load: an update landing between the two is applied either way, and
      // revisions keep the newest. The watch is re-opened whenever it ends (followBucket).
      // A bucket made again replays its items from revision 1: `onRecreated` must drop what was held
      // first, or the replayed items would lose to the old, higher revisions.
      const followed = await followBucket(kv, { what: "catalog", from: "updates", ...options }, deliver, log);
      try {
        for (const entry of await readKv(kv)) {
          try {
            deliver(entry);
          } catch (error) {
            log.error({ err: error, key: entry.key, revision: entry.revision }, "a catalog entry could not be read; skipped");
          }
        }
      } catch (error) {
        await followed.stop();
        throw error;
      }
      return () => followed.stop();
    },
  };
}
