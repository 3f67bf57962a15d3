/**
 * Handlers of the `projects` actor (catalog, projects, members, content requests, task/content/part
 * reads); the task runner of the `content-worker` actor is content-task.ts. Plain functions over the
 * stores in store.ts; access rules live here so NATS callers meet them too:
 *   - project admin routes (PUT/DELETE project, members): group `projects.admins`;
 *   - GET project: admins or members;
 *   - content requests, tasks, contents, parts: members only (admins included);
 *   - admin routes check the group first (a non-admin learns nothing about which projects exist);
 *     elsewhere an unknown project → 404 before membership is looked at; non-member → 403;
 *   - a project deleted and created again is a new incarnation: tasks and results of the old one
 *     are not found through the new one (and a task still queued for the old one fails).
 */
import { nuid } from "@nats-io/nats-core";
import {
  DerrickError,
  EncodedJson,
  check,
  checkToken,
  conflict,
  isToken,
  forbidden,
  invalidField,
  quoteValue,
  notFound,
  reply,
  tooManyRequests,
  unavailable,
  type SharedPrincipal,
  type Reply,
} from "../../subjects/index.ts";
import {
  CatalogItemBody,
  CatalogKind,
  ContentRequestBody,
  MAX_MEMBERS,
  ProjectBody,
  TASK_PAGE_DEFAULT,
  TASK_PAGE_MAX,
  TaskState,
  type CatalogItem,
  type CatalogListRequest,
  type CatalogPage,
  type CatalogPutRequest,
  type Content,
  type ContentAccepted,
  type ContentPart,
  type ContentRef,
  type ContentRequest,
  type MemberRequest,
  type PartRef,
  type Project,
  type ProjectPutRequest,
  type ProjectRecord,
  type ProjectRef,
  type Task,
  type TaskRecord,
  type TaskListRequest,
  type TaskPage,
  type TaskRef,
} from "../../subjects/projects.ts";
import { caller, type Caller, type RequestContext } from "../runtime/context.ts";
import { nonNegativeInteger, type Catalog } from "./catalog.ts";
import { pageOfIndex, type TaskIndexStore } from "./task-index.ts";
import { checkValues, isMember, knowsEveryItem } from "./compute.ts";
import type { CatalogStore, ContentStore, OfRun, ProjectStore, TaskStore } from "./store.ts";
import { NOT_HELD } from "../runtime/cached-keys.ts";
import { TaskQueueFull, type QueueLimits } from "./queue.ts";
import type { TraceContext } from "../../platform/trace-context.ts";
import { CAS_ATTEMPTS, ids, nowOf, terminal } from "./content-task.ts";
import type { Versioned } from "../runtime/kv.ts";

export const ADMIN_GROUP = "projects.admins";
/** Items per catalog (display items, key parameters), file and additions together: the file's own limit. */
export const MAX_CATALOG_ITEMS = 10_000;
/** Retry-After of a content request refused by a work-queue limit. */
const QUEUE_FULL_RETRY_S = 5;

export type ProjectsDeps = {
  catalog: Catalog;
  /** Resolves once `catalog` holds every addition acknowledged before the call, by any process. */
  catalogFresh(): Promise<void>;
  catalogStore: CatalogStore;
  projects: ProjectStore;
  tasks: TaskStore;
  /** Each project's task ids, newest first, for the task list. */
  taskIndex: TaskIndexStore;
  content: ContentStore;
  /**
   * Publishes the task to its requester's work queue (deduplicated by task id) with the requesting request's trace;
   * TaskQueueFull when a limit refuses it.
   */
  enqueue(partition: string, taskId: string, requester: { clientId: string; subject: string }, trace?: TraceContext): Promise<void>;
  /** The work queue's limits, for the refusals' messages. */
  queueLimits?: QueueLimits;
  /**
   * Finding lost messages (see requeueIfLost); absent: not looked for. `lostAfterMs` is how long a
   * task stays queued or running before a read looks (the ack wait); `queueEmpty` tells whether the
   * work queue holds no message at all; `requeue` publishes the task again under a new message id.
   */
  lost?: { lostAfterMs: number; queueEmpty(): Promise<boolean>; requeue(partition: string, taskId: string): Promise<void> };
  now?: () => Date;
};

const isAdmin = (principal: SharedPrincipal) => principal.groups.includes(ADMIN_GROUP);

function requireAdmin(principal: SharedPrincipal): void {
  if (!isAdmin(principal)) throw forbidden(`managing projects needs the group ${ADMIN_GROUP}`);
}

async function loadProject(deps: ProjectsDeps, partition: string, projectId: string): Promise<Versioned<ProjectRecord>> {
  checkToken(projectId, "/params/projectId");
  const found = await deps.projects.get(partition, projectId);
  if (!found) throw notFound(`project ${projectId} does not exist`);
  return found;
}

/** The project, when the caller is a member (admins too must be members here). */
async function memberProject(
  deps: ProjectsDeps,
  ctx: RequestContext,
  projectId: string,
): Promise<{ project: ProjectRecord; partition: string; principal: SharedPrincipal }> {
  const { principal, partition } = caller(ctx);
  const { value: project } = await loadProject(deps, partition, projectId);
  if (!isMember(project, principal)) throw forbidden(`the caller is not a member of project ${projectId}`);
  return { project, partition, principal };
}

/** The public form of a stored project. */
function projectView({ incarnation: _incarnation, ...project }: ProjectRecord): Project {
  return project;
}

/** Whether a task was accepted for this incarnation of its project. */
const ofIncarnation = (task: TaskRecord, project: ProjectRecord) =>
  task.projectId === project.projectId && task.projectIncarnation === project.incarnation;

// ---- catalog ---------------------------------------------------------------------------------

export async function listCatalog(
  input: CatalogListRequest,
  deps: Pick<ProjectsDeps, "catalog" | "catalogFresh">,
): Promise<EncodedJson<CatalogPage>> {
  await deps.catalogFresh();
  return deps.catalog[input.kind].page(input.query);
}

export async function putCatalogItem(input: CatalogPutRequest, ctx: RequestContext, deps: ProjectsDeps): Promise<Reply<CatalogItem>> {
  const { principal } = caller(ctx);
  if (!isAdmin(principal)) throw forbidden(`extending the catalog needs the group ${ADMIN_GROUP}`);
  const itemId = checkToken(input.itemId, "/params/itemId");
  const body = check(CatalogItemBody, input.body);
  if (body.id !== undefined && body.id !== itemId) throw invalidField("/body/id", "differs from the id in the path");
  const item: CatalogItem = { ...body, id: itemId };
  if (item.unit === undefined) delete item.unit;
  // Created or replaced, and the type rule, are decided on every addition acknowledged so far, by any process.
  await deps.catalogFresh();
  const list = deps.catalog[input.kind];
  const held = list.get(itemId);
  // Projects hold values checked against the item's type, and tasks compute by it: a new type would
  // leave those values unreadable. A new item id is the way to a different type.
  if (held && held.dataType !== item.dataType) {
    throw new DerrickError(
      409,
      `/body/dataType: item ${itemId} has the type ${held.dataType}; the type of an existing item cannot change`,
      {
        errors: [{ pointer: "/body/dataType", message: `cannot change from ${held.dataType}` }],
      },
    );
  }
  // Every projects and content-worker process holds the whole catalog in memory: bounded like the file.
  if (!held && list.size >= MAX_CATALOG_ITEMS) {
    throw new DerrickError(409, `the catalog holds ${MAX_CATALOG_ITEMS} items, its limit; no item can be added`, {
      errors: [{ pointer: "/params/itemId", message: "cannot be added: the catalog is full" }],
    });
  }
  const existed = held !== undefined;
  const revision = await deps.catalogStore.put(input.kind, item);
  deps.catalog[input.kind].apply(item, revision); // this process answers with it at once; others follow the watch
  return reply(item, existed ? 200 : 201);
}

// ---- projects --------------------------------------------------------------------------------

export async function putProject(input: ProjectPutRequest, ctx: RequestContext, deps: ProjectsDeps): Promise<Reply<Project>> {
  const { principal, partition } = caller(ctx);
  requireAdmin(principal);
  const projectId = checkToken(input.projectId, "/params/projectId");
  const body = check(ProjectBody, input.body);
  if (body.projectId !== undefined && body.projectId !== projectId)
    throw invalidField("/body/projectId", "differs from the id in the path");
  // An item added moments ago through another process may not have reached this one's catalog yet.
  if (!knowsEveryItem(body.values, deps.catalog)) await deps.catalogFresh();
  const values = checkValues(body.values, deps.catalog);
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const existing = await deps.projects.get(partition, projectId);
    const now = nowOf(deps).toISOString();
    const project: ProjectRecord = {
      projectId,
      name: body.name,
      members: [...new Set(body.members)],
      // A PUT without values keeps the values held (members and name are managed separately from data).
      values: body.values ? values : (existing?.value.values ?? values),
      createdAt: existing?.value.createdAt ?? now,
      updatedAt: now,
      ...(existing ? (existing.value.incarnation ? { incarnation: existing.value.incarnation } : {}) : { incarnation: nuid.next() }),
    };
    if (await deps.projects.write(partition, project, existing?.revision ?? 0)) return reply(projectView(project), existing ? 200 : 201);
  }
  throw conflict(`project ${projectId} is being changed by someone else; try again`);
}

export async function getProject(input: ProjectRef, ctx: RequestContext, deps: ProjectsDeps): Promise<EncodedJson<Project>> {
  const { principal, partition } = caller(ctx);
  const { value: project } = await loadProject(deps, partition, input.projectId);
  if (!isAdmin(principal) && !isMember(project, principal)) throw forbidden(`the caller is not a member of project ${input.projectId}`);
  return encodedOnce(projectReplies, project, projectView);
}

const projectReplies = new WeakMap<ProjectRecord, EncodedJson<Project>>();

export async function deleteProject(input: ProjectRef, ctx: RequestContext, deps: ProjectsDeps): Promise<Reply<undefined>> {
  const { principal, partition } = caller(ctx);
  requireAdmin(principal);
  await loadProject(deps, partition, input.projectId);
  await deps.projects.delete(partition, input.projectId);
  return reply(undefined, 204);
}

async function changeMembers(
  input: MemberRequest,
  ctx: RequestContext,
  deps: ProjectsDeps,
  change: (members: string[]) => string[],
): Promise<Reply<undefined>> {
  const { principal, partition } = caller(ctx);
  requireAdmin(principal);
  const memberId = checkToken(input.memberId, "/params/memberId");
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const { value, revision } = await loadProject(deps, partition, input.projectId);
    const members = change(value.members.filter((m) => m !== memberId));
    if (members.length === value.members.length && members.every((m, i) => m === value.members[i])) return reply(undefined, 204);
    const project = { ...value, members, updatedAt: nowOf(deps).toISOString() };
    if (await deps.projects.write(partition, project, revision)) return reply(undefined, 204);
  }
  throw conflict(`project ${input.projectId} is being changed by someone else; try again`);
}

export const putMember = (input: MemberRequest, ctx: RequestContext, deps: ProjectsDeps) =>
  changeMembers(input, ctx, deps, (others) => {
    if (others.length >= MAX_MEMBERS)
      throw invalidField("/params/memberId", `cannot be added: a project has at most ${MAX_MEMBERS} members`);
    return [...others, input.memberId];
  });

export const deleteMember = (input: MemberRequest, ctx: RequestContext, deps: ProjectsDeps) =>
  changeMembers(input, ctx, deps, (others) => others);

// ---- content requests and tasks ---------------------------------------------------------------

export const taskLocation = (projectId: string, taskId: string) => `/v2/projects/${projectId}/tasks/${taskId}`;

export async function requestContent(input: ContentRequest, ctx: RequestContext, deps: ProjectsDeps): Promise<Reply<ContentAccepted>> {
  const { project, partition, principal } = await memberProject(deps, ctx, input.projectId);
  // Absent means every item; JSON null is not the object the API defines (400, docs/content.md#content-requests-and-tasks).
  const body = check(ContentRequestBody, input.body === undefined ? {} : input.body);
  const list = deps.catalog[input.kind];
  if (body.ids?.some((id) => !list.has(id))) await deps.catalogFresh();
  body.ids?.forEach((id, i) => {
    if (!list.has(id))
      throw invalidField(
        `/body/ids/${i}`,
        `${quoteValue(id)} is not a known ${input.kind === CatalogKind.displayItems ? "display item" : "key parameter"}`,
      );
  });
  const suffix = nuid.next();
  const task: TaskRecord = {
    taskId: ids.task(suffix),
    projectId: project.projectId,
    kind: input.kind,
    state: TaskState.queued,
    createdAt: nowOf(deps).toISOString(),
    contentId: ids.content(suffix),
    partition,
    ...(body.ids ? { ids: body.ids } : {}),
    requestedBy: { clientId: principal.clientId, subject: principal.subject },
    attempts: 0,
    ...(project.incarnation ? { projectIncarnation: project.incarnation } : {}),
  };
  await deps.tasks.create(task);
  // Listed before it is queued: a task the list misses would be one its requester cannot find again.
  await deps.taskIndex
    .add(partition, project.projectId, project.incarnation, { taskId: task.taskId, createdAt: task.createdAt }, nowOf(deps).getTime())
    .catch(async (error: unknown) => {
      await deps.tasks.remove(partition, task.taskId).catch(() => undefined);
      throw new DerrickError(503, "the task list is not available; try again shortly", { headers: { "Retry-After": "1" }, cause: error });
    });
  try {
    await deps.enqueue(partition, task.taskId, task.requestedBy, ctx.trace);
  } catch (error) {
    if (error instanceof TaskQueueFull) {
      // Refused, so never queued: the task goes too (a refused request leaves nothing behind to read).
      await deps.tasks.remove(partition, task.taskId).catch(() => undefined);
      throw error.limit === "perRequester"
        ? tooManyRequests(
            `you have ${deps.queueLimits?.perRequester ?? "the most"} content tasks queued or running in partition ${partition}, the most one requester may have; request more once some have completed`,
            QUEUE_FULL_RETRY_S,
          )
        : unavailable("the content task queue is full; try again shortly", QUEUE_FULL_RETRY_S);
    }
    // Not queued means never run: say so on the task rather than leave it queued forever.
    await deps.tasks
      .update(
        { ...task, state: TaskState.failed, completedAt: nowOf(deps).toISOString(), error: "the task could not be queued" },
        (await deps.tasks.get(partition, task.taskId))?.revision ?? 0,
      )
      .catch(() => false);
    throw new DerrickError(503, "the task queue is not available; try again shortly", { headers: { "Retry-After": "1" }, cause: error });
  }
  return reply({ taskId: task.taskId, contentId: task.contentId }, 202, { Location: taskLocation(project.projectId, task.taskId) });
}

/** The public view of a stored task. */
export function taskView(task: TaskRecord): Task {
  return {
    taskId: task.taskId,
    projectId: task.projectId,
    kind: task.kind,
    state: task.state,
    createdAt: task.createdAt,
    ...(task.startedAt ? { startedAt: task.startedAt } : {}),
    ...(task.completedAt ? { completedAt: task.completedAt } : {}),
    ...(task.expiresAt ? { expiresAt: task.expiresAt } : {}),
    contentId: task.contentId,
    ...(task.error ? { error: task.error } : {}),
  };
}

export async function getTask(input: TaskRef, ctx: RequestContext, deps: ProjectsDeps): Promise<Task> {
  const { partition, project } = await memberProject(deps, ctx, input.projectId);
  const taskId = checkToken(input.taskId, "/params/taskId");
  const found = await deps.tasks.get(partition, taskId);
  if (!found || !ofIncarnation(found.value, project)) throw notFound(`task ${taskId} does not exist in project ${project.projectId}`);
  await requeueIfLost(deps, found.value);
  return taskView(found.value);
}

/**
 * A page of the project's tasks, newest first, from its task index (docs/content.md#listing-a-projects-tasks). An entry
 * whose task is gone (expired, or refused by the queue after it was listed) is left out, so a page may hold fewer.
 */
export async function listTasks(input: TaskListRequest, ctx: RequestContext, deps: ProjectsDeps): Promise<TaskPage> {
  const { partition, project } = await memberProject(deps, ctx, input.projectId);
  const limit = nonNegativeInteger(input.query.limit, "/query/limit", TASK_PAGE_DEFAULT, TASK_PAGE_MAX, 1);
  const before = input.query.before === undefined ? undefined : checkToken(input.query.before, "/query/before");
  const page = pageOfIndex(await deps.taskIndex.get(partition, project.projectId), project.incarnation, before, limit);
  const found = await Promise.all(page.taskIds.map((taskId) => deps.tasks.get(partition, taskId)));
  const tasks = found.flatMap((f) => (f && ofIncarnation(f.value, project) ? [f.value] : []));
  await Promise.all(tasks.map((task) => requeueIfLost(deps, task)));
  return { items: tasks.map(taskView), ...(page.nextBefore ? { nextBefore: page.nextBefore } : {}) };
}

/**
 * Queues a task again when its work-queue message is gone while the stream stayed (docs/content.md#delivery-guarantees).
 * Only for tasks older than the ack wait (a younger one may not be published yet), re-read after the queue so one just
 * completed is left alone. Never throws: the read answers anyway, and the next read looks again.
 */
async function requeueIfLost(deps: ProjectsDeps, task: TaskRecord): Promise<void> {
  const lost = deps.lost;
  if (!lost || terminal(task) || nowOf(deps).getTime() - Date.parse(task.createdAt) < lost.lostAfterMs) return;
  try {
    if (!(await lost.queueEmpty())) return;
    const again = (await deps.tasks.get(task.partition, task.taskId))?.value;
    if (again && !terminal(again)) await lost.requeue(task.partition, task.taskId);
  } catch {
    // Looked at again on the next read.
  }
}

/**
 * The task behind a content or part id when its result may be read now (succeeded, not expired), else why not. Read on
 * every result read: a run writes the content before it marks the task succeeded, and a rerun after a crash may
 * produce another, so only a succeeded task's is final.
 */
async function readableTask(
  deps: ProjectsDeps,
  partition: string,
  project: ProjectRecord,
  kind: CatalogKind,
  id: string,
  what: string,
): Promise<TaskRecord> {
  const suffix = ids.suffixOf(id);
  const task = suffix ? (await deps.tasks.get(partition, ids.task(suffix)))?.value : undefined;
  if (!task || !ofIncarnation(task, project) || task.kind !== kind) throw notFound(`${what} ${id} does not exist`);
  const about = { taskId: task.taskId, state: task.state };
  if (task.state === TaskState.queued || task.state === TaskState.running) {
    await requeueIfLost(deps, task);
    throw new DerrickError(409, `${what} ${id} is not ready: task ${task.taskId} is ${task.state}`, {
      type: "task-not-complete",
      extensions: about,
      headers: { Location: taskLocation(project.projectId, task.taskId) },
    });
  }
  if (task.state === TaskState.failed)
    throw new DerrickError(404, `${what} ${id} was not produced: task ${task.taskId} failed: ${task.error ?? "unknown error"}`, {
      extensions: { ...about, error: task.error },
    });
  if (!unexpired(task, deps)) {
    throw new DerrickError(
      404,
      `${what} ${id} expired at ${task.expiresAt ?? "completion + 60 s"}; results are kept 60 s after the task completes`,
      { type: "content-expired", extensions: { ...about, expiresAt: task.expiresAt } },
    );
  }
  return task;
}

const unexpired = (task: TaskRecord, deps: ProjectsDeps) =>
  task.expiresAt !== undefined && Date.parse(task.expiresAt) > nowOf(deps).getTime();

/**
 * readableTask()'s task when memory vouches for the project and the task without a wait and the result may be read now;
 * undefined for anything else, which the read through the buckets answers or refuses (one place for every refusal).
 */
function readableTaskNow(
  deps: ProjectsDeps,
  { partition, principal }: Caller,
  projectId: string,
  kind: CatalogKind,
  id: string,
): TaskRecord | undefined {
  if (!isToken(projectId) || !isToken(id)) return undefined;
  const project = deps.projects.peek(partition, projectId);
  if (project === NOT_HELD || !project || !isMember(project.value, principal)) return undefined;
  const suffix = ids.suffixOf(id);
  const task = suffix ? deps.tasks.peek(partition, ids.task(suffix)) : undefined;
  if (task === NOT_HELD || !task) return undefined;
  const readable = ofIncarnation(task.value, project.value) && task.value.kind === kind && task.value.state === TaskState.succeeded;
  return readable && unexpired(task.value, deps) ? task.value : undefined;
}

/** Whether a stored result was written by the run that completed the task (the task's newest run). */
const ofSucceededRun = (stored: { run?: number }, task: TaskRecord) => stored.run === undefined || stored.run === task.attempts;

const isContentOf = (stored: OfRun<Content> | undefined, task: TaskRecord, kind: CatalogKind): stored is OfRun<Content> =>
  stored !== undefined && stored.taskId === task.taskId && stored.kind === kind && ofSucceededRun(stored, task);

export async function getContent(input: ContentRef, ctx: RequestContext, deps: ProjectsDeps): Promise<EncodedJson<Content>> {
  // The hot read, a result read again while it lives, waits on nothing when memory holds all three keys (no awaits).
  const who = caller(ctx);
  const taskNow = readableTaskNow(deps, who, input.projectId, input.kind, input.contentId);
  const storedNow = taskNow && deps.content.peek(who.partition, input.contentId);
  if (taskNow && storedNow !== NOT_HELD && isContentOf(storedNow, taskNow, input.kind)) return contentReply(storedNow);
  const { partition, project } = await memberProject(deps, ctx, input.projectId);
  const contentId = checkToken(input.contentId, "/params/contentId");
  const [task, stored] = await Promise.all([
    readableTask(deps, partition, project, input.kind, contentId, "content"),
    deps.content.get(partition, contentId),
  ]);
  if (isContentOf(stored, task, input.kind)) return contentReply(stored);
  throw notFound(`content ${contentId} does not exist`);
}

const contentReplies = new WeakMap<OfRun<Content>, EncodedJson<Content>>();
const contentReply = (stored: OfRun<Content>) => encodedOnce(contentReplies, stored, ({ run: _run, ...content }) => content);
const encoder = new TextEncoder();

/**
 * A held record's reply, encoded once: memory hands every read of one value the same frozen record. Keyed weakly, so
 * a record no memory holds any more takes its reply with it; one never frozen (a test's own store) is not kept.
 */
function encodedOnce<R extends object, V>(replies: WeakMap<R, EncodedJson<V>>, record: R, view: (record: R) => V): EncodedJson<V> {
  let encoded = replies.get(record);
  if (!encoded) {
    encoded = new EncodedJson<V>(encoder.encode(JSON.stringify(view(record))));
    if (Object.isFrozen(record)) replies.set(record, encoded);
  }
  return encoded;
}

export async function getContentPart(input: PartRef, ctx: RequestContext, deps: ProjectsDeps): Promise<ContentPart> {
  const { partition, project } = await memberProject(deps, ctx, input.projectId);
  const partId = checkToken(input.contentPartId, "/params/contentPartId");
  const [task, stored] = await Promise.all([
    readableTask(deps, partition, project, input.kind, partId, "content part"),
    deps.content.part(partition, partId),
  ]);
  // An absent part of a readable task is not one of its content's parts; nor is one an overtaken run
  // left (it cut a different result into more parts).
  if (stored && stored.contentId === task.contentId && stored.kind === input.kind && ofSucceededRun(stored, task)) {
    const { run: _run, ...part } = stored;
    return part;
  }
  throw notFound(`content part ${partId} does not exist`);
}
