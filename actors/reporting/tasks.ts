/**
 * Aggregation tasks: an aggregation whose estimated work is large (work.ts) is answered 202 with a task, computed in the
 * background by the process that accepted it (one at a time), and its result kept 60 s after completion in chunks of a
 * KV bucket whose max age drops them. A task whose process went away is run again by the first read that finds it
 * untouched for TASK_STALE_MS (docs/reporting.md#large-aggregations-answer-202-with-a-task).
 */
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import { DerrickError, EncodedJson, notFound, toDerrickError, unavailable } from "../../subjects/index.ts";
import type { AggregationTask, AggregationTaskState, TaskAggregation } from "../../subjects/reporting.ts";
import type { Logger } from "../../platform/logger.ts";
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import { encodeJson, isLive } from "../runtime/kv.ts";
import { putAt } from "./dependents.ts";

export const TASK_BUCKETS = { tasks: "derrick_assessment_tasks", results: "derrick_assessment_results" } as const;
/** A result is kept this long after its task completed (the results bucket's max age). */
export const RESULT_TTL_MS = 60_000;
/** Tasks are kept a day (the tasks bucket's max age). */
export const TASK_TTL_MS = 24 * 60 * 60 * 1000;
/** A task not finished and unchanged this long lost its process: a read runs it again. */
export const TASK_STALE_MS = 120_000;
/** Tasks one process holds waiting for its runner; one more is refused with 503 (the stale bound assumes a short queue). */
export const MAX_WAITING_TASKS = 8;
/** Bytes of one result chunk at most (less when the server's max_payload is smaller). */
const CHUNK_BYTES = 4 * 1024 * 1024;

/** What a task stores: its view, and what running it again needs. */
export type TaskRecord = Omit<AggregationTask, "result"> & {
  partition: string;
  /** The aggregation's request as the endpoint received it (its path id, or the full cycle body). */
  request: unknown;
  updatedAt: string;
  runs: number;
  chunks?: number;
};

export const taskLocation = (taskId: string) => `/assessments/v1/aggregationtasks/${taskId}`;
const taskKey = (partition: string, taskId: string) => `${partition}.${taskId}`;
const chunkKey = (partition: string, taskId: string, i: number) => `${partition}.${taskId}.${i}`;
const terminal = (state: AggregationTaskState) => state === "succeeded" || state === "failed";

export function taskView(task: TaskRecord): AggregationTask {
  const { partition: _p, request: _r, updatedAt: _u, runs: _n, chunks: _c, ...view } = task;
  return { ...view, result: `${taskLocation(task.taskId)}/result` };
}

/** Computes a task's aggregation: its JSON bytes as a 200 would answer them. Throws a DerrickError when it cannot be computed. */
export type RunTask = (task: TaskRecord) => Promise<Uint8Array>;

export type TaskOptions = {
  now?: () => Date;
  /** One KV put's largest value (the server's max_payload less header room). */
  maxValueBytes?: () => number | undefined;
};

export class AggregationTasks {
  private runner: Promise<void> = Promise.resolve();
  private waiting = 0;
  private stopped = false;
  /** Tasks waiting or running here by what they compute: the same aggregation asked again joins its task. */
  private readonly pending = new Map<string, { partition: string; taskId: string }>();
  private readonly now: () => Date;

  constructor(
    private readonly tasks: KV,
    private readonly results: KV,
    private readonly run: RunTask,
    private readonly log: Logger,
    private readonly options: TaskOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
  }

  /**
   * Stores a queued task and queues it here; 503 when this process already holds MAX_WAITING_TASKS. `same`: what the
   * task computes (its result key and echoed fields); while a task of the same is waiting or running here, that task is answered.
   */
  async accept(
    partition: string,
    aggregation: TaskAggregation,
    id: string,
    request: unknown,
    work: number,
    same?: string,
  ): Promise<AggregationTask> {
    const joined = same === undefined ? undefined : this.pending.get(same);
    if (joined) {
      const found = await this.read(joined.partition, joined.taskId);
      if (found && !terminal(found.task.state)) return taskView(found.task);
    }
    if (this.waiting >= MAX_WAITING_TASKS)
      throw unavailable(`${this.waiting} large aggregations are waiting in this reporting process; retry shortly`, 5);
    const at = this.now().toISOString();
    const task: TaskRecord = {
      taskId: `atk_${nuid.next()}`,
      aggregation,
      id,
      state: "queued",
      work,
      createdAt: at,
      updatedAt: at,
      partition,
      request,
      runs: 0,
    };
    await this.tasks.create(taskKey(partition, task.taskId), encodeJson(task));
    this.queue(partition, task.taskId, same);
    return taskView(task);
  }

  /** The task; one found unfinished and untouched for TASK_STALE_MS is claimed and queued here. */
  async get(partition: string, taskId: string): Promise<TaskRecord> {
    const found = await this.read(partition, taskId);
    if (!found) throw notFound(`aggregation task ${taskId} does not exist`);
    const { task, revision } = found;
    if (!terminal(task.state) && this.now().getTime() - Date.parse(task.updatedAt) >= TASK_STALE_MS && this.waiting < MAX_WAITING_TASKS) {
      const claimed: TaskRecord = { ...task, state: "queued", updatedAt: this.now().toISOString() };
      // Another reader may claim it first: only the one whose write lands runs it.
      if (await putAt(this.tasks, taskKey(partition, taskId), claimed, revision)) {
        this.log.warn({ taskId, runs: task.runs }, "aggregation task left unfinished by its process: running it again");
        this.queue(partition, taskId);
        return claimed;
      }
      return (await this.read(partition, taskId))?.task ?? task;
    }
    return task;
  }

  /** The result's JSON bytes: 409 while the task runs, 404 when it failed, expired or never was. */
  async result(partition: string, taskId: string): Promise<EncodedJson<Record<string, unknown>>> {
    const task = await this.get(partition, taskId);
    const about = { taskId, state: task.state };
    if (!terminal(task.state))
      throw new DerrickError(409, `the result of task ${taskId} is not ready: the task is ${task.state}`, {
        type: "task-not-complete",
        extensions: about,
        headers: { Location: taskLocation(taskId) },
      });
    if (task.state === "failed")
      throw new DerrickError(404, `task ${taskId} failed: ${task.error ?? "unknown error"}`, {
        extensions: { ...about, error: task.error },
      });
    const expired = () =>
      new DerrickError(404, `the result of task ${taskId} expired at ${task.expiresAt}; results are kept 60 s after the task completes`, {
        type: "result-expired",
        extensions: { ...about, expiresAt: task.expiresAt },
      });
    if (!task.expiresAt || Date.parse(task.expiresAt) <= this.now().getTime()) throw expired();
    const chunks = await Promise.all(Array.from({ length: task.chunks ?? 0 }, (_, i) => this.results.get(chunkKey(partition, taskId, i))));
    if (!chunks.every(isLive)) throw expired();
    const bytes = new Uint8Array(chunks.reduce((sum, c) => sum + c.value.length, 0));
    let offset = 0;
    for (const c of chunks) {
      bytes.set(c.value, offset);
      offset += c.value.length;
    }
    return new EncodedJson(bytes);
  }

  /** Resolves when every task queued so far has run (tests). */
  idle(): Promise<void> {
    return this.runner;
  }

  /** Finishes the task running now and leaves the queued ones to be run again once stale (by any process's read). */
  stop(): Promise<void> {
    this.stopped = true;
    return this.runner;
  }

  private queue(partition: string, taskId: string, same?: string): void {
    this.waiting++;
    if (same !== undefined) this.pending.set(same, { partition, taskId });
    this.runner = this.runner.then(async () => {
      this.waiting--;
      try {
        if (!this.stopped) await this.runOne(partition, taskId);
      } catch (error) {
        this.log.error({ err: error, taskId }, "aggregation task could not be run; a read runs it again once stale");
      } finally {
        if (same !== undefined && this.pending.get(same)?.taskId === taskId) this.pending.delete(same);
      }
    });
  }

  private async runOne(partition: string, taskId: string): Promise<void> {
    const found = await this.read(partition, taskId);
    if (!found || terminal(found.task.state)) return;
    const started: TaskRecord = {
      ...found.task,
      state: "running",
      startedAt: this.now().toISOString(),
      updatedAt: this.now().toISOString(),
      runs: found.task.runs + 1,
    };
    if (!(await putAt(this.tasks, taskKey(partition, taskId), started, found.revision))) return;
    let done: TaskRecord;
    try {
      const bytes = await this.run(started);
      const chunks = await this.store(partition, taskId, bytes);
      const completed = this.now();
      done = {
        ...started,
        state: "succeeded",
        completedAt: completed.toISOString(),
        expiresAt: new Date(completed.getTime() + RESULT_TTL_MS).toISOString(),
        updatedAt: completed.toISOString(),
        chunks,
      };
    } catch (error) {
      const problem = toDerrickError(error);
      if (problem.status >= 500) this.log.error({ err: error, taskId }, "aggregation task failed");
      done = {
        ...started,
        state: "failed",
        error: problem.detail,
        completedAt: this.now().toISOString(),
        updatedAt: this.now().toISOString(),
      };
    }
    // Written whatever happened meanwhile: a run that finished is final (a rerun computes the same result).
    await this.tasks.put(taskKey(partition, taskId), encodeJson(done));
  }

  private async store(partition: string, taskId: string, bytes: Uint8Array): Promise<number> {
    const size = Math.max(1, Math.min(CHUNK_BYTES, this.options.maxValueBytes?.() ?? CHUNK_BYTES));
    const count = Math.max(1, Math.ceil(bytes.length / size));
    // All at once: one round trip's wait for the lot, not one per chunk (a 47 MB tree is 12 chunks).
    await Promise.all(
      Array.from({ length: count }, (_, i) => this.results.put(chunkKey(partition, taskId, i), bytes.subarray(i * size, (i + 1) * size))),
    );
    return count;
  }

  private async read(partition: string, taskId: string): Promise<{ task: TaskRecord; revision: number } | undefined> {
    const entry = await this.tasks.get(taskKey(partition, taskId));
    return isLive(entry) ? { task: entry.json<TaskRecord>(), revision: entry.revision } : undefined;
  }
}

/** The two buckets of the tasks: records kept a day, results 60 s. */
export async function openTaskBuckets(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): Promise<{ tasks: KV; results: KV }> {
  const kvm = new Kvm(nc);
  const [tasks, results] = await Promise.all([
    kvm.create(TASK_BUCKETS.tasks, bucketOptions(policy, { history: 1, ttl: TASK_TTL_MS })),
    kvm.create(TASK_BUCKETS.results, bucketOptions(policy, { history: 1, ttl: RESULT_TTL_MS })),
  ]);
  return { tasks, results };
}
