import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { TASK_STREAM, WORKER_CONSUMER } from "../../actors/projects/store.ts";
import { putProject } from "./fixtures.ts";

const ACK_WAIT_MS = 1500;

describe("content worker consumer", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  let worker: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    const env = { DERRICK_CONTENT_ACK_WAIT: `${ACK_WAIT_MS}ms` };
    derrick = await startDerrick(nats, { actors: ["identity", "projects"], env });
    worker = await startDerrick(nats, { actors: ["content-worker"], edge: false, env });
    await putProject(derrick, "p-consumer");
  });
  afterAll(async () => {
    await worker?.cleanup();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  /** Requests a key parameter's content and waits for its task to finish; the finished task. */
  const requestAndSettle = async () => {
    const res = await derrick.call("/v1/projects/p-consumer/key-parameters/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["total-depth-md"] }),
    });
    expect(res.status, await res.clone().text()).toBe(202);
    const { taskId } = (await res.json()) as { taskId: string };
    return eventually(
      async () => {
        const t = (await (await derrick.call(`/v2/projects/p-consumer/tasks/${taskId}`)).json()) as { taskId: string; state: string };
        return t.state === "succeeded" || t.state === "failed" ? t : undefined;
      },
      { timeoutMs: 10_000, what: `task ${taskId} to finish` },
    );
  };

  it("worker - a task submitted after the workers' durable consumer was deleted on the server still completes", {
    timeout: 15_000,
  }, async () => {
    expect(await requestAndSettle()).toMatchObject({ state: "succeeded" });
    // Someone (an operator, a tool, a stream restored from backup) removes the consumer every worker
    // shares: the running worker must take tasks again, through a consumer of the same configuration.
    const jsm = await jetstreamManager(derrick.nc);
    expect(await jsm.consumers.delete(TASK_STREAM, WORKER_CONSUMER)).toBe(true);
    expect(await requestAndSettle()).toMatchObject({ state: "succeeded" });
    const recreated = await jsm.consumers.info(TASK_STREAM, WORKER_CONSUMER);
    expect(recreated.config).toMatchObject({ durable_name: WORKER_CONSUMER, ack_wait: ACK_WAIT_MS * 1_000_000 });
    await eventually(async () => (await jsm.streams.info(TASK_STREAM)).state.messages === 0, { what: "the queue to drain" });
  });
});
