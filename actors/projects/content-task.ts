/**
 * The content task of the `content-worker` actor: one run of a task, queued → running → succeeded (content and parts
 * stored, then the task) or failed, counted and ended by compare-and-set on the task record, so a crash, a redelivery
 * or an overtaken run never completes a task twice. worker.ts wires it to the queue; handlers.ts shares its ids and states.
 */
import {
  CONTENT_TTL_MS,
  PART_MAX_BYTES,
  TaskState,
  type Content,
  type ContentPart,
  type TaskMessage,
  type TaskRecord,
} from "../../subjects/projects.ts";
import type { Versioned } from "../runtime/kv.ts";
import type { Catalog } from "./catalog.ts";
import { computeContent, isMember, splitUtf8, utf8Length } from "./compute.ts";
import type { ContentStore, ProjectStore, TaskStore } from "./store.ts";

/** How often a write that lost a compare-and-set race is tried again. */
export const CAS_ATTEMPTS = 5;

export const nowOf = (deps: { now?: () => Date }) => (deps.now ? deps.now() : new Date());

/** Task, content and part ids share one random suffix, so a content or part id leads to its task. */
export const ids = {
  task: (suffix: string) => `tsk_${suffix}`,
  content: (suffix: string) => `cnt_${suffix}`,
  part: (suffix: string, index: number) => `prt_${suffix}_${index}`,
  suffixOf(id: string): string | undefined {
    return /^(?:tsk|cnt)_([A-Za-z0-9]+)$/.exec(id)?.[1] ?? /^prt_([A-Za-z0-9]+)_\d+$/.exec(id)?.[1];
  },
};

export type WorkerDeps = {
  catalog: Catalog;
  /** Resolves once `catalog` holds every addition acknowledged before the call, by any process. */
  catalogFresh(): Promise<void>;
  projects: ProjectStore;
  tasks: TaskStore;
  content: ContentStore;
  /** Extra hold before completing (drills); the runner keeps the message alive meanwhile. */
  delayMs: number;
  now?: () => Date;
};

export type Delivery = {
  /** 1 on the first delivery. */
  attempt: number;
  /** Whether no further delivery will come after this one. */
  last: boolean;
  /** Tells JetStream the task is still being worked on (resets the ack wait). */
  working(): void;
  /** Waits, telling JetStream the task is alive meanwhile. */
  hold(ms: number): Promise<void>;
};

/**
 * What the wiring does with the message once the runner returns: `completed`, `failed` and `skipped` (already terminal,
 * or gone) are acked; `superseded` is left alone, since JetStream settles by stream sequence and the newer run's
 * delivery is the same message (docs/content.md#delivery-guarantees).
 */
export type Outcome = "completed" | "failed" | "skipped" | "superseded";

/** Compare-and-set a task transition, re-reading on a lost race; undefined when the task is already terminal. */
async function transition(
  deps: WorkerDeps,
  partition: string,
  taskId: string,
  next: (task: TaskRecord) => TaskRecord | undefined,
): Promise<Versioned<TaskRecord> | undefined> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const current = await deps.tasks.get(partition, taskId);
    if (!current) return undefined;
    const updated = next(current.value);
    if (!updated) return undefined;
    if (await deps.tasks.update(updated, current.revision)) return { value: updated, revision: current.revision + 1 };
  }
  throw new Error(`task ${taskId} kept changing under the worker`);
}

/**
 * Runs of a task that may end without a word (a crashed or overtaken worker) before the next delivery fails it. Runs
 * ending in an infrastructure error are not counted: GIVE_UP_AFTER_DELIVERIES bounds those, so an outage spares this.
 */
export const MAX_RUNS = 5;

/** Runs started that never ended with a word: crashed or overtaken (see MAX_RUNS). */
export const unfinishedRuns = (task: TaskRecord) => task.attempts - (task.erroredRuns ?? 0);

export const terminal = (task: TaskRecord) => task.state === TaskState.succeeded || task.state === TaskState.failed;

/** Marks a task failed for good (no retry changes the outcome). */
export async function failTask(deps: WorkerDeps, message: TaskMessage, error: string): Promise<Outcome> {
  await transition(deps, message.partition, message.taskId, (task) =>
    terminal(task) ? undefined : { ...task, state: TaskState.failed, completedAt: nowOf(deps).toISOString(), error },
  );
  return "failed";
}

/**
 * Ends a run by compare-and-set, only while it is still the task's newest run (`attempts` as it
 * started it): an overtaken run neither completes nor fails the task, the newer run decides.
 */
async function finishRun(
  deps: WorkerDeps,
  message: TaskMessage,
  run: number,
  finished: (task: TaskRecord) => TaskRecord,
  outcome: Outcome,
): Promise<Outcome> {
  let overtaken = false;
  const done = await transition(deps, message.partition, message.taskId, (task) => {
    overtaken = !terminal(task) && task.attempts !== run;
    return terminal(task) || overtaken ? undefined : finished(task);
  });
  if (done) return outcome;
  return overtaken ? "superseded" : "skipped";
}

const failRun = (deps: WorkerDeps, message: TaskMessage, run: number, error: string) =>
  finishRun(deps, message, run, (task) => ({ ...task, state: TaskState.failed, completedAt: nowOf(deps).toISOString(), error }), "failed");

/**
 * Runs one task, safe to run again after a crash at any point (content keyed by the task, compare-and-set state, terminal
 * tasks untouched). An overtaken run changes nothing (`superseded`); infrastructure errors are recorded (not counted
 * against MAX_RUNS) and thrown for the wiring to retry.
 */
export async function runContentTask(message: TaskMessage, deps: WorkerDeps, delivery: Delivery): Promise<Outcome> {
  const { partition, taskId } = message;
  // Counted when they start, so runs that crashed the worker count too: a task that keeps killing workers fails here
  // instead of being redelivered forever. A run ending in an infrastructure error is taken off the count (below).
  const started = await transition(deps, partition, taskId, (task) => {
    if (terminal(task)) return undefined;
    const unfinished = unfinishedRuns(task);
    if (unfinished >= MAX_RUNS)
      return {
        ...task,
        state: TaskState.failed,
        completedAt: nowOf(deps).toISOString(),
        error: `the task could not be completed: ${unfinished} runs ended without finishing (their workers crashed or stalled)`,
      };
    return { ...task, state: TaskState.running, startedAt: task.startedAt ?? nowOf(deps).toISOString(), attempts: task.attempts + 1 };
  });
  if (!started) return "skipped";
  if (started.value.state === TaskState.failed) return "failed";
  const run = started.value.attempts;
  try {
    return await runStarted(message, deps, delivery, started.value);
  } catch (error) {
    // This run ends with a word: recorded while it is still the newest run, so it does not count
    // against MAX_RUNS. When even that cannot be written (the tasks bucket away too), it counts as a
    // run that never finished: the bound stays conservative.
    await transition(deps, partition, taskId, (task) =>
      terminal(task) || task.attempts !== run ? undefined : { ...task, erroredRuns: (task.erroredRuns ?? 0) + 1 },
    ).catch(() => undefined);
    throw error;
  }
}

/** The rest of a run, once the start step counted it. */
async function runStarted(message: TaskMessage, deps: WorkerDeps, delivery: Delivery, task: TaskRecord): Promise<Outcome> {
  const { partition, taskId } = message;
  if (deps.delayMs > 0) await delivery.hold(deps.delayMs);

  const project = (await deps.projects.get(partition, task.projectId))?.value;
  if (!project || project.incarnation !== task.projectIncarnation)
    return failRun(deps, message, task.attempts, `project ${task.projectId} was deleted after the request was accepted`);
  if (!isMember(project, task.requestedBy))
    return failRun(deps, message, task.attempts, `${task.requestedBy.clientId} is no longer a member of project ${task.projectId}`);
  // The request was checked against another process's catalog, which may be ahead of this one.
  if (task.ids?.some((id) => !deps.catalog[task.kind].has(id))) await deps.catalogFresh();
  let items;
  try {
    items = computeContent(project, deps.catalog[task.kind], task.kind, task.ids);
  } catch (error) {
    return failRun(deps, message, task.attempts, (error as Error).message);
  }
  delivery.working();

  const completedAt = nowOf(deps);
  const expiresAt = new Date(completedAt.getTime() + CONTENT_TTL_MS).toISOString();
  const text = JSON.stringify(items);
  const size = utf8Length(text);
  const suffix = ids.suffixOf(task.contentId)!;
  const slices = size > PART_MAX_BYTES ? splitUtf8(text, PART_MAX_BYTES) : [];
  const parts: ContentPart[] = slices.map((data, index) => ({
    contentPartId: ids.part(suffix, index),
    contentId: task.contentId,
    projectId: task.projectId,
    kind: task.kind,
    index,
    count: slices.length,
    data,
  }));
  const content: Content = {
    contentId: task.contentId,
    taskId,
    projectId: task.projectId,
    kind: task.kind,
    createdAt: completedAt.toISOString(),
    expiresAt,
    itemCount: items.length,
    setCount: items.filter((item) => item.status === "set").length,
    size,
    ...(parts.length ? { parts: parts.map((p) => p.contentPartId) } : { items }),
  };
  // Only the newest run of a task still going writes, so a finished task's result is not replaced. The re-read is
  // the cheap check; the writes are compare-and-sets over older runs' results, for a run that stalls after it.
  const current = (await deps.tasks.get(partition, taskId))?.value;
  if (!current || terminal(current)) return "skipped";
  if (current.attempts !== task.attempts) return "superseded";
  if (!(await deps.content.write(partition, content, parts, task.attempts))) return "superseded";
  return finishRun(
    deps,
    message,
    task.attempts,
    (current) => ({ ...current, state: TaskState.succeeded, completedAt: completedAt.toISOString(), expiresAt }),
    "completed",
  );
}
