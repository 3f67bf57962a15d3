/**
 * Soak: `npm run soak -- --minutes N [--concurrency C]` holds the chaos suite's mixed load (twin
 * properties, records, assessments, projects, events + webhook deliveries, catalog reads) against a
 * multi-process deployment for N minutes, then reads every accepted write back. Reports throughput,
 * p50/p99, error counts and the RSS of every process at the start (after a warm-up) and the end;
 * exits 1 when a write is lost, a request hung, a 5xx was answered, or a process grew beyond
 * 2× its start + 64 MiB. Results also go to bench/results/soak.json.
 */
import { parseArgs } from "node:util";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { emptyLoad, missingWrites, latencyPercentile, runLoad, startDeployment, undeliveredEvents, writesAccepted } from "./deployment.ts";
import { eventually } from "../harness/index.ts";

const GROWTH_FACTOR = 2;
const GROWTH_SLACK = 64 * 1024 * 1024;

const { values } = parseArgs({ options: { minutes: { type: "string", default: "1" }, concurrency: { type: "string", default: "8" } } });
const minutes = Number(values.minutes);
const concurrency = Number(values.concurrency);
if (!(minutes > 0 && minutes <= 24 * 60) || !(concurrency > 0 && concurrency <= 256)) {
  console.error("usage: npm run soak -- --minutes N (0 < N ≤ 1440) [--concurrency C (≤ 256)]");
  process.exit(2);
}

const mib = (bytes: number) => Math.round(bytes / 1024 / 1024);
const d = await startDeployment();
let exitCode = 0;
try {
  // Warm-up so start-of-run memory includes the JIT, caches and connection pools.
  await runLoad(d, emptyLoad(), { durationMs: 10_000, concurrency });
  const memoryStart = await d.memory();
  const load = emptyLoad();
  const started = Date.now();
  const sliceMs = 30_000;
  while (Date.now() - started < minutes * 60_000) {
    const before = load.requests;
    await runLoad(d, load, { durationMs: Math.min(sliceMs, minutes * 60_000 - (Date.now() - started)), concurrency });
    console.log(
      `  ${((Date.now() - started) / 60_000).toFixed(1)} min: ${Math.round((load.requests - before) / (sliceMs / 1000))} req/s, rss ${JSON.stringify(Object.fromEntries(Object.entries(await d.memory()).map(([k, v]) => [k, mib(v)])))} MiB`,
    );
  }
  const elapsedS = (Date.now() - started) / 1000;
  const memoryEnd = await d.memory();
  await d.waitReady();
  const missing = await missingWrites(d, load);
  await eventually(() => undeliveredEvents(d, load).length === 0, { timeoutMs: 60_000, intervalMs: 500 }).catch(() => undefined);
  const undelivered = undeliveredEvents(d, load);
  const errors = Object.fromEntries(Object.entries(load.statuses).filter(([s]) => !(Number(s) >= 200 && Number(s) < 300)));
  const grown = Object.entries(memoryEnd).filter(([name, end]) => end > (memoryStart[name] ?? 0) * GROWTH_FACTOR + GROWTH_SLACK);
  const result = {
    minutes,
    concurrency,
    requests: load.requests,
    reqPerSec: Math.round(load.requests / elapsedS),
    p50Ms: Math.round(latencyPercentile(load.latenciesMs, 50) * 10) / 10,
    p99Ms: Math.round(latencyPercentile(load.latenciesMs, 99) * 10) / 10,
    writesAccepted: writesAccepted(load),
    writesLost: missing.length + undelivered.length,
    hung: load.hung,
    errors,
    memoryMiB: Object.fromEntries(
      Object.keys(memoryEnd).map((name) => [name, { start: mib(memoryStart[name] ?? 0), end: mib(memoryEnd[name]!) }]),
    ),
    memoryBound: `end ≤ ${GROWTH_FACTOR}× start + ${mib(GROWTH_SLACK)} MiB`,
    memoryExceeded: grown.map(([name]) => name),
  };
  console.log("\nsoak result");
  console.table([
    {
      minutes,
      "req/s": result.reqPerSec,
      "p50 ms": result.p50Ms,
      "p99 ms": result.p99Ms,
      requests: result.requests,
      "writes accepted": result.writesAccepted,
      "writes lost": result.writesLost,
      hung: result.hung,
      errors: JSON.stringify(errors),
    },
  ]);
  console.table(Object.entries(result.memoryMiB).map(([process, m]) => ({ process, "start MiB": m.start, "end MiB": m.end })));
  writeFileSync(join(resolve(import.meta.dirname, "../../bench/results"), "soak.json"), `${JSON.stringify(result, null, 2)}\n`);
  const serverErrors = Object.keys(errors).filter((s) => Number(s) >= 500).length;
  if (result.writesLost || result.hung || serverErrors || grown.length) {
    console.error(
      `soak FAILED: lost ${result.writesLost}, hung ${result.hung}, 5xx kinds ${serverErrors}, grown ${grown.map(([n]) => n).join(",") || "none"}`,
    );
    if (missing.length) console.error(missing.slice(0, 10));
    exitCode = 1;
  }
} finally {
  await d.stop();
}
process.exit(exitCode);
