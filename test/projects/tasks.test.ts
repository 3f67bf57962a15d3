import { describe, expect } from "vitest";
import { eventually, type TestDerrick, openBucket } from "../harness/index.ts";
import { expectProblem, json } from "../harness/json.ts";
import { subjects } from "../../subjects/index.ts";
import type { ContentItem, ContentPart, Task, WorkerStats } from "../../subjects/projects.ts";
import { drillingPlanValues, putProject } from "./fixtures.ts";
import { contentOf, contentTest, requestContent, taskIn, taskOf, workerDeps } from "./helpers.ts";
import { BUCKETS, TASK_STREAM, WORKER_CONSUMER, openStores } from "../../actors/projects/store.ts";
import { MAX_RUNS, runContentTask, type WorkerDeps } from "../../actors/projects/content-task.ts";

/** A table item's summary: its row count and each numeric column's range. */
type TableSummary = { rows: number; columns: Record<string, { min: number; max: number }> };

// The edge and the projects actor only: tasks stay queued until a test starts a worker.
const it = contentTest({ actors: ["identity", "projects"] });

const storedTask = async (derrick: TestDerrick, taskId: string) =>
  (await (await openBucket(derrick.nc, BUCKETS.tasks)).get(`opendes.${taskId}`))?.json<Task>();

/** A total-cost request on a new project `projectId`, left queued: the worker is stopped until the test starts it. */
async function queuedTotalCost(derrick: TestDerrick, worker: { stop(): Promise<unknown> }, projectId: string) {
  await worker.stop();
  await putProject(derrick, projectId);
  return requestContent(derrick, projectId, "key-parameters", { ids: ["total-cost"] });
}

/** Stores a task as earlier runs would have left it: `fields` over what is stored. */
async function rewriteTask(derrick: TestDerrick, taskId: string, fields: Record<string, unknown>) {
  const kv = await openBucket(derrick.nc, BUCKETS.tasks);
  const entry = (await kv.get(`opendes.${taskId}`))!;
  await kv.update(`opendes.${taskId}`, JSON.stringify({ ...entry.json<Record<string, unknown>>(), ...fields }), entry.revision);
}

/** A delivery of the task's `attempt`th run, not its last, that `hold` runs past its ack wait in. */
const delivery = (attempt: number, hold: () => Promise<void> = async () => undefined) => ({
  attempt,
  last: false,
  working: () => undefined,
  hold,
});

describe("content tasks", () => {
  it("tasks - a request for unknown items is refused at once with a 400 naming the id", async ({ derrick }) => {
    await putProject(derrick, "p-unknown");
    const res = await derrick.call("/v1/projects/p-unknown/key-parameters/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["total-depth-md", "no-such-parameter"] }),
    });
    expect((await expectProblem(res, 400)).errors![0]!.pointer).toBe("/body/ids/1");
    const strict = await derrick.call("/v1/projects/p-unknown/key-parameters/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["total-depth-md"], format: "csv" }),
    });
    expect(strict.status).toBe(400);
    // A display item id is not a key parameter.
    const crossed = await derrick.call("/v1/projects/p-unknown/key-parameters/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["trajectory-survey"] }),
    });
    expect(crossed.status).toBe(400);
  });

  it("tasks - a task goes queued → running → succeeded and its content is computed from the project's values", async ({
    derrick,
    worker,
  }) => {
    await putProject(derrick, "p-life");
    const accepted = await requestContent(derrick, "p-life");
    expect(accepted.location).toBe(`/v2/projects/p-life/tasks/${accepted.taskId}`);
    const queued = await taskOf(derrick, "p-life", accepted.taskId);
    expect(queued).toMatchObject({
      taskId: accepted.taskId,
      projectId: "p-life",
      kind: "display-items",
      state: "queued",
      contentId: accepted.contentId,
    });
    const early = await derrick.call(`/v1/projects/p-life/display-items/content/${accepted.contentId}`);
    expect(early.status).toBe(409);
    expect(await early.json()).toMatchObject({ taskId: accepted.taskId, state: "queued" });

    await worker.start({ DERRICK_CONTENT_TASK_DELAY: "800ms" });
    const running = await taskIn(derrick, "p-life", accepted.taskId, { states: ["running"], timeoutMs: 10_000 });
    expect(running.startedAt).toBeTruthy();
    const during = await derrick.call(`/v1/projects/p-life/display-items/content/${accepted.contentId}`);
    expect(during.status).toBe(409);
    expect(await during.json()).toMatchObject({ taskId: accepted.taskId, state: "running" });

    const done = await taskIn(derrick, "p-life", accepted.taskId);
    expect(done.state).toBe("succeeded");
    expect(Date.parse(done.expiresAt!) - Date.parse(done.completedAt!)).toBe(60_000);
    await worker.stop();

    const content = await contentOf(derrick, "p-life", "display-items", accepted.contentId);
    const values = drillingPlanValues();
    expect(content).toMatchObject({
      contentId: accepted.contentId,
      taskId: accepted.taskId,
      itemCount: 33,
      setCount: Object.keys(values.displayItems).length,
    });
    const byId = new Map(content.items!.map((i) => [i.id, i]));
    expect(byId.get("well-name")).toMatchObject({ status: "set", value: "NO 15/9-F-21 A" });
    expect(byId.get("water-depth")).toMatchObject({ status: "set", value: 91, unit: "m" });
    expect(byId.get("afe-number")).toMatchObject({ status: "missing", value: null });
    const summary = byId.get("trajectory-survey")!.summary as TableSummary;
    expect(summary.rows).toBe(120);
    expect(summary.columns.md).toMatchObject({ min: 0, max: 119 * 30 });
    expect(summary.columns.inc!.max).toBe(60);
  });

  it("tasks - a key-parameters request returns just the requested parameters, in the order asked", async ({ derrick, worker }) => {
    await putProject(derrick, "p-kp");
    await worker.start();
    const accepted = await requestContent(derrick, "p-kp", "key-parameters", { ids: ["total-cost", "total-depth-md", "contingency"] });
    expect((await taskIn(derrick, "p-kp", accepted.taskId)).state).toBe("succeeded");
    const content = await contentOf(derrick, "p-kp", "key-parameters", accepted.contentId);
    expect(content.items!.map((i) => [i.id, i.status, i.value])).toEqual([
      ["total-cost", "set", 38_500_000],
      ["total-depth-md", "set", 3550],
      ["contingency", "missing", null],
    ]);
    // The same content is not served under the other kind, nor in another project.
    expect((await derrick.call(`/v1/projects/p-kp/display-items/content/${accepted.contentId}`)).status).toBe(404);
    await putProject(derrick, "p-kp-other");
    expect((await derrick.call(`/v1/projects/p-kp-other/key-parameters/content/${accepted.contentId}`)).status).toBe(404);
    expect((await derrick.call(`/v2/projects/p-kp-other/tasks/${accepted.taskId}`)).status).toBe(404);
  });

  it("tasks - a task whose project is deleted or whose requester left fails with an error", async ({ derrick, worker }) => {
    await worker.stop();
    await putProject(derrick, "p-gone");
    await putProject(derrick, "p-left", { members: ["alpha", "beta"] });
    const gone = await requestContent(derrick, "p-gone");
    const left = await requestContent(derrick, "p-left", "key-parameters");
    expect((await derrick.call("/v1/projects/p-gone", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/p-left/members/alpha", { as: "admin", method: "DELETE" })).status).toBe(204);
    await worker.start();
    // The left project still exists: its task is read by a remaining member.
    const leftTask = await taskIn(derrick, "p-left", left.taskId, { states: ["failed"], as: "beta", timeoutMs: 10_000 });
    expect(leftTask.error).toMatch(/no longer a member/);
    expect(leftTask.completedAt).toBeTruthy();
    expect(leftTask.expiresAt).toBeUndefined();
    const content = await derrick.call(`/v1/projects/p-left/key-parameters/content/${left.contentId}`, { as: "beta" });
    expect(content.status).toBe(404);
    expect(await content.json()).toMatchObject({ taskId: left.taskId, state: "failed" });
    // The deleted project answers 404 on every route, task included; its task failed in storage.
    expect((await derrick.call(`/v2/projects/p-gone/tasks/${gone.taskId}`)).status).toBe(404);
    await eventually(async () => (await derrick.bus.request<WorkerStats>(subjects.content.stats(), undefined)).body.failed === 2, {
      what: "both tasks run",
    });
    expect(await storedTask(derrick, gone.taskId)).toMatchObject({ state: "failed", error: expect.stringMatching(/deleted/) });
    // The id taken again is a new project: the old task is not its.
    await putProject(derrick, "p-gone");
    expect((await derrick.call(`/v2/projects/p-gone/tasks/${gone.taskId}`)).status).toBe(404);
  });

  it("tasks - a project deleted and created again under its id is new: old tasks and results are not its, queued ones fail", async ({
    derrick,
    worker,
  }) => {
    await worker.start();
    await putProject(derrick, "p-again", { members: ["alpha"] });
    const done = await requestContent(derrick, "p-again", "key-parameters", { ids: ["total-cost"] });
    expect((await taskIn(derrick, "p-again", done.taskId)).state).toBe("succeeded");
    await worker.stop();
    const queued = await requestContent(derrick, "p-again", "key-parameters", { ids: ["total-cost"] });
    expect((await derrick.call("/v1/projects/p-again", { as: "admin", method: "DELETE" })).status).toBe(204);
    await putProject(derrick, "p-again", { members: ["beta"], values: { keyParameters: { "total-cost": 1 } } });
    // beta was never a member of the first project: nothing of it is readable through the second.
    for (const path of [
      `/v2/projects/p-again/tasks/${done.taskId}`,
      `/v1/projects/p-again/key-parameters/content/${done.contentId}`,
      `/v2/projects/p-again/tasks/${queued.taskId}`,
    ]) {
      expect((await derrick.call(path, { as: "beta" })).status, path).toBe(404);
    }
    // The task queued for the first project fails rather than compute from the second one's values.
    await worker.start();
    const failed = await eventually(
      async () => {
        const t = await storedTask(derrick, queued.taskId);
        return t?.state === "failed" ? t : undefined;
      },
      { what: "the old project's queued task to fail" },
    );
    expect(failed.error).toMatch(/deleted/);
  });

  it("tasks - a stored result is not served before its task succeeded", async ({ derrick, worker }) => {
    const accepted = await queuedTotalCost(derrick, worker, "p-early");
    // What a run leaves when it crashed between writing the content and marking the task succeeded.
    const kv = await openBucket(derrick.nc, BUCKETS.content);
    await kv.put(
      `opendes.c.${accepted.contentId}`,
      JSON.stringify({
        contentId: accepted.contentId,
        taskId: accepted.taskId,
        projectId: "p-early",
        kind: "key-parameters",
        createdAt: new Date().toISOString(),
        expiresAt: new Date(Date.now() + 60_000).toISOString(),
        itemCount: 1,
        setCount: 1,
        size: 2,
        items: [],
      }),
    );
    const early = await derrick.call(`/v1/projects/p-early/key-parameters/content/${accepted.contentId}`);
    expect(early.status).toBe(409);
    expect(await early.json()).toMatchObject({ taskId: accepted.taskId, state: "queued" });
  });

  it("tasks - a task whose runs keep dying is failed on the next delivery, and the queue redelivers without a silent cap", async ({
    derrick,
    jsm,
    worker,
  }) => {
    const accepted = await queuedTotalCost(derrick, worker, "p-crashy");
    // Five runs started and none came back (workers killed mid-run): the count is in the task.
    await rewriteTask(derrick, accepted.taskId, { state: "running", attempts: MAX_RUNS });
    // A consumer from an older version capped deliveries (JetStream then stops redelivering silently).
    await jsm.consumers.update(TASK_STREAM, WORKER_CONSUMER, { max_deliver: 5 });
    await worker.start();
    expect((await jsm.consumers.info(TASK_STREAM, WORKER_CONSUMER)).config.max_deliver).toBe(-1);
    const failed = await taskIn(derrick, "p-crashy", accepted.taskId);
    expect(failed).toMatchObject({ state: "failed", error: expect.stringMatching(/5 runs/) });
  });

  it("tasks - runs that end in an infrastructure error do not count against the crash bound: a storage outage longer than five runs does not fail the task", async ({
    derrick,
    worker,
  }) => {
    const accepted = await queuedTotalCost(derrick, worker, "p-outage");
    const deps = workerDeps(await openStores(derrick.nc));
    // The content bucket cannot be written for a while: each run throws, the wiring naks with backoff.
    const away: WorkerDeps = { ...deps, content: { ...deps.content, write: () => Promise.reject(new Error("storage away")) } };
    const message = { partition: "opendes", taskId: accepted.taskId };
    const outage = 2 * MAX_RUNS;
    for (let attempt = 1; attempt <= outage; attempt++)
      await expect(runContentTask(message, away, delivery(attempt))).rejects.toThrow(/storage away/);
    expect(await storedTask(derrick, accepted.taskId)).toMatchObject({ state: "running", attempts: outage, erroredRuns: outage });
    // Storage is back: the next delivery completes the task.
    expect(await runContentTask(message, deps, delivery(outage + 1))).toBe("completed");
    expect(await taskOf(derrick, "p-outage", accepted.taskId)).toMatchObject({ state: "succeeded" });
    expect((await derrick.call(`/v1/projects/p-outage/key-parameters/content/${accepted.contentId}`)).status).toBe(200);
  });

  it("tasks - runs that never finished still count when mixed with reported errors", async ({ derrick, worker }) => {
    const accepted = await queuedTotalCost(derrick, worker, "p-mixed");
    // Eight runs started, three of them reported an infrastructure error: five never finished.
    await rewriteTask(derrick, accepted.taskId, { state: "running", attempts: MAX_RUNS + 3, erroredRuns: 3 });
    const deps = workerDeps(await openStores(derrick.nc));
    expect(await runContentTask({ partition: "opendes", taskId: accepted.taskId }, deps, delivery(9))).toBe("failed");
    expect(await taskOf(derrick, "p-mixed", accepted.taskId)).toMatchObject({
      state: "failed",
      error: expect.stringMatching(/5 runs ended without finishing/),
    });
  });

  it("tasks - a run overtaken by a newer run of its task writes nothing", async ({ derrick, worker }) => {
    const accepted = await queuedTotalCost(derrick, worker, "p-overtaken");
    const stores = await openStores(derrick.nc);
    const deps = workerDeps(stores, 1);
    const { tasks } = deps;
    // While this run waits past its ack wait, JetStream hands the task to another worker, whose run starts.
    const overtaken = async () => {
      const current = (await tasks.get("opendes", accepted.taskId))!;
      expect(await tasks.update({ ...current.value, attempts: current.value.attempts + 1 }, current.revision)).toBe(true);
    };
    const outcome = await runContentTask({ partition: "opendes", taskId: accepted.taskId }, deps, delivery(1, overtaken));
    expect(outcome).toBe("superseded");
    expect(await stores.content.get(`opendes.c.${accepted.contentId}`)).toBeNull();
    expect((await taskOf(derrick, "p-overtaken", accepted.taskId)).state).toBe("running");
  });

  it("tasks - a JSON null body is not the request object", async ({ derrick }) => {
    await putProject(derrick, "p-null");
    const res = await derrick.call("/v1/projects/p-null/key-parameters/content/requests", { method: "POST", body: "null" });
    expect(res.status).toBe(400);
    const absent = await derrick.call("/v1/projects/p-null/key-parameters/content/requests", { method: "POST" });
    expect(absent.status, await absent.clone().text()).toBe(202);
  });

  it("tasks - a large content is split into parts of at most 256 KiB that reassemble to the whole", async ({ derrick, worker }) => {
    await worker.start();
    const values = drillingPlanValues(6000);
    const put = await putProject(derrick, "p-large", { values });
    expect(put.status).toBe(201);
    const accepted = await requestContent(derrick, "p-large", "display-items", {
      ids: ["well-name", "trajectory-survey", "casing-scheme"],
    });
    expect((await taskIn(derrick, "p-large", accepted.taskId)).state).toBe("succeeded");
    const content = await contentOf(derrick, "p-large", "display-items", accepted.contentId);
    expect(content.items).toBeUndefined();
    expect(content.size).toBeGreaterThan(256 * 1024);
    expect(content.parts!.length).toBeGreaterThanOrEqual(2);
    let text = "";
    for (const [index, partId] of content.parts!.entries()) {
      const res = await derrick.call(`/v1/projects/p-large/display-items/content-parts/${partId}`);
      expect(res.status).toBe(200);
      const part = await json<ContentPart>(res);
      expect(part).toMatchObject({ contentPartId: partId, contentId: accepted.contentId, index, count: content.parts!.length });
      expect(new TextEncoder().encode(part.data).length).toBeLessThanOrEqual(256 * 1024);
      text += part.data;
    }
    expect(new TextEncoder().encode(text).length).toBe(content.size);
    const items = JSON.parse(text) as ContentItem[];
    expect(items.map((i) => i.id)).toEqual(["well-name", "trajectory-survey", "casing-scheme"]);
    expect(items[1]!.value).toEqual(values.displayItems["trajectory-survey"]);
    expect((items[1]!.summary as TableSummary).rows).toBe(6000);
    // Parts are served only under their own kind.
    expect((await derrick.call(`/v1/projects/p-large/key-parameters/content-parts/${content.parts![0]}`)).status).toBe(404);
    expect((await derrick.call(`/v1/projects/p-large/display-items/content-parts/${content.parts![0]}9`)).status).toBe(404);
  });

  it("tasks - parts of a content not yet produced answer 409 with the task state", async ({ derrick, worker }) => {
    await worker.stop();
    await putProject(derrick, "p-wait");
    const accepted = await requestContent(derrick, "p-wait");
    const partId = `prt_${accepted.contentId.slice(4)}_0`;
    const res = await derrick.call(`/v1/projects/p-wait/display-items/content-parts/${partId}`);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ taskId: accepted.taskId, state: "queued", status: 409 });
    expect((await derrick.call("/v1/projects/p-wait/display-items/content/cnt_unknown1")).status).toBe(404);
    expect((await derrick.call("/v2/projects/p-wait/tasks/tsk_unknown1")).status).toBe(404);
  });
});
