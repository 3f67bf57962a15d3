import { describe, expect } from "vitest";
import { eventually, startDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { TASK_STREAM, WORKER_CONSUMER } from "../../actors/projects/store.ts";
import { putProject } from "./fixtures.ts";
import { requestContent, taskIn } from "./helpers.ts";

const ACK_WAIT_MS = 1500;
const env = { DERRICK_CONTENT_ACK_WAIT: `${ACK_WAIT_MS}ms` };

const it = derrickTest({ actors: ["identity", "projects"], env }).extend(
  "worker",
  { scope: "file", auto: true },
  async ({ nats }, { onCleanup }) => {
    const worker = await startDerrick(nats, { actors: ["content-worker"], edge: false, env });
    onCleanup(() => worker.cleanup());
    return worker;
  },
);

describe("content worker consumer", () => {
  it.beforeAll(async ({ derrick }) => {
    await putProject(derrick, "p-consumer");
  });

  it("worker - a task submitted after the workers' durable consumer was deleted on the server still completes", {
    timeout: 15_000,
  }, async ({ derrick, jsm }) => {
    /** Requests a key parameter's content and waits for its task to finish; the finished task. */
    const requestAndSettle = async () => {
      const { taskId } = await requestContent(derrick, "p-consumer", "key-parameters", { ids: ["total-depth-md"] });
      return taskIn(derrick, "p-consumer", taskId, { timeoutMs: 10_000 });
    };
    expect(await requestAndSettle()).toMatchObject({ state: "succeeded" });
    // Someone (an operator, a tool, a stream restored from backup) removes the consumer every worker
    // shares: the running worker must take tasks again, through a consumer of the same configuration.
    expect(await jsm.consumers.delete(TASK_STREAM, WORKER_CONSUMER)).toBe(true);
    expect(await requestAndSettle()).toMatchObject({ state: "succeeded" });
    const recreated = await jsm.consumers.info(TASK_STREAM, WORKER_CONSUMER);
    expect(recreated.config).toMatchObject({ durable_name: WORKER_CONSUMER, ack_wait: ACK_WAIT_MS * 1_000_000 });
    await eventually(async () => (await jsm.streams.info(TASK_STREAM)).state.messages === 0, { what: "the queue to drain" });
  });
});
