/**
 * Large aggregations through the edge: 202 with a task the client polls, the result read once it succeeded (and then
 * cached); the task's states, failures, expiry and a run lost with its process on a real nats-server; the cache reads
 * counted in /metrics.
 */
import { describe, expect } from "vitest";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import type { TestDerrick } from "../harness/index.ts";
import { eventually } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import { createLogger } from "../../platform/logger.ts";
import { conflict } from "../../subjects/index.ts";
import { ASYNC_WORK_MIN } from "../../actors/reporting/work.ts";
import { AggregationTasks, RESULT_TTL_MS, TASK_BUCKETS, TASK_STALE_MS, type TaskRecord } from "../../actors/reporting/tasks.ts";
import { prospectAnalysis, put, reportingTest, segment } from "./helpers.ts";

const it = reportingTest({ DERRICK_REQUEST_TIMEOUT: "50s" });
const BASE = "/assessments/v1";

/** 16 one-product segments × 1,000,000 trials: 37,000,000 of work, just past ASYNC_WORK_MIN. */
async function largeProspect(derrick: TestDerrick, key: string) {
  const ids = Array.from({ length: 16 }, (_, i) => `${key}-s${i}`);
  for (const [i, id] of ids.entries()) await put(derrick, "segmentanalyses", id, segment(`${key} ${i}`, 0.3 + i / 40, 5 + i, 50 + i));
  await put(
    derrick,
    "prospectanalyses",
    `pa-${key}`,
    prospectAnalysis(`p-${key}`, key, ids, { simulation: { trials: 1_000_000, seed: 7 } }),
  );
  return `pa-${key}`;
}

/** Polls the task at `location` until it is no longer queued or running. */
async function settled(derrick: TestDerrick, location: string) {
  return eventually(
    async () => {
      const task = await json(await derrick.call(location));
      return task.state === "succeeded" || task.state === "failed" ? task : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 100, what: `task ${location}` },
  );
}

const cacheCount = async (derrick: TestDerrick, result: string) => {
  const text = await (await fetch(`${derrick.url}/metrics`)).text();
  return Number(new RegExp(`^derrick_reporting_cache_total\\{result="${result}"\\} (\\d+)`, "m").exec(text)?.[1] ?? 0);
};

describe("reporting large aggregations", () => {
  it("a prospect aggregation past the work bound answers 202 with a task; once it succeeded its result is the aggregation, then cached and byte-identical", async ({
    derrick,
  }) => {
    const id = await largeProspect(derrick, "big");
    const accepted = await derrick.call(`${BASE}/prospectanalysisaggregation/${id}`);
    expect(accepted.status).toBe(202);
    const task = await json(accepted);
    expect(accepted.headers.get("location")).toBe(`${BASE}/aggregationtasks/${task.taskId}`);
    expect(task).toMatchObject({ aggregation: "prospect", id, state: "queued", result: `${BASE}/aggregationtasks/${task.taskId}/result` });
    expect(task.work).toBeGreaterThanOrEqual(ASYNC_WORK_MIN);
    // Asked again while its task waits or runs: the same task, not a second computation.
    const joined = await derrick.call(`${BASE}/prospectanalysisaggregation/${id}`);
    if (joined.status === 202) expect((await json(joined)).taskId).toBe(task.taskId);
    const done = await settled(derrick, accepted.headers.get("location")!);
    expect(done).toMatchObject({ state: "succeeded", startedAt: expect.any(String), completedAt: expect.any(String) });
    expect(Date.parse(done.expiresAt) - Date.parse(done.completedAt)).toBe(RESULT_TTL_MS);
    const result = await derrick.call(done.result);
    expect(result.status).toBe(200);
    const bytes = new Uint8Array(await result.arrayBuffer());
    const body = JSON.parse(new TextDecoder().decode(bytes));
    expect(body).toMatchObject({ prospectAnalysisId: id, simulation: { trials: 1_000_000, seed: 7 } });
    expect(body.resources.products.oil.successCase.p90).toBeLessThan(body.resources.products.oil.successCase.p10);
    // The task cached what it computed: the next read is a hit, the same bytes.
    const again = await derrick.call(`${BASE}/prospectanalysisaggregation/${id}`);
    expect(again.status).toBe(200);
    expect(again.headers.get("x-derrick-cache")).toBe("hit");
    expect(new Uint8Array(await again.arrayBuffer())).toEqual(bytes);
  }, 90_000);

  it("a scenario aggregation past the bound is a task too, and its tree comes in its result; an everyday one answers 200 at once", async ({
    derrick,
  }) => {
    const id = await largeProspect(derrick, "wide");
    const scenario = { scenarioId: "a", name: "A", probability: 1, prospectAnalysisId: id };
    await put(derrick, "multiplescenarioanalyses", "msa-wide", {
      prospectId: "p-wide",
      scenarios: [scenario],
      simulation: { trials: 1_000_000, seed: 1 },
    });
    const accepted = await derrick.call(`${BASE}/prospectmultiplescenarioanalysisaggregation/msa-wide`);
    expect(accepted.status).toBe(202);
    const done = await settled(derrick, accepted.headers.get("location")!);
    expect(done.state).toBe("succeeded");
    const body = await json(await derrick.call(done.result));
    expect(body.outcomeTree.nodes.length).toBeGreaterThan(2 ** 15);
    await put(derrick, "multiplescenarioanalyses", "msa-small", {
      prospectId: "p-wide",
      scenarios: [scenario],
      simulation: { trials: 10_000, seed: 1 },
    });
    expect((await derrick.call(`${BASE}/prospectmultiplescenarioanalysisaggregation/msa-small`)).status).toBe(200);
  }, 90_000);

  it("tasks are read in their partition only; an unknown task is 404 and an id that is not a token 400", async ({ derrick }) => {
    const id = await largeProspect(derrick, "part");
    const accepted = await derrick.call(`${BASE}/prospectanalysisaggregation/${id}`);
    const location = accepted.headers.get("location")!;
    expect((await derrick.call(location, { partition: "other" })).status).toBe(404);
    expect((await derrick.call(`${BASE}/aggregationtasks/atk_none`)).status).toBe(404);
    expect((await derrick.call(`${BASE}/aggregationtasks/atk_none/result`)).status).toBe(404);
    const bad = await derrick.call(`${BASE}/aggregationtasks/a.b`);
    expect(bad.status).toBe(400);
    await settled(derrick, location);
  }, 90_000);

  it("metrics - derrick_reporting_cache_total counts each aggregation read by result: a computed one as a miss, a cached one as a hit", async ({
    derrick,
  }) => {
    await put(derrick, "segmentanalyses", "m-s", segment("M", 0.5, 10, 90));
    await put(derrick, "prospectanalyses", "pa-m", prospectAnalysis("p-m", "M", ["m-s"]));
    const [hits, misses] = [await cacheCount(derrick, "hit"), await cacheCount(derrick, "miss")];
    expect((await derrick.call(`${BASE}/prospectanalysisaggregation/pa-m`)).headers.get("x-derrick-cache")).toBe("miss");
    expect((await derrick.call(`${BASE}/prospectanalysisaggregation/pa-m`)).headers.get("x-derrick-cache")).toBe("hit");
    expect((await derrick.call(`${BASE}/prospectanalysisaggregation/pa-m/details`)).headers.get("x-derrick-cache")).toBe("miss");
    expect(await cacheCount(derrick, "hit")).toBe(hits + 1);
    expect(await cacheCount(derrick, "miss")).toBe(misses + 2);
  });
});

describe("reporting aggregation tasks (store and runner)", () => {
  /** Tasks over the derrick's buckets whose runs wait for `release`, with a clock the test moves. */
  const tasksOver = async (nc: NatsConnection, run: (task: TaskRecord) => Promise<Uint8Array>) => {
    const kvm = new Kvm(nc);
    const clock = { now: Date.now() };
    const tasks = new AggregationTasks(
      await kvm.open(TASK_BUCKETS.tasks),
      await kvm.open(TASK_BUCKETS.results),
      run,
      createLogger("silent"),
      {
        now: () => new Date(clock.now),
        maxValueBytes: () => 5,
      },
    );
    return { tasks, clock };
  };

  it("a result is 409 while its task runs, then the bytes the run gave (stored in chunks), and 404 result-expired 60 s after completion", async ({
    derrick,
    nc,
  }) => {
    void derrick;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const { tasks, clock } = await tasksOver(nc, async () => {
      await released;
      return new TextEncoder().encode('{"answer":"forty-two"}');
    });
    const task = await tasks.accept("opendes", "prospect", "pa-x", { id: "pa-x" }, ASYNC_WORK_MIN);
    const early = await tasks.result("opendes", task.taskId).catch((error) => error);
    expect(early).toMatchObject({ status: 409, type: expect.stringContaining("task-not-complete"), extensions: { taskId: task.taskId } });
    expect(early.headers.Location).toBe(`/assessments/v1/aggregationtasks/${task.taskId}`);
    release();
    await tasks.idle();
    const done = await tasks.get("opendes", task.taskId);
    expect(done).toMatchObject({ state: "succeeded", runs: 1, chunks: 5 });
    expect(new TextDecoder().decode((await tasks.result("opendes", task.taskId)).bytes)).toBe('{"answer":"forty-two"}');
    clock.now += RESULT_TTL_MS;
    expect(await tasks.result("opendes", task.taskId).catch((error) => error)).toMatchObject({
      status: 404,
      type: expect.stringContaining("result-expired"),
    });
  });

  it("the same aggregation asked while its task waits joins that task; once it ran, a new one is made", async ({ derrick, nc }) => {
    void derrick;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const { tasks } = await tasksOver(nc, async () => {
      await released;
      return new TextEncoder().encode("{}");
    });
    const first = await tasks.accept("opendes", "scenarios", "msa-j", { id: "msa-j" }, ASYNC_WORK_MIN, "r2.opendes.scenarios.msa-j {}");
    const again = await tasks.accept("opendes", "scenarios", "msa-j", { id: "msa-j" }, ASYNC_WORK_MIN, "r2.opendes.scenarios.msa-j {}");
    const other = await tasks.accept("opendes", "scenarios", "msa-k", { id: "msa-k" }, ASYNC_WORK_MIN, "r2.opendes.scenarios.msa-k {}");
    expect(again.taskId).toBe(first.taskId);
    expect(other.taskId).not.toBe(first.taskId);
    release();
    await tasks.idle();
    const later = await tasks.accept("opendes", "scenarios", "msa-j", { id: "msa-j" }, ASYNC_WORK_MIN, "r2.opendes.scenarios.msa-j {}");
    expect(later.taskId).not.toBe(first.taskId);
    await tasks.idle();
  });

  it("a run that cannot compute fails the task with its reason: the result is 404 naming it", async ({ derrick, nc }) => {
    void derrick;
    const { tasks } = await tasksOver(nc, async () => {
      throw conflict("prospect analysis pa-y enrolls segment analyses that were deleted: y-s");
    });
    const task = await tasks.accept("opendes", "prospect", "pa-y", { id: "pa-y" }, ASYNC_WORK_MIN);
    await tasks.idle();
    expect(await tasks.get("opendes", task.taskId)).toMatchObject({ state: "failed", error: expect.stringContaining("y-s") });
    expect(await tasks.result("opendes", task.taskId).catch((error) => error)).toMatchObject({
      status: 404,
      detail: expect.stringContaining("were deleted: y-s"),
    });
  });

  it("a task its process left unfinished is run again by the first read after TASK_STALE_MS, once", async ({ derrick, nc }) => {
    void derrick;
    const runs: string[] = [];
    // The first process: its runner stops before the task starts (as a process that went away).
    const gone = await tasksOver(nc, async () => new Uint8Array());
    await gone.tasks.stop();
    const task = await gone.tasks.accept("opendes", "scenarios", "msa-z", { id: "msa-z" }, ASYNC_WORK_MIN);
    const { tasks, clock } = await tasksOver(nc, async (t) => {
      runs.push(t.taskId);
      return new TextEncoder().encode("{}");
    });
    expect((await tasks.get("opendes", task.taskId)).state).toBe("queued");
    await tasks.idle();
    expect(runs).toEqual([]);
    clock.now += TASK_STALE_MS;
    await tasks.get("opendes", task.taskId);
    await tasks.idle();
    expect(runs).toEqual([task.taskId]);
    expect(await tasks.get("opendes", task.taskId)).toMatchObject({ state: "succeeded", runs: 1 });
  });
});
