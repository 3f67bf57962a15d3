/**
 * Wiring of the `projects` actor: loads the catalog file, follows catalog additions in KV, opens the
 * project/task/content buckets and the task queue, and serves the request/reply endpoints. Stateless
 * beyond NATS: start more processes to scale reads and requests.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import * as op from "../../subjects/projects.ts";
import type { Config } from "../../config/index.ts";
import { createLogger, type Logger } from "../../platform/logger.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { catalogFrom, readCatalogFile, type Catalog } from "./catalog.ts";
import {
  deleteMember,
  deleteProject,
  getContent,
  getContentPart,
  getProject,
  getTask,
  listCatalog,
  putCatalogItem,
  putMember,
  putProject,
  requestContent,
  type ProjectsDeps,
} from "./handlers.ts";
import {
  SYNC_KEY,
  TASK_RETENTION_MS,
  catalogStore,
  contentStore,
  openStores,
  projectStore,
  taskQueue,
  taskStore,
  type OfRun,
  type Stores,
} from "./store.ts";
import { KeyView } from "./views.ts";
import { CONTENT_TTL_MS, type Content, type ContentPart, type ProjectRecord, type TaskRecord } from "../../subjects/projects.ts";

/** Most stored bytes each view holds (docs/content.md#memory-views); past it the oldest writes are read from the bucket. */
export const VIEW_BYTES = { projects: 32 * 2 ** 20, tasks: 16 * 2 ** 20, content: 64 * 2 ** 20 };

/** The views reads are answered from, started (each holds what its bucket held) and stopped together. */
async function openViews(stores: Stores, log: Logger) {
  const views = {
    projects: new KeyView<ProjectRecord>(stores.projects, stores.nc, { what: "projects", maxBytes: VIEW_BYTES.projects }, log),
    // Tasks and results expire (max age): their last message may vanish unseen, so a barrier write of a key no task has.
    tasks: new KeyView<TaskRecord>(
      stores.tasks,
      stores.nc,
      { what: "tasks", maxBytes: VIEW_BYTES.tasks, ttlMs: TASK_RETENTION_MS, barrierKey: SYNC_KEY },
      log,
    ),
    content: new KeyView<OfRun<Content> | OfRun<ContentPart>>(
      stores.content,
      stores.nc,
      { what: "content", maxBytes: VIEW_BYTES.content, ttlMs: CONTENT_TTL_MS, barrierKey: SYNC_KEY },
      log,
    ),
  };
  const all = Object.values(views);
  const started = await Promise.allSettled(all.map((view) => view.start()));
  const failed = started.find((result) => result.status === "rejected");
  if (failed) {
    await Promise.all(all.map((view) => view.stop()));
    throw failed.reason;
  }
  return { ...views, stop: () => Promise.all(all.map((view) => view.stop())).then(() => undefined) };
}

/**
 * The catalog every process of this capability serves: file items plus additions, kept current.
 * `log` gets the follow's warnings (a re-opened watch, an unreadable entry); without one they go to
 * a logger of the configured level.
 */
export async function followCatalog(
  cfg: Config,
  stores: Stores,
  log: Logger = createLogger(cfg.logLevel),
): Promise<{ catalog: Catalog; fresh(waitMs?: number): Promise<void>; stop(): Promise<void> }> {
  const catalog = catalogFrom(readCatalogFile(cfg.content.catalogFile));
  const followed = await catalogStore(stores.catalog, stores.guard.catalog).follow(
    (kind, item, revision) => catalog[kind]?.apply(item, revision),
    log,
    { onRecreated: () => Object.values(catalog).forEach((list) => list.resetAdditions()), nc: stores.nc },
  );
  return { catalog, ...followed };
}

export async function startProjectsActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "projects" });
  const stores = await openStores(nc, options.storage, log);
  const queue = taskQueue(nc, stores, { ackWaitMs: cfg.content.ackWaitMs, limits: cfg.content.queueLimits, policy: options.storage, log });
  await queue.ensure();
  const unwatch = queue.watchDeletion();
  const followed = await followCatalog(cfg, stores, log);
  const views = await openViews(stores, log).catch(async (error: unknown) => {
    await followed.stop();
    throw error;
  });
  const deps: ProjectsDeps = {
    catalog: followed.catalog,
    catalogFresh: followed.fresh,
    catalogStore: catalogStore(stores.catalog, stores.guard.catalog),
    projects: projectStore(stores.projects, stores.guard.projects, views.projects),
    tasks: taskStore(stores.tasks, stores.guard.tasks, views.tasks),
    content: contentStore(stores.content, stores.guard.content, views.content),
    enqueue: queue.enqueue,
    queueLimits: cfg.content.queueLimits,
    lost: { lostAfterMs: cfg.content.ackWaitMs, queueEmpty: queue.empty, requeue: queue.requeue },
  };
  return serveActor(
    nc,
    {
      name: "projects",
      description: "display items and key parameters: catalog, projects, membership, content requests and results",
      endpoints: [
        endpoint(op.projectsCatalogList, (input) => listCatalog(input, deps)),
        endpoint(op.projectsCatalogPut, (input, ctx) => putCatalogItem(input, ctx, deps)),
        endpoint(op.projectsProjectPut, (input, ctx) => putProject(input, ctx, deps)),
        endpoint(op.projectsProjectGet, (input, ctx) => getProject(input, ctx, deps)),
        endpoint(op.projectsProjectDelete, (input, ctx) => deleteProject(input, ctx, deps)),
        endpoint(op.projectsMemberPut, (input, ctx) => putMember(input, ctx, deps)),
        endpoint(op.projectsMemberDelete, (input, ctx) => deleteMember(input, ctx, deps)),
        endpoint(op.projectsContentRequest, (input, ctx) => requestContent(input, ctx, deps)),
        endpoint(op.projectsContentGet, (input, ctx) => getContent(input, ctx, deps)),
        endpoint(op.projectsContentPart, (input, ctx) => getContentPart(input, ctx, deps)),
        endpoint(op.projectsTaskGet, (input, ctx) => getTask(input, ctx, deps)),
      ],
    },
    options,
    async () => {
      unwatch();
      stores.close();
      await Promise.all([followed.stop(), views.stop()]);
    },
  );
}
