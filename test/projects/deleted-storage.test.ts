/**
 * Buckets and the work-queue stream deleted while the processes run (an operator, a tool, a lost
 * store): each is made again, with the configuration it started with, on its next use, and tasks
 * accepted before a deleted work queue (or whose messages were purged from it) are queued again
 * instead of staying `queued` for good.
 */
import { describe, expect } from "vitest";
import type { JetStreamManager } from "@nats-io/jetstream";
import { eventually, type TestDerrick } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { BUCKETS, TASK_STREAM, WORKER_CONSUMER, openStores, taskStore } from "../../actors/projects/store.ts";
import { CONTENT_TTL_MS } from "../../subjects/projects.ts";
import { putProject } from "./fixtures.ts";
import { contentTest, queuedTask, requestContent, taskIn, taskOf } from "./helpers.ts";

const ACK_WAIT_MS = 1500;

const running = contentTest({ actors: ["identity", "projects"], env: { DERRICK_CONTENT_ACK_WAIT: `${ACK_WAIT_MS}ms` } });
const advisoryMissed = natsTest();

const request = async (derrick: TestDerrick) => requestContent(derrick, "p-deleted", "key-parameters", { ids: ["total-depth-md"] });
const task = (derrick: TestDerrick, taskId: string) => taskOf(derrick, "p-deleted", taskId);
const settled = (derrick: TestDerrick, taskId: string) => taskIn(derrick, "p-deleted", taskId, { timeoutMs: 20_000 });
/** How many messages the work queue holds. */
const queueLength = async (jsm: JetStreamManager) => (await jsm.streams.info(TASK_STREAM)).state.messages;
/** Every one of the tasks succeeds, and the work queue drains. */
async function allSucceed(derrick: TestDerrick, jsm: JetStreamManager, ...taskIds: string[]) {
  for (const taskId of taskIds) expect(await settled(derrick, taskId)).toMatchObject({ state: "succeeded" });
  await eventually(async () => (await queueLength(jsm)) === 0, { what: "the queue to drain" });
}

describe("content storage deleted at runtime", () => {
  const it = running;
  it.beforeAll(async ({ derrick }) => {
    expect((await putProject(derrick, "p-deleted")).status).toBe(201);
  });

  it("storage - a task requested after the content bucket was deleted succeeds: the bucket is made again as it started", {
    timeout: 30_000,
  }, async ({ derrick, jsm, worker }) => {
    await worker.start();
    expect(await settled(derrick, (await request(derrick)).taskId)).toMatchObject({ state: "succeeded" });
    expect(await jsm.streams.delete(`KV_${BUCKETS.content}`)).toBe(true);
    const accepted = await request(derrick);
    expect(await settled(derrick, accepted.taskId)).toMatchObject({ state: "succeeded" });
    const read = await derrick.call(`/v1/projects/p-deleted/key-parameters/content/${accepted.contentId}`);
    expect(read.status, await read.clone().text()).toBe(200);
    const made = await jsm.streams.info(`KV_${BUCKETS.content}`);
    expect(made.config).toMatchObject({ max_age: CONTENT_TTL_MS * 1_000_000, max_msgs_per_subject: 1 });
  });

  it("storage - a content request after the tasks bucket was deleted is accepted at once and completes", { timeout: 30_000 }, async ({
    derrick,
    jsm,
    worker,
  }) => {
    await worker.start();
    const before = await request(derrick);
    expect(await settled(derrick, before.taskId)).toMatchObject({ state: "succeeded" });
    expect(await jsm.streams.delete(`KV_${BUCKETS.tasks}`)).toBe(true);
    // Within the edge's request timeout (it answered 504 to every request while the bucket was gone).
    const accepted = await request(derrick);
    expect(await settled(derrick, accepted.taskId)).toMatchObject({ state: "succeeded" });
    expect((await jsm.streams.info(`KV_${BUCKETS.tasks}`)).config).toMatchObject({
      max_msgs_per_subject: 8,
      max_age: 7 * 86_400_000 * 1_000_000,
    });
    // The tasks stored in the deleted bucket are gone with it: at once when the deletion advisory was heard, else once
    // the memory of task reads looks at the bucket again (within a second: docs/operations.md#memory-views).
    await eventually(async () => (await derrick.call(`/v2/projects/p-deleted/tasks/${before.taskId}`)).status === 404, {
      timeoutMs: 5_000,
      what: "the deleted task to read as absent",
    });
  });

  it("storage - a project written after the projects bucket was deleted is stored in a bucket made again", {
    timeout: 30_000,
  }, async ({ derrick, jsm }) => {
    expect(await jsm.streams.delete(`KV_${BUCKETS.projects}`)).toBe(true);
    // Made again on the server's deletion advisory (a read sent before that waits out the request
    // timeout: no stream answers it), with the options it started with.
    const made = await eventually(() => jsm.streams.info(`KV_${BUCKETS.projects}`).catch(() => undefined), {
      what: "the projects bucket to be made again",
    });
    expect(made.config).toMatchObject({ max_msgs_per_subject: 1, allow_direct: true });
    expect((await putProject(derrick, "p-deleted")).status).toBe(201);
    expect((await derrick.call("/v1/projects/p-deleted")).status).toBe(200);
  });

  it("storage - tasks accepted before the work-queue stream was deleted are queued again when a worker makes it again, and complete", {
    timeout: 30_000,
  }, async ({ derrick, jsm, worker }) => {
    await worker.stop();
    const queued = await request(derrick);
    expect((await task(derrick, queued.taskId)).state).toBe("queued");
    expect(await jsm.streams.delete(TASK_STREAM)).toBe(true);
    // The worker's start finds no stream, makes it (and its consumer) and queues the unfinished tasks.
    await worker.start();
    expect(await settled(derrick, queued.taskId)).toMatchObject({ state: "succeeded" });
    expect((await derrick.call(`/v1/projects/p-deleted/key-parameters/content/${queued.contentId}`)).status).toBe(200);
    expect((await jsm.consumers.info(TASK_STREAM, WORKER_CONSUMER)).config.ack_wait).toBe(ACK_WAIT_MS * 1_000_000);
  });

  it("storage - a request after the work-queue stream was deleted makes it again, and the tasks accepted before are queued again", {
    timeout: 30_000,
  }, async ({ derrick, jsm, worker }) => {
    await worker.stop();
    const queued = await request(derrick);
    expect(await jsm.streams.delete(TASK_STREAM)).toBe(true);
    // The projects actor's publish finds no stream: it makes it again, then publishes (202, not 503).
    const after = await request(derrick);
    await eventually(async () => (await queueLength(jsm)) === 2, { what: "both tasks in the new work queue" });
    await worker.start();
    await allSucceed(derrick, jsm, queued.taskId, after.taskId);
  });

  it("storage - a task whose message was purged from a work queue that stayed is queued again by a read once it is older than the ack wait", {
    timeout: 30_000,
  }, async ({ derrick, jsm, worker }) => {
    await worker.stop();
    const queued = await request(derrick);
    expect((await jsm.streams.purge(TASK_STREAM)).purged).toBe(1);
    // Reads (the task, or its content answering 409) look once the task is older than the ack wait:
    // the queue holds no message at all, so the task has lost its own, and it is published again.
    await eventually(
      async () => {
        const res = await derrick.call(`/v1/projects/p-deleted/key-parameters/content/${queued.contentId}`);
        expect(res.status).toBe(409);
        return (await queueLength(jsm)) === 1;
      },
      { timeoutMs: 10_000, intervalMs: 250, what: "a read to queue the task again" },
    );
    // Further reads add nothing while its message waits.
    await task(derrick, queued.taskId);
    expect(await queueLength(jsm)).toBe(1);
    await worker.start();
    await allSucceed(derrick, jsm, queued.taskId);
  });

  it("storage - a running worker whose work-queue stream is deleted makes it again and runs the tasks whose messages went with it", {
    timeout: 30_000,
  }, async ({ derrick, jsm, worker }) => {
    await worker.stop();
    // One task at a time, each held 2 s: the first is running, the second waits in the queue.
    await worker.start({ DERRICK_CONTENT_CONCURRENCY: "1", DERRICK_CONTENT_TASK_DELAY: "2s" });
    const running = await request(derrick);
    await eventually(async () => (await task(derrick, running.taskId)).state === "running", { what: "the first task to start" });
    const waiting = await request(derrick);
    expect((await task(derrick, waiting.taskId)).state).toBe("queued");
    expect(await jsm.streams.delete(TASK_STREAM)).toBe(true);
    await allSucceed(derrick, jsm, running.taskId, waiting.taskId);
    await worker.stop();
  });
});

describe("content storage deleted at runtime, the advisory missed", () => {
  const it = advisoryMissed;

  it("storage - a write to a deleted bucket makes it again with its options and is done there", async ({ nc, jsm }) => {
    const stores = await openStores(nc);
    // As for a process that was disconnected when the bucket was deleted: only the guard sees it.
    stores.close();
    const tasks = taskStore(stores.tasks, stores.guard.tasks);
    expect(await jsm.streams.delete(`KV_${BUCKETS.tasks}`)).toBe(true);
    const task = queuedTask("guarded");
    await tasks.create(task);
    expect((await tasks.get("opendes", "tsk_guarded"))?.value).toEqual(task);
    expect((await jsm.streams.info(`KV_${BUCKETS.tasks}`)).config).toMatchObject({
      max_msgs_per_subject: 8,
      max_age: 7 * 86_400_000 * 1_000_000,
    });
    // Without a guard the same write fails: the stream is gone.
    expect(await jsm.streams.delete(`KV_${BUCKETS.tasks}`)).toBe(true);
    await expect(taskStore(stores.tasks).create(task)).rejects.toThrow();
  });

  it("storage - a read of a deleted bucket is answered from the bucket made again well before the 5 s request timeout (a direct get of a deleted stream is never answered)", async ({
    nc,
    jsm,
  }) => {
    const stores = await openStores(nc);
    stores.close();
    const tasks = taskStore(stores.tasks, stores.guard.tasks);
    expect(await jsm.streams.delete(`KV_${BUCKETS.tasks}`)).toBe(true);
    const started = performance.now();
    expect(await tasks.get("opendes", "tsk_missing")).toBeUndefined();
    // Not a performance bound: past the edge's wait the caller got a 504 instead of an answer.
    expect(performance.now() - started).toBeLessThan(3_000);
    expect((await jsm.streams.info(`KV_${BUCKETS.tasks}`)).config).toMatchObject({ max_msgs_per_subject: 8 });
  });
});
