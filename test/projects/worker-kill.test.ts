import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect } from "vitest";
import { eventually, startDerrick, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { subjects } from "../../subjects/index.ts";
import type { TaskRecord, WorkerStats } from "../../subjects/projects.ts";
import { putProject } from "./fixtures.ts";
import { contentOf, requestContent, taskIn, taskOf } from "./helpers.ts";

const CLI = fileURLToPath(new URL("../../bin/derrick.ts", import.meta.url));
const ACK_WAIT = "1500ms";

const it = derrickTest({ actors: ["identity", "projects"], env: { DERRICK_CONTENT_ACK_WAIT: ACK_WAIT } });

describe("content worker failure", () => {
  let worker: TestDerrick | undefined;
  let child: ChildProcess | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), "derrick-worker-"));
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await worker?.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("worker - a task whose worker process is killed mid-task is redelivered and completes exactly once", { timeout: 30_000 }, async ({
    derrick,
    nats,
    jsm,
  }) => {
    await putProject(derrick, "p-kill");
    // A separate worker process that holds each task 20 s: it will be mid-task when killed.
    child = spawn(process.execPath, [CLI, "actor", "content-worker"], {
      env: {
        ...process.env,
        NATS_URL: nats.url,
        DERRICK_DATA_DIR: dataDir,
        DERRICK_LOG_LEVEL: "silent",
        DERRICK_CONTENT_ACK_WAIT: ACK_WAIT,
        DERRICK_CONTENT_TASK_DELAY: "20s",
      },
      stdio: "ignore",
    });
    await eventually(async () => (await derrick.bus.request<WorkerStats>(subjects.content.stats(), undefined)).body, {
      what: "the child worker",
      timeoutMs: 15_000,
    });

    const { taskId, contentId } = await requestContent(derrick, "p-kill", "key-parameters", { ids: ["total-depth-md"] });
    await taskIn(derrick, "p-kill", taskId, { states: ["running"] });
    // Held past several ack waits thanks to working(): the child is alive and the task is not taken from it.
    await new Promise((resolve) => setTimeout(resolve, 2 * 1500 + 500));
    expect((await taskOf(derrick, "p-kill", taskId)).state).toBe("running");

    const exited = new Promise((resolve) => child!.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    worker = await startDerrick(nats, { actors: ["content-worker"], edge: false, env: { DERRICK_CONTENT_ACK_WAIT: ACK_WAIT } });

    const done = await taskIn(derrick, "p-kill", taskId, { states: ["succeeded"] });
    expect(done).toMatchObject({ taskId, state: "succeeded" });
    const content = await contentOf(derrick, "p-kill", "key-parameters", contentId);
    expect(content.items).toEqual([expect.objectContaining({ id: "total-depth-md", value: 3550 })]);

    // Exactly once: the stored history of the task shows one completion after two runs, and the
    // work queue is empty (the message was acked, not left for another run).
    const kv = await openBucket(derrick.nc, "derrick_tasks");
    const states: Array<{ state: string; attempts: number }> = [];
    for await (const entry of await kv.history({ key: `opendes.${taskId}` })) states.push(entry.json<TaskRecord>());
    expect(states.map((s) => s.state)).toEqual(["queued", "running", "running", "succeeded"]);
    expect(states.at(-1)!.attempts).toBe(2);
    await eventually(async () => (await derrick.bus.request<WorkerStats>(subjects.content.stats(), undefined)).body.completed === 1, {
      what: "one completion",
    });
    await eventually(async () => (await jsm.streams.info("CONTENT_TASKS")).state.messages === 0, { what: "the queue to drain" });
  });
});
