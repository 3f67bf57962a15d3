/**
 * Webhook delivery: events/s from publish (JetStream, file storage: durability on) to a receiver's
 * 2xx, through dispatcher and deliverer, for one subscription and for 100 subscriptions; then the
 * publish→delivery latency (p50/p99) at a fixed 1,000 events/s. Baseline in the same run: a raw
 * `fetch` loop to the same receiver (a separate Bun process on loopback) with the same concurrency.
 * Targets (issue 3): ≥ 5,000 deliveries/s, ≥ 30% of the raw loop, p99 < 50 ms at 1,000 events/s.
 * Every phase is bounded in count and time (BENCH_SECONDS caps each).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { startNatsServer } from "../platform/nats-server.ts";
import { connectNats } from "../platform/nats.ts";
import { createLogger } from "../platform/logger.ts";
import { loadConfig } from "../config/index.ts";
import { boot } from "../bin/boot.ts";
import { subjects } from "../subjects/index.ts";
import { percentile, report, runLoad, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const EVENTS_ONE = Number(process.env.BENCH_EVENTS ?? 30_000);
const EVENTS_MANY = Math.ceil(EVENTS_ONE / 60);
const FANOUT = 100;
const PER_SUBSCRIPTION = 32;
const RATE = 1000;
const RATE_SECONDS = 5;

const RECEIVER = `
let count = 0; let lat = [];
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, async fetch(req) {
  const url = new URL(req.url);
  if (url.pathname === "/stats") { const s = lat.slice().sort((a, b) => a - b); return Response.json({ count, latencies: s }); }
  if (url.pathname === "/reset") { count = 0; lat = []; return new Response("ok"); }
  const body = await req.json();
  count++;
  const t = body?.data?.t; if (typeof t === "number") lat.push(Date.now() - t);
  return new Response(null, { status: 204 });
}});
console.log(server.port);
`;

const dir = mkdtempSync(join(tmpdir(), "derrick-bench-delivery-"));
const nats = await startNatsServer({ dir: join(dir, "nats"), port: -1 });
const receiverProc = Bun.spawn([process.execPath, "-e", RECEIVER], { stdout: "pipe", stderr: "inherit" });
const results: LoadResult[] = [];
const notes: string[] = [];
let p99AtRate = Number.NaN;
try {
  const reader = receiverProc.stdout.getReader();
  const port = Number(new TextDecoder().decode((await reader.read()).value).trim());
  const receiverUrl = `http://127.0.0.1:${port}`;
  const stats = async () => (await (await fetch(`${receiverUrl}/stats`)).json()) as { count: number; latencies: number[] };
  const reset = () => fetch(`${receiverUrl}/reset`);

  // Baseline: a raw fetch loop, the same body size, the same concurrency as one subscription gets.
  const sampleBody = JSON.stringify({ specversion: "1.0", id: "x", source: "/partitions/opendes", type: "PlanShared", time: new Date().toISOString(), datacontenttype: "application/json", partitionid: "opendes", data: { n: 0 } });
  const raw = await runLoad("raw fetch loop → receiver", () => fetch(receiverUrl, { method: "POST", body: sampleBody, headers: { "content-type": "application/json" } }).then((r) => r.arrayBuffer()), {
    count: EVENTS_ONE,
    concurrency: PER_SUBSCRIPTION,
    maxMs: SECONDS * 1000,
  });
  results.push(raw);

  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_DATA_DIR: join(dir, "data"),
    DERRICK_LOG_LEVEL: "error",
    DERRICK_CALLBACK_ALLOW_HTTP: "true",
    DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32",
    DERRICK_DELIVERY_PER_SUBSCRIPTION: String(PER_SUBSCRIPTION),
    ACTORS: "notifications,dispatcher,deliverer",
  });
  const derrick = await boot({ cfg, natsUrl: nats.url, log: createLogger("error"), edge: false, actors: cfg.actors, processMetrics: false });
  const publisher = await connectNats(nats.url, "bench-publisher", createLogger("error"));
  const js = jetstream(publisher);
  const subject = subjects.events("opendes", "PlanShared");
  const subscribeAs = (clientId: string) =>
    derrick.bus.request(subjects.notifications["subscription.upsert"](), { type: "PlanShared", subscription: { subscriber: "bench", callback_uri: `${receiverUrl}/hook` } }, {
      partition: "opendes",
      principal: { clientId, subject: clientId, groups: [], kind: "service" },
    });

  /** Publishes `events` (bounded in flight) and waits until `expected` deliveries arrived or time ran out. */
  const pump = async (name: string, events: number, expected: number): Promise<LoadResult> => {
    await reset();
    const started = performance.now();
    const deadline = started + SECONDS * 1000;
    const inFlight = new Set<Promise<unknown>>();
    for (let i = 0; i < events && performance.now() < deadline; i++) {
      const p = js.publish(subject, JSON.stringify({ data: { n: i, t: Date.now() } })).finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= 256) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    let got = await stats();
    while (got.count < expected && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      got = await stats();
    }
    const seconds = (performance.now() - started) / 1000;
    const result = { name, count: got.count, errors: expected - got.count, seconds, opsPerSec: got.count / seconds, p50Ms: percentile(got.latencies, 50), p99Ms: percentile(got.latencies, 99), maxMs: got.latencies.at(-1) ?? Number.NaN };
    results.push(result);
    return result;
  };

  await subscribeAs("bench-0");
  await pump("warm-up (1 subscription)", 2000, 2000);
  results.pop();
  const one = await pump("derrick publish → 2xx, 1 subscription", EVENTS_ONE, EVENTS_ONE);

  // Fixed offered load, one subscription: latency measured at the receiver from the publish time.
  await reset();
  const total = RATE * RATE_SECONDS;
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    void js.publish(subject, JSON.stringify({ data: { n: i, t: Date.now() } }));
  }
  const rateDeadline = performance.now() + 10_000;
  let rateStats = await stats();
  while (rateStats.count < total && performance.now() < rateDeadline) {
    await new Promise((r) => setTimeout(r, 20));
    rateStats = await stats();
  }
  p99AtRate = percentile(rateStats.latencies, 99);
  results.push({ name: `derrick at ${RATE} events/s, 1 subscription`, count: rateStats.count, errors: total - rateStats.count, seconds: RATE_SECONDS, opsPerSec: rateStats.count / RATE_SECONDS, p50Ms: percentile(rateStats.latencies, 50), p99Ms: p99AtRate, maxMs: rateStats.latencies.at(-1) ?? Number.NaN });

  for (let i = 1; i < FANOUT; i++) await subscribeAs(`bench-${i}`);
  const many = await pump(`derrick publish → 2xx, ${FANOUT} subscriptions`, EVENTS_MANY, EVENTS_MANY * FANOUT);

  const best = Math.max(one.opsPerSec, many.opsPerSec);
  notes.push(`receiver: separate Bun process on loopback; per-subscription concurrency ${PER_SUBSCRIPTION}; EVENTS/DELIVERIES/ATTEMPTS on file storage`);
  notes.push("throughput counts from the first publish to the last 2xx at the receiver (includes draining)");
  report({
    bench: "delivery",
    results,
    ratios: { "1 subscription / raw fetch loop": one.opsPerSec / raw.opsPerSec, [`${FANOUT} subscriptions / raw fetch loop`]: many.opsPerSec / raw.opsPerSec },
    targets: {
      "deliveries/s (best case)": { value: best, target: "≥ 5000", met: best >= 5000 },
      "share of raw fetch loop (best case)": { value: best / raw.opsPerSec, target: "≥ 0.30", met: best / raw.opsPerSec >= 0.3 },
      [`p99 ms at ${RATE} events/s`]: { value: p99AtRate, target: "< 50", met: p99AtRate < 50 },
    },
    notes,
  });
  await publisher.close();
  await derrick.stop();
} finally {
  receiverProc.kill();
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
