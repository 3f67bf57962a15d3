/** Shared steps of the projects tests: content requests, their tasks and contents, read typed. */
import { expect } from "vitest";
import { eventually, startDerrick, type TestClient, type TestDerrick } from "../harness/index.ts";
import { derrickTest, type DerrickTestOptions } from "../harness/fixture.ts";
import { getJson, json } from "../harness/json.ts";
import { TaskState, type Content, type ContentAccepted, type Task, type TaskRecord } from "../../subjects/projects.ts";
import { contentStore, projectStore, taskStore, type Stores } from "../../actors/projects/store.ts";
import type { WorkerDeps } from "../../actors/projects/content-task.ts";
import { catalogFrom, readCatalogFile } from "../../actors/projects/catalog.ts";

export type ContentKind = "display-items" | "key-parameters";

/**
 * A file's derrick (derrickTest's `options`) and `worker`: the one content worker the tests start
 * (with the file's settings plus their own) and stop on the file's server; stopped after the file.
 */
export function contentTest(options: DerrickTestOptions & { env?: Record<string, string> }) {
  return derrickTest(options).extend("worker", { scope: "file" }, async ({ nats }, { onCleanup }) => {
    let running: TestDerrick | undefined;
    const stop = async () => {
      await running?.cleanup();
      running = undefined;
    };
    onCleanup(stop);
    return {
      /** Starts a content worker unless one runs. */
      start: async (env: Record<string, string> = {}) =>
        (running ??= await startDerrick(nats, { actors: ["content-worker"], edge: false, env: { ...options.env, ...env } })),
      stop,
    };
  });
}

/** What a content worker runs a task with: the shipped catalog and the stores of a connection. */
export const workerDeps = (stores: Stores, delayMs = 0): WorkerDeps => ({
  catalog: catalogFrom(readCatalogFile()),
  // The shipped file only: nothing to wait for.
  catalogFresh: async () => undefined,
  projects: projectStore(stores.projects),
  tasks: taskStore(stores.tasks),
  content: contentStore(stores.content),
  delayMs,
});

/** A key-parameters task of project `p` in opendes as just accepted (queued, never run), named `tsk_<name>`. */
export const queuedTask = (name: string): TaskRecord => ({
  taskId: `tsk_${name}`,
  projectId: "p",
  kind: "key-parameters",
  state: TaskState.queued,
  createdAt: new Date().toISOString(),
  contentId: `cnt_${name}`,
  partition: "opendes",
  requestedBy: { clientId: "alpha", subject: "alpha" },
  attempts: 0,
});

/** Asks for a project's content (202): the task and content ids, and the task's location. */
export async function requestContent(derrick: TestDerrick, projectId: string, kind: ContentKind = "display-items", body: unknown = {}) {
  const res = await derrick.call(`/v1/projects/${projectId}/${kind}/content/requests`, { method: "POST", body: JSON.stringify(body) });
  expect(res.status, await res.clone().text()).toBe(202);
  return { ...(await json<ContentAccepted>(res)), location: res.headers.get("location") };
}

/** A task as a member of its project reads it. */
export const taskOf = (derrick: TestDerrick, projectId: string, taskId: string, as: TestClient = "alpha") =>
  getJson<Task>(derrick, `/v2/projects/${projectId}/tasks/${taskId}`, { as });

/** Waits until a task is in one of `states` (by default finished: succeeded or failed); the task then. */
export const taskIn = (
  derrick: TestDerrick,
  projectId: string,
  taskId: string,
  {
    states = ["succeeded", "failed"],
    as = "alpha",
    timeoutMs = 15_000,
  }: { states?: TaskState[]; as?: TestClient; timeoutMs?: number } = {},
) =>
  eventually(
    async () => {
      const task = await taskOf(derrick, projectId, taskId, as);
      return states.includes(task.state) ? task : undefined;
    },
    { timeoutMs, what: `task ${taskId} to be ${states.join(" or ")}` },
  );

/** The content of a succeeded task. */
export const contentOf = (derrick: TestDerrick, projectId: string, kind: ContentKind, contentId: string) =>
  getJson<Content>(derrick, `/v1/projects/${projectId}/${kind}/content/${contentId}`);
