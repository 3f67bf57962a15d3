/**
 * Wiring of the `projects` actor: loads the catalog file, follows catalog additions in KV, opens the
 * project/task/content buckets and the task queue, and serves the request/reply endpoints. Stateless
 * beyond NATS: start more processes to scale reads and requests.
 */
import { CachedKeys, type CachedKeysLimits } from "../runtime/cached-keys.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import * as op from "../../subjects/projects.ts";
import type { Config } from "../../config/index.ts";
import { createLogger, type Logger } from "../../platform/logger.ts";
import { endpoint, endpointsWith, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { catalogFrom, readCatalogFile, type Catalog } from "./catalog.ts";
import {
  deleteMember,
  deleteProject,
  getContent,
  getContentPart,
  getProject,
  getTask,
  listCatalog,
  listTasks,
  putCatalogItem,
  putMember,
  putProject,
  requestContent,
  type ProjectsDeps,
} from "./handlers.ts";
import { catalogStore, contentStore, openStores, projectStore, taskQueue, taskStore, type CatalogFollow, type Stores } from "./store.ts";
import { taskIndexStore } from "./task-index.ts";
import { directLastMessage } from "../runtime/bucket-view.ts";

/**
 * The catalog every process of this capability serves: file items plus additions, kept current, and
 * `fresh()` to wait for every addition acknowledged anywhere. `log` gets the follow's warnings (a
 * re-opened watch, an unreadable entry); without one they go to a logger of the configured level.
 */
export async function followCatalog(
  nc: NatsConnection,
  cfg: Config,
  stores: Stores,
  log: Logger = createLogger(cfg.logLevel),
): Promise<{ catalog: Catalog } & CatalogFollow> {
  const catalog = catalogFrom(readCatalogFile(cfg.content.catalogFile));
  const follow = await catalogStore(stores.catalog, stores.guard.catalog).follow(
    (kind, item, revision) => catalog[kind]?.apply(item, revision),
    log,
    {
      onRecreated: () => Object.values(catalog).forEach((list) => list.resetAdditions()),
      lastMessage: directLastMessage(nc, stores.catalog),
      nc,
    },
  );
  return { catalog, ...follow };
}

/** What one process holds of single-key reads (docs/content.md#reads-from-memory). */
export const HELD_READS = {
  projects: { entries: 10_000, bytes: 16 * 1024 * 1024 },
  tasks: { entries: 10_000, bytes: 16 * 1024 * 1024 },
  content: { entries: 1_000, bytes: 32 * 1024 * 1024 },
} satisfies Record<string, CachedKeysLimits>;

export async function startProjectsActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "projects" });
  const stores = await openStores(nc, options.storage, log);
  const queue = taskQueue(nc, stores, { ackWaitMs: cfg.content.ackWaitMs, limits: cfg.content.queueLimits, policy: options.storage, log });
  await queue.ensure();
  const unwatch = queue.watchDeletion();
  const followed = await followCatalog(nc, cfg, stores, log);
  const cached = {
    projects: new CachedKeys(stores.projects, nc, HELD_READS.projects),
    tasks: new CachedKeys(stores.tasks, nc, HELD_READS.tasks),
    content: new CachedKeys(stores.content, nc, HELD_READS.content),
  };
  const deps: ProjectsDeps = {
    catalog: followed.catalog,
    catalogFresh: followed.fresh,
    catalogStore: catalogStore(stores.catalog, stores.guard.catalog),
    projects: projectStore(stores.projects, stores.guard.projects, cached.projects),
    tasks: taskStore(stores.tasks, stores.guard.tasks, cached.tasks),
    taskIndex: taskIndexStore(stores.taskIndex, stores.guard.taskIndex),
    content: contentStore(stores.content, stores.guard.content, cached.content),
    enqueue: queue.enqueue,
    queueLimits: cfg.content.queueLimits,
    lost: { lostAfterMs: cfg.content.ackWaitMs, queueEmpty: queue.empty, requeue: queue.requeue },
  };
  const on = endpointsWith(deps);
  return serveActor(
    nc,
    {
      name: "projects",
      description: "display items and key parameters: catalog, projects, membership, content requests and results",
      endpoints: [
        endpoint(op.projectsCatalogList, (input) => listCatalog(input, deps)),
        on(op.projectsCatalogPut, putCatalogItem),
        on(op.projectsProjectPut, putProject),
        on(op.projectsProjectGet, getProject),
        on(op.projectsProjectDelete, deleteProject),
        on(op.projectsMemberPut, putMember),
        on(op.projectsMemberDelete, deleteMember),
        on(op.projectsContentRequest, requestContent),
        on(op.projectsContentGet, getContent),
        on(op.projectsContentPart, getContentPart),
        on(op.projectsTaskGet, getTask),
        on(op.projectsTaskList, listTasks),
      ],
    },
    options,
    async () => {
      unwatch();
      stores.close();
      for (const reads of Object.values(cached)) reads.stop();
      await followed.stop();
    },
  );
}
