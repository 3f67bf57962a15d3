/**
 * The per-project list of content tasks, so listing a project's tasks reads one KV value and at most one page of tasks
 * instead of scanning the partition's tasks. KV derrick_task_index `<partition>.<projectId>` → TaskIndex (newest first,
 * at most MAX_INDEXED_TASKS, entries dropped TASK_RETENTION_MS after their task's creation like the tasks themselves).
 */
import type { KV } from "@nats-io/kv";
import { casPut, readVersioned } from "../runtime/kv.ts";
import { unguarded, type Guard } from "../runtime/recreate.ts";
import { invalidField, quoteValue } from "../../subjects/index.ts";

/** How long a task is kept (the tasks bucket's max age); also the index bucket's and each entry's. */
export const TASK_RETENTION_MS = 7 * 86_400_000;
/** Entries one project's index holds: older tasks fall off the list (still readable by id until they expire). */
export const MAX_INDEXED_TASKS = 1_000;
/** Compare-and-set attempts of one addition under concurrent requests of the same project. */
const INDEX_ATTEMPTS = 10;

export type IndexedTask = { taskId: string; createdAt: string };
/** The tasks of one incarnation of a project, newest first; a new incarnation starts an empty list. */
export type TaskIndex = { incarnation?: string; tasks: IndexedTask[] };

export const taskIndexKey = (partition: string, projectId: string) => `${partition}.${projectId}`;

const ofIncarnation = (index: TaskIndex | undefined, incarnation: string | undefined) =>
  index && index.incarnation === incarnation ? index.tasks : [];

/** The index with `task` added: newest first by creation, without expired entries, at most `max`. */
export function withTask(
  index: TaskIndex | undefined,
  incarnation: string | undefined,
  task: IndexedTask,
  now: number,
  { retentionMs = TASK_RETENTION_MS, max = MAX_INDEXED_TASKS } = {},
): TaskIndex {
  const kept = ofIncarnation(index, incarnation).filter((t) => t.taskId !== task.taskId && now - Date.parse(t.createdAt) < retentionMs);
  // Requests of one project racing through different processes may commit out of creation order.
  const tasks = [task, ...kept].sort((a, b) => b.createdAt.localeCompare(a.createdAt)).slice(0, max);
  return { ...(incarnation ? { incarnation } : {}), tasks };
}

/**
 * The task ids of one page, newest first: the `limit` after `before` (from the newest when absent), and the `before` of
 * the next page when older ones remain. A `before` not in the list (expired, fallen off, another project's) is a 400.
 */
export function pageOfIndex(
  index: TaskIndex | undefined,
  incarnation: string | undefined,
  before: string | undefined,
  limit: number,
): { taskIds: string[]; nextBefore?: string } {
  const tasks = ofIncarnation(index, incarnation);
  let start = 0;
  if (before !== undefined) {
    start = tasks.findIndex((t) => t.taskId === before) + 1;
    if (start === 0)
      throw invalidField(
        "/query/before",
        `${quoteValue(before)} is not in this project's task list (expired or older than its newest ${MAX_INDEXED_TASKS}); accepted: the nextBefore of a page, or nothing for the newest`,
      );
  }
  const page = tasks.slice(start, start + limit);
  const nextBefore = start + limit < tasks.length ? page.at(-1)?.taskId : undefined;
  return { taskIds: page.map((t) => t.taskId), ...(nextBefore ? { nextBefore } : {}) };
}

export type TaskIndexStore = {
  get(partition: string, projectId: string): Promise<TaskIndex | undefined>;
  add(partition: string, projectId: string, incarnation: string | undefined, task: IndexedTask, now: number): Promise<void>;
};

export function taskIndexStore(kv: KV, guard: Guard = unguarded): TaskIndexStore {
  return {
    get: async (partition, projectId) => (await guard(() => readVersioned<TaskIndex>(kv, taskIndexKey(partition, projectId))))?.value,
    add: (partition, projectId, incarnation, task, now) =>
      guard(async () => {
        const key = taskIndexKey(partition, projectId);
        for (let attempt = 0; attempt < INDEX_ATTEMPTS; attempt++) {
          const held = await readVersioned<TaskIndex>(kv, key);
          if (await casPut(kv, key, withTask(held?.value, incarnation, task, now), held?.revision ?? 0, held !== undefined)) return;
        }
        throw new Error(`the task index ${key} kept changing; task ${task.taskId} is not listed`);
      }),
  };
}
