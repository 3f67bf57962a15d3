/**
 * The one cache of the code base under churn: sets of new keys into a full BoundedCache (what a
 * search reply cache, the edge's token and rate-limit tables or the decode worker's analysis cache do
 * under load), against the same sets into a plain Map with no bound, in the same run. Bounded in count.
 */
import { BoundedCache } from "../platform/bounded-cache.ts";
import { report, type LoadResult } from "./lib.ts";

const SETS = Number(process.env.BENCH_CACHE_SETS ?? 1_000_000);

/** Times `sets` calls of `op` (synchronous: ops/s and the mean per operation; no per-call latency). */
function time(name: string, sets: number, op: (i: number) => void): LoadResult {
  const started = performance.now();
  for (let i = 0; i < sets; i++) op(i);
  const seconds = (performance.now() - started) / 1000;
  const meanMs = (seconds * 1000) / sets;
  return { name, count: sets, errors: 0, seconds, opsPerSec: sets / seconds, p50Ms: meanMs, p99Ms: meanMs, maxMs: meanMs };
}

const keys = Array.from({ length: SETS }, (_, i) => `key-${i}`);
const results: LoadResult[] = [];
const ratios: Record<string, number> = {};
for (const max of [1_000, 10_000, 100_000]) {
  const plain = new Map<string, number>();
  const baseline = time(`plain Map set, no bound (${max})`, SETS, (i) => void plain.set(keys[i]!, i));
  const cache = new BoundedCache<string, number>({ max });
  const bounded = time(`BoundedCache set, full at ${max}`, SETS, (i) => void cache.set(keys[i]!, i));
  const lru = new BoundedCache<string, number>({ max });
  const used = time(`BoundedCache get + set, full at ${max}`, SETS, (i) => {
    lru.get(keys[Math.max(0, i - (i % 7))]!);
    lru.set(keys[i]!, i);
  });
  results.push(baseline, bounded, used);
  ratios[`time of a set into a full cache of ${max} / of a plain Map set`] = baseline.opsPerSec / bounded.opsPerSec;
}
const notes = results.map((r) => `${r.name}: ${(r.p50Ms * 1000).toFixed(3)} µs per operation`);
report({
  bench: "bounded-cache",
  results,
  ratios,
  notes: [`${SETS} operations per case, timed as a whole (p50 = p99 = the mean)`, ...notes],
});
