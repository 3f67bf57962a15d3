/**
 * Content tasks end to end: 1,000 concurrent clients each POST a content request, poll the task
 * until it succeeded and read the content (edge → projects actor → CONTENT_TASKS work queue →
 * content-worker → KV → edge), against the same computation done in-process (computeContent +
 * serialization) in the same run. Everything runs in this one process (load generator included),
 * on one nats-server; numbers are tasks/s and per-task latency.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestNats, startDerrick } from "../test/harness/index.ts";
import { drillingPlanValues, putProject } from "../test/projects/fixtures.ts";
import { catalogFrom, checkValues, computeContent, readCatalogFile, splitUtf8 } from "../actors/projects/index.ts";
import type { Project } from "../subjects/projects.ts";
import { report, runLoad, type LoadResult } from "./lib.ts";

const REQUESTS = Number(process.env.BENCH_CONTENT_REQUESTS ?? 1000);
const CONCURRENCY = Number(process.env.BENCH_CONTENT_CONCURRENCY ?? 1000);
const MAX_MS = 90_000;
const POLL_MS = 50;

const dir = mkdtempSync(join(tmpdir(), "derrick-bench-content-"));
const nats = await startTestNats({ dir: join(dir, "nats") });
const derrick = await startDerrick(nats, {
  actors: ["identity", "projects", "content-worker"],
  dataDir: join(dir, "data"),
  env: { DERRICK_CONTENT_CONCURRENCY: process.env.DERRICK_CONTENT_CONCURRENCY ?? "64" },
});
const results: LoadResult[] = [];
try {
  const values = drillingPlanValues(120);
  if ((await putProject(derrick, "bench", { values })).status !== 201) throw new Error("cannot create the bench project");
  await derrick.token("alpha");

  // Baseline: the worker's computation alone, in-process (same project, same catalog, same output).
  const catalog = catalogFrom(readCatalogFile());
  const project: Project = {
    projectId: "bench",
    name: "bench",
    members: ["alpha"],
    values: checkValues(values, catalog),
    createdAt: "",
    updatedAt: "",
  };
  results.push(
    await runLoad(
      "in-process computeContent + serialize (baseline)",
      async () => {
        const text = JSON.stringify(computeContent(project, catalog["display-items"], "display-items"));
        splitUtf8(text);
      },
      { count: REQUESTS, concurrency: 1, maxMs: MAX_MS, warmup: 50 },
    ),
  );

  let pollRequests = 0;
  const endToEnd = async () => {
    const res = await derrick.call("/v1/projects/bench/display-items/content/requests", { method: "POST", body: "{}" });
    if (res.status !== 202) throw new Error(`request: ${res.status}`);
    const { taskId, contentId } = (await res.json()) as { taskId: string; contentId: string };
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      pollRequests++;
      const task = (await (await derrick.call(`/v2/projects/bench/tasks/${taskId}`)).json()) as { state: string };
      if (task.state === "succeeded") break;
      if (task.state === "failed") throw new Error("task failed");
    }
    const content = await derrick.call(`/v1/projects/bench/display-items/content/${contentId}`);
    if (content.status !== 200) throw new Error(`content: ${content.status}`);
    await content.arrayBuffer();
  };
  results.push(
    await runLoad(`end to end, ${CONCURRENCY} concurrent (request → succeeded → content)`, endToEnd, {
      count: REQUESTS,
      concurrency: CONCURRENCY,
      maxMs: MAX_MS,
      warmup: 20,
    }),
  );
  const [baseline, e2e] = results as [LoadResult, LoadResult];
  report({
    bench: "content",
    results,
    ratios: { "end-to-end tasks/s ÷ in-process computations/s": e2e.opsPerSec / baseline.opsPerSec },
    notes: [
      `${REQUESTS} tasks, ${CONCURRENCY} concurrent clients polling every ${POLL_MS} ms (${pollRequests} task polls in all); one content-worker process with DERRICK_CONTENT_CONCURRENCY=${process.env.DERRICK_CONTENT_CONCURRENCY ?? "64"}`,
      "edge, actors, load generator and baseline share one process and one nats-server (file store)",
      "each task: KV reads/writes of the task (queued, running, succeeded), project read, content write, JetStream publish + ack",
    ],
  });
} finally {
  await derrick.cleanup();
  await nats.cleanup();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
