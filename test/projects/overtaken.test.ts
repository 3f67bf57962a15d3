/**
 * Content runs overtaken by a redelivery of their task. A run that stalls past the ack wait (a GC
 * pause, a saturated event loop) loses its message to another worker; JetStream settles a message
 * by stream sequence, so whatever the old run does with its delivery acts on the newer run's. The
 * workers here are the real message handler (`handleTask`) over a real consumer with a short ack
 * wait; their stalls and deaths are project reads that wait on the test, so the timing is set by
 * the test, not by sleeps.
 */
import { describe, expect } from "vitest";
import { nuid } from "@nats-io/nats-core";
import type { JsMsg } from "@nats-io/jetstream";
import { eventually } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { workerDeps } from "./helpers.ts";
import { subjects } from "../../subjects/index.ts";
import { TaskState, type Content, type ProjectRecord, type TaskRecord, type WorkerStats } from "../../subjects/projects.ts";
import { encodeJson } from "../../actors/runtime/kv.ts";
import { TASK_STREAM, WORKER_CONSUMER, ensureTaskQueue, openStores, type Stores } from "../../actors/projects/store.ts";
import { getContent, getContentPart } from "../../actors/projects/handlers.ts";
import { ids, runContentTask, type WorkerDeps } from "../../actors/projects/content-task.ts";
import type { RequestContext } from "../../actors/runtime/context.ts";
import { handleTask } from "../../actors/projects/worker.ts";
import { createLogger } from "../../platform/logger.ts";

const ACK_WAIT_MS = 400;
const never = () => new Promise<never>(() => undefined);

const it = natsTest();

describe("content runs overtaken by a redelivery", () => {
  let stores: Stores;
  let base: WorkerDeps;
  it.beforeAll(async ({ nc }) => {
    stores = await openStores(nc);
    await ensureTaskQueue(nc, ACK_WAIT_MS);
    base = workerDeps(stores);
  });

  const log = createLogger("silent");
  const stats = (): WorkerStats => ({ instance: "test", completed: 0, failed: 0, redelivered: 0, inFlight: 0 });
  const stored = async (taskId: string) => (await base.tasks.get("opendes", taskId))!.value;

  /** A project and an accepted task for it, queued as the projects actor queues one. */
  async function acceptedTask(projectId: string): Promise<TaskRecord> {
    const now = new Date().toISOString();
    const incarnation = nuid.next();
    const project: ProjectRecord = {
      projectId,
      name: projectId,
      members: ["alpha"],
      values: { displayItems: {}, keyParameters: { "total-depth-md": 3550 } },
      createdAt: now,
      updatedAt: now,
      incarnation,
    };
    expect(await base.projects.write("opendes", project, 0)).toBe(true);
    const suffix = nuid.next();
    const task: TaskRecord = {
      taskId: ids.task(suffix),
      projectId,
      kind: "key-parameters",
      state: TaskState.queued,
      createdAt: now,
      contentId: ids.content(suffix),
      partition: "opendes",
      ids: ["total-depth-md"],
      requestedBy: { clientId: "alpha", subject: "alpha" },
      attempts: 0,
      projectIncarnation: incarnation,
    };
    await base.tasks.create(task);
    await stores.js.publish(subjects.content.tasks("opendes", task.taskId), encodeJson({ partition: "opendes", taskId: task.taskId }), {
      msgID: task.taskId,
    });
    return task;
  }

  /** The next delivery of the work queue, as a worker's pull gets it; undefined when none comes. */
  async function nextDelivery(): Promise<JsMsg | undefined> {
    const consumer = await stores.js.consumers.get(TASK_STREAM, WORKER_CONSUMER);
    for await (const msg of await consumer.fetch({ max_messages: 1, expires: 10 * ACK_WAIT_MS })) return msg;
    return undefined;
  }

  it("worker - a run overtaken by a redelivery leaves the message to it: when the newer run's worker dies too, the task is redelivered and completes", async ({
    jsm,
  }) => {
    const task = await acceptedTask("p-overtaken-ack");
    // Worker A starts the run (attempt 1), then stalls on its project read, past the ack wait.
    let resumeA!: () => void;
    const stall = new Promise<void>((resolve) => (resumeA = resolve));
    const workerA: WorkerDeps = {
      ...base,
      projects: { ...base.projects, get: async (...args) => (await stall, base.projects.get(...args)) },
    };
    const first = (await nextDelivery())!;
    const runA = handleTask(first, workerA, ACK_WAIT_MS, stats(), log);
    await eventually(async () => (await stored(task.taskId)).attempts === 1, { what: "the first run to start" });
    // JetStream hands the message to worker B after the ack wait; B's run starts (attempt 2) and
    // B is then killed mid-run (its project read never returns).
    const second = (await nextDelivery())!;
    expect(second.info.deliveryCount).toBe(2);
    const workerB: WorkerDeps = { ...base, projects: { ...base.projects, get: never } };
    void handleTask(second, workerB, ACK_WAIT_MS, stats(), log);
    await eventually(async () => (await stored(task.taskId)).attempts === 2, { what: "the second run to start" });

    // A resumes, finds the newer run, and returns without acking: its ack would settle the
    // message B holds (JetStream acks by stream sequence), and B's death would then leave the task
    // `running` with nothing to redeliver it.
    resumeA();
    await runA;
    expect((await jsm.streams.info(TASK_STREAM)).state.messages).toBe(1);
    expect(await stores.content.get(`opendes.c.${task.contentId}`)).toBeNull();

    // Nobody live holds the message: it comes back after the ack wait, and worker C completes it.
    const third = await nextDelivery();
    expect(third?.info.deliveryCount).toBe(3);
    const statsC = stats();
    await handleTask(third!, base, ACK_WAIT_MS, statsC, log);
    expect(statsC.completed).toBe(1);
    expect(await stored(task.taskId)).toMatchObject({ state: "succeeded", attempts: 3 });
    await eventually(async () => (await jsm.streams.info(TASK_STREAM)).state.messages === 0, {
      what: "the acked message to leave the work queue",
    });
  });

  it("worker - a run overtaken by a newer run does not fail the task either: the newer run decides", async () => {
    const task = await acceptedTask("p-overtaken-fail");
    const message = { partition: "opendes", taskId: task.taskId };
    let resume!: () => void;
    const stall = new Promise<void>((resolve) => (resume = resolve));
    const stale = runContentTask(
      message,
      { ...base, projects: { ...base.projects, get: async (...args) => (await stall, base.projects.get(...args)) } },
      { attempt: 1, last: false, working: () => undefined, hold: async () => undefined },
    );
    await eventually(async () => (await stored(task.taskId)).attempts === 1, { what: "the first run to start" });
    // A newer run starts meanwhile; then the requester leaves the project.
    const current = (await base.tasks.get("opendes", task.taskId))!;
    expect(await base.tasks.update({ ...current.value, attempts: 2 }, current.revision)).toBe(true);
    const project = (await base.projects.get("opendes", "p-overtaken-fail"))!;
    expect(await base.projects.write("opendes", { ...project.value, members: [] }, project.revision)).toBe(true);
    resume();
    expect(await stale).toBe("superseded");
    expect(await stored(task.taskId)).toMatchObject({ state: "running", attempts: 2 });
  });

  it("worker - a run that passed its last check and then stalled writes nothing over the result of the run that overtook it", async () => {
    const task = await acceptedTask("p-overtaken-write");
    const message = { partition: "opendes", taskId: task.taskId };
    const delivery = (attempt: number) => ({ attempt, last: false, working: () => undefined, hold: async () => undefined });
    // Run A passes its "still the newest run?" re-read, then stalls on its content write (a GC pause,
    // a saturated loop, a reconnect) past the ack wait. Meanwhile the project changes and a
    // redelivered run B starts, computes, writes and completes the task; then A's write goes out.
    let outcomeB: string | undefined;
    const workerA: WorkerDeps = {
      ...base,
      content: {
        ...base.content,
        async write(...args) {
          const project = (await base.projects.get("opendes", "p-overtaken-write"))!;
          expect(
            await base.projects.write(
              "opendes",
              { ...project.value, values: { displayItems: {}, keyParameters: { "total-depth-md": 4100 } } },
              project.revision,
            ),
          ).toBe(true);
          outcomeB = await runContentTask(message, base, delivery(2));
          return base.content.write(...args);
        },
      },
    };
    expect(await runContentTask(message, workerA, delivery(1))).toBe("superseded");
    expect(outcomeB).toBe("completed");
    const finished = await stored(task.taskId);
    expect(finished).toMatchObject({ state: "succeeded", attempts: 2 });
    // What is stored, and served, is B's result: its value and its expiry.
    const content = (await base.content.get("opendes", task.contentId))!;
    expect(content).toMatchObject({ run: 2, expiresAt: finished.expiresAt });
    expect(content.items![0]!.value).toBe(4100);
  });

  it("worker - a content or part written by a run other than the one that completed the task is not served", async () => {
    const task = await acceptedTask("p-overtaken-read");
    const message = { partition: "opendes", taskId: task.taskId };
    expect(await runContentTask(message, base, { attempt: 1, last: false, working: () => undefined, hold: async () => undefined })).toBe(
      "completed",
    );
    const deps = {
      catalog: base.catalog,
      catalogFresh: base.catalogFresh,
      catalogStore: undefined as never,
      projects: base.projects,
      tasks: base.tasks,
      taskIndex: undefined as never,
      content: base.content,
      enqueue: async () => undefined,
    };
    const ctx = {
      principal: { clientId: "alpha", subject: "alpha", groups: [], kind: "service" },
      partition: "opendes",
    } as unknown as RequestContext;
    const ref = { projectId: "p-overtaken-read", kind: "key-parameters" as const, contentId: task.contentId };
    const served = JSON.parse(new TextDecoder().decode((await getContent(ref, ctx, deps)).bytes)) as Content;
    expect(served).not.toHaveProperty("run");
    expect(served.items![0]!.value).toBe(3550);
    // A stray write of another run (from a version without the compare-and-set, or a part index the
    // completed run did not use) is refused at read.
    const kv = stores.content;
    await kv.put(`opendes.c.${task.contentId}`, JSON.stringify({ ...served, run: 7 }));
    await expect(getContent(ref, ctx, deps)).rejects.toMatchObject({ status: 404 });
    const partId = `prt_${task.contentId.slice(4)}_0`;
    await kv.put(
      `opendes.p.${partId}`,
      JSON.stringify({
        contentPartId: partId,
        contentId: task.contentId,
        projectId: "p-overtaken-read",
        kind: "key-parameters",
        index: 0,
        count: 1,
        data: "[]",
        run: 7,
      }),
    );
    await expect(
      getContentPart({ projectId: "p-overtaken-read", kind: "key-parameters", contentPartId: partId }, ctx, deps),
    ).rejects.toMatchObject({ status: 404 });
  });
});
