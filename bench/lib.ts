/**
 * Shared bench plumbing: a bounded closed-loop load runner, percentiles, and one report format
 * (a table for people, JSON in bench/results/ for machines). Every bench measures its real path and
 * an in-run baseline, and prints the ratio: machines here are shared and noisy.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";

export type LoadResult = {
  name: string;
  count: number;
  errors: number;
  seconds: number;
  opsPerSec: number;
  p50Ms: number;
  p95Ms?: number;
  p99Ms: number;
  maxMs: number;
};

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */
export function cpuSeconds(pid: number): number {
  const cost = processCost(pid);
  return cost ? (cost.userMs + cost.sysMs) / 1000 : Number.NaN;
}

/** USER_HZ, the unit of /proc's CPU times: 100 on x86-64 and arm64 Linux (getconf CLK_TCK). */
const CLOCK_TICKS = 100;

/** A process's CPU time (ms) and page faults so far, from /proc (Linux); undefined where it cannot be read. */
export function processCost(pid: number): { userMs: number; sysMs: number; minorFaults: number; majorFaults: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The fields after the command's closing parenthesis (the command may hold spaces and parentheses); proc(5) numbers
  // them from 3: minflt is its field 10, majflt 12, utime 14, stime 15.
  const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
  const tickMs = 1000 / CLOCK_TICKS;
  const cost = { minorFaults: Number(f[7]), majorFaults: Number(f[9]), userMs: Number(f[11]) * tickMs, sysMs: Number(f[12]) * tickMs };
  return Object.values(cost).every(Number.isFinite) ? cost : undefined;
}

/** A memory figure of a process (VmRSS, or VmHWM: its peak so far) in MB, from /proc (Linux). */
export function memoryMb(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const line = readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${field}:`));
    return line ? Number(line.split(/\s+/)[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export function percentile(sortedMs: readonly number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  const index = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[index]!;
}

/**
 * Runs `op` with `concurrency` workers until `count` operations or `maxMs` elapse (both bounds always
 * apply), after `warmup` untimed operations.
 */
export async function runLoad(
  name: string,
  op: (i: number) => unknown | Promise<unknown>,
  options: { count: number; concurrency: number; maxMs: number; warmup?: number },
): Promise<LoadResult> {
  for (let i = 0; i < (options.warmup ?? Math.min(200, options.count / 10)); i++) await Promise.resolve(op(i)).catch(() => undefined);
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  const started = performance.now();
  const deadline = started + options.maxMs;
  const worker = async () => {
    while (next < options.count && performance.now() < deadline) {
      const i = next++;
      const t0 = performance.now();
      try {
        await op(i);
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    name,
    count: latencies.length,
    errors,
    seconds,
    opsPerSec: latencies.length / seconds,
    p50Ms: percentile(latencies, 50),
    p95Ms: percentile(latencies, 95),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies.at(-1) ?? Number.NaN,
  };
}

export type BenchReport = {
  bench: string;
  machine: { cores: number; runtime: string };
  results: LoadResult[];
  /** name → value, e.g. "edge / direct throughput": 0.62 */
  ratios: Record<string, number>;
  targets?: Record<string, { value: number; target: string; met: boolean }>;
  notes?: string[];
};

export function report(r: Omit<BenchReport, "machine">): BenchReport {
  const full: BenchReport = {
    ...r,
    machine: {
      cores: availableParallelism(),
      runtime: typeof Bun !== "undefined" ? `bun ${Bun.version}` : `node ${process.versions.node}`,
    },
  };
  const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : "-");
  console.log(`\n== ${r.bench} ==`);
  console.table(
    r.results.map((x) => ({
      case: x.name,
      ops: x.count,
      errors: x.errors,
      "ops/s": fmt(x.opsPerSec, 0),
      "p50 ms": fmt(x.p50Ms, 3),
      "p99 ms": fmt(x.p99Ms, 3),
      "max ms": fmt(x.maxMs, 1),
    })),
  );
  for (const [name, value] of Object.entries(r.ratios)) console.log(`ratio  ${name}: ${fmt(value, 3)}`);
  for (const [name, t] of Object.entries(r.targets ?? {}))
    console.log(`target ${name}: ${fmt(t.value, 3)} (${t.target}) ${t.met ? "MET" : "NOT MET"}`);
  for (const note of r.notes ?? []) console.log(`note   ${note}`);
  // Failed operations finish fast and count in ops/s: a rate made of them measures nothing.
  for (const x of r.results.filter((x) => x.errors > 0))
    console.log(`WARN   ${x.name}: ${x.errors} of ${x.count} operations failed; its rates and latencies include them`);
  const dir = fileURLToPath(new URL("./results/", import.meta.url));
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}${r.bench}.json`, JSON.stringify(full, null, 2));
  return full;
}
