import { afterAll, describe, expect } from "vitest";
import { RetentionPolicy, jetstreamManager } from "@nats-io/jetstream";
import { eventually, startDerrick, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";
import { BUCKETS, TASK_STREAM } from "../../actors/projects/store.ts";
import { subjects } from "../../subjects/index.ts";
import { connectNats } from "../../platform/nats.ts";
import { putProject } from "./fixtures.ts";

const PER_REQUESTER = 2;
const TOTAL = 3;

/**
 * The work queue's limits: unfinished tasks per requester (429) and in all (503), held by the
 * CONTENT_TASKS stream itself (discard new), so a member cannot fill the queue and the KV with tasks.
 */
// No content worker yet: every accepted task stays unfinished.
const it = derrickTest({
  actors: ["identity", "projects"],
  env: { DERRICK_CONTENT_MAX_UNFINISHED: String(PER_REQUESTER), DERRICK_CONTENT_QUEUE_MAX: String(TOTAL) },
  // A stream from a version without limits: the projects actor applies the configured ones at start.
  prepare: async (nats) => {
    const nc = await connectNats(nats.url, "queue-limits-test");
    await (await jetstreamManager(nc)).streams.add({
      name: TASK_STREAM,
      subjects: [subjects.content.allTasks()],
      retention: RetentionPolicy.Workqueue,
    });
    await nc.close();
  },
});

describe("content work-queue limits", () => {
  let worker: TestDerrick | undefined;
  it.beforeAll(async ({ derrick }) => {
    expect((await putProject(derrick, "p-limits", { members: ["alpha", "beta", "admin"] })).status).toBe(201);
  });
  afterAll(async () => {
    await worker?.cleanup();
  });

  const request = (derrick: TestDerrick, as: "alpha" | "beta" | "admin") =>
    derrick.call("/v1/projects/p-limits/key-parameters/content/requests", {
      as,
      method: "POST",
      body: JSON.stringify({ ids: ["total-depth-md"] }),
    });
  const storedTasks = async (derrick: TestDerrick) => {
    let n = 0;
    for await (const _ of await (await openBucket(derrick.nc, BUCKETS.tasks)).keys()) n++;
    return n;
  };

  it("limits - a stream made without limits gets the configured ones at start", async ({ jsm }) => {
    const info = await jsm.streams.info(TASK_STREAM);
    expect(info.config).toMatchObject({
      max_msgs: TOTAL,
      max_msgs_per_subject: PER_REQUESTER,
      discard: "new",
      discard_new_per_subject: true,
    });
  });

  it("limits - past its unfinished tasks a requester gets 429 with Retry-After and leaves no task behind; others are not held by it", async ({
    derrick,
  }) => {
    for (let i = 0; i < PER_REQUESTER; i++) expect((await request(derrick, "alpha")).status).toBe(202);
    const refused = await request(derrick, "alpha");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await expectProblem(refused, 429)).detail).toContain(`${PER_REQUESTER} content tasks queued or running`);
    expect(await storedTasks(derrick)).toBe(PER_REQUESTER);
    // Another member has a limit of their own.
    expect((await request(derrick, "beta")).status).toBe(202);
  });

  it("limits - past the queue's total everyone gets 503 with Retry-After", async ({ derrick }) => {
    const refused = await request(derrick, "admin");
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await storedTasks(derrick)).toBe(TOTAL);
  });

  it("limits - once its tasks completed, a requester is admitted again", { timeout: 20_000 }, async ({ derrick, nats, jsm }) => {
    worker = await startDerrick(nats, { actors: ["content-worker"], edge: false });
    await eventually(async () => (await jsm.streams.info(TASK_STREAM)).state.messages === 0, {
      timeoutMs: 15_000,
      what: "the queue to drain",
    });
    expect((await request(derrick, "alpha")).status).toBe(202);
  });
});
