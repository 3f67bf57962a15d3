/**
 * Webhook delivery: events/s from publish (JetStream, file storage: durability on) to a receiver's
 * 2xx, through dispatcher and deliverer, for one subscription and for 100 subscriptions; then the
 * publish→2xx latency (p50/p99) at a fixed offered 1,000 events/s, measured only once the flood
 * phases' backlog has drained. Baseline in the same run: a raw `fetch` loop to the same receiver (a
 * separate Bun process on loopback) with the concurrency one subscription gets.
 * Targets: ≥ 5,000 deliveries/s, ≥ 30% of the raw loop, p99 < 50 ms at 1,000 events/s.
 * Every phase is bounded in count and time (BENCH_SECONDS caps each flood, drains are capped too).
 * The receiver counts per phase (a tag in the event data) and per distinct (callback path, webhook-id),
 * so stragglers of one phase never count for the next and duplicates are visible.
 * BENCH_PHASES=raw,one,rate,many (default all) runs a subset, e.g. for profiling.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startNatsServer } from "../platform/nats-server.ts";
import { connectNats } from "../platform/nats.ts";
import { createLogger } from "../platform/logger.ts";
import { loadConfig } from "../config/index.ts";
import { boot } from "../bin/boot.ts";
import { subjects } from "../subjects/index.ts";
import { cpuSeconds, percentile, report, runLoad, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const EVENTS_ONE = Number(process.env.BENCH_EVENTS ?? 30_000);
const EVENTS_MANY = Math.ceil(EVENTS_ONE / 60);
const FANOUT = 100;
const PER_SUBSCRIPTION = 32;
const RATE = 1000;
const RATE_SECONDS = 5;
const DRAIN_MS = 60_000;
const PHASES = new Set((process.env.BENCH_PHASES ?? "raw,one,rate,many").split(","));

const RECEIVER = `
const phases = new Map();
const phase = (p) => { let s = phases.get(p); if (!s) phases.set(p, (s = { count: 0, ids: new Set(), lat: [] })); return s; };
const server = Bun.serve({ hostname: "127.0.0.1", port: 0, async fetch(req) {
  const url = new URL(req.url);
  if (url.pathname === "/stats") {
    const s = phase(url.searchParams.get("phase") ?? "");
    return Response.json({ count: s.count, unique: s.ids.size, latencies: url.searchParams.has("latencies") ? s.lat.slice().sort((a, b) => a - b) : [] });
  }
  const body = await req.json();
  const s = phase(String(body?.data?.p ?? ""));
  s.count++;
  s.ids.add(url.pathname + " " + (req.headers.get("webhook-id") ?? String(s.count)));
  const t = body?.data?.t; if (typeof t === "number") s.lat.push(Date.now() - t);
  return new Response(null, { status: 204 });
}});
console.log(server.port);
`;

const dir = mkdtempSync(join(tmpdir(), "derrick-bench-delivery-"));
const nats = await startNatsServer({ dir: join(dir, "nats"), port: -1 });
const receiverProc = Bun.spawn([process.execPath, "-e", RECEIVER], { stdout: "pipe", stderr: "inherit" });
const subject = subjects.events("opendes", "PlanShared");
// The flood phases' events come from a separate process, as from the services that emit them.
const publisherProc = Bun.spawn([process.execPath, new URL("./peers/event-publisher.ts", import.meta.url).pathname, nats.url, subject], {
  stdin: "pipe",
  stdout: "pipe",
  stderr: "inherit",
});
const publisherLines = lines(publisherProc.stdout);

/** The lines a child process prints, one `next()` per line. */
async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffered.indexOf("\n")) >= 0) {
      yield buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
    }
  }
}

/** The publisher's next line, or an error after `ms` (the bench never waits unbounded). */
async function publisherSays(ms: number): Promise<Record<string, unknown>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`event publisher silent for ${ms} ms`)), ms)),
  );
  try {
    const line = await Promise.race([publisherLines.next(), timeout]);
    if (line.done) throw new Error("event publisher exited");
    return JSON.parse(line.value) as Record<string, unknown>;
  } finally {
    clearTimeout(timer);
  }
}
const results: LoadResult[] = [];
const notes: string[] = [];
const ratios: Record<string, number> = {};
const pids = { "derrick+bench": process.pid, "nats-server": nats.process.pid!, receiver: receiverProc.pid, publisher: publisherProc.pid };
try {
  await publisherSays(10_000);
  const reader = receiverProc.stdout.getReader();
  const port = Number(new TextDecoder().decode((await reader.read()).value).trim());
  const receiverUrl = `http://127.0.0.1:${port}`;
  const stats = async (phase: string, latencies = false) =>
    (await (await fetch(`${receiverUrl}/stats?phase=${phase}${latencies ? "&latencies" : ""}`)).json()) as {
      count: number;
      unique: number;
      latencies: number[];
    };

  let delivererStats: (() => Promise<unknown>) | undefined;
  let jsmOf: Awaited<ReturnType<typeof jetstreamManager>> | undefined;
  /**
   * Runs `work`, noting each process's CPU share (of one core) while it ran and its CPU time per
   * operation: the machine is shared, so throughput is noisy, CPU per delivery much less so.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: some measured steps return nothing
  const withCpu = async <T extends { count: number } | void>(name: string, work: () => Promise<T>): Promise<T> => {
    const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    const started = performance.now();
    const result = await work();
    const wall = (performance.now() - started) / 1000;
    const count = result ? result.count : 0;
    const shares = Object.entries(pids).map(([k, pid]) => {
      const used = cpuSeconds(pid) - before[k]!;
      return `${k} ${Math.round((used / wall) * 100)}%${count ? ` (${Math.round((used / count) * 1e6)} µs/op)` : ""}`;
    });
    notes.push(`cpu during "${name}" (100% = one core): ${shares.join(", ")}`);
    if (delivererStats)
      notes.push(
        `counters after "${name}": ${JSON.stringify(await delivererStats())}; ATTEMPTS messages written so far: ${(await jsmOf?.streams.info("ATTEMPTS"))?.state.last_seq}`,
      );
    return result;
  };

  // Baseline: a raw fetch loop, the same body size, the same concurrency as one subscription gets.
  const sampleBody = JSON.stringify({
    specversion: "1.0",
    id: "x",
    source: "/partitions/opendes",
    type: "PlanShared",
    time: new Date().toISOString(),
    datacontenttype: "application/json",
    partitionid: "opendes",
    data: { p: "raw", t: 0 },
  });
  const raw = await withCpu("raw fetch loop", () =>
    runLoad(
      "raw fetch loop → receiver",
      () =>
        fetch(receiverUrl, { method: "POST", body: sampleBody, headers: { "content-type": "application/json" } }).then((r) =>
          r.arrayBuffer(),
        ),
      {
        count: EVENTS_ONE,
        concurrency: PER_SUBSCRIPTION,
        maxMs: SECONDS * 1000,
      },
    ),
  );
  if (PHASES.has("raw")) results.push(raw);

  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_DATA_DIR: join(dir, "data"),
    DERRICK_LOG_LEVEL: "error",
    DERRICK_CALLBACK_ALLOW_HTTP: "true",
    DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32",
    DERRICK_DELIVERY_PER_SUBSCRIPTION: String(PER_SUBSCRIPTION),
    ACTORS: "notifications,dispatcher,deliverer",
  });
  const derrick = await boot({
    cfg,
    natsUrl: nats.url,
    log: createLogger("error"),
    edge: false,
    actors: cfg.actors,
    processMetrics: false,
  });
  const publisher = await connectNats(nats.url, "bench-publisher", createLogger("error"));
  const js = jetstream(publisher);
  const jsm = await jetstreamManager(publisher);
  jsmOf = jsm;
  delivererStats = async () => ({
    deliverer: (await publisher.request(subjects.notifications["deliverer.stats"](), "{}")).json(),
    dispatcher: (await publisher.request(subjects.notifications["dispatcher.stats"](), "{}")).json(),
  });
  const subscribeAs = (clientId: string) =>
    derrick.bus.request(
      subjects.notifications["subscription.upsert"](),
      { type: "PlanShared", subscription: { subscriber: "bench", callback_uri: `${receiverUrl}/hook/${clientId}` } },
      {
        partition: "opendes",
        principal: { clientId, subject: clientId, groups: [], kind: "service" },
      },
    );
  const event = (phase: string, n: number) => JSON.stringify({ data: { p: phase, n, t: Date.now() } });

  /** Waits (bounded) until `phase` got `expected` distinct deliveries and no job waits in DELIVERIES. */
  const drain = async (phase: string, expected: number, deadline = performance.now() + DRAIN_MS): Promise<void> => {
    while (performance.now() < deadline) {
      const got = await stats(phase);
      const queued = (await jsm.streams.info("DELIVERIES")).state.messages;
      const events = await jsm.consumers.info("EVENTS", "dispatcher");
      if (got.unique >= expected && queued === 0 && events.num_pending === 0 && events.num_ack_pending === 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    notes.push(`phase ${phase}: backlog not drained within ${DRAIN_MS / 1000} s`);
  };

  /** Publishes `events` (bounded in flight) and waits until `expected` deliveries arrived or time ran out. */
  const flood = async (name: string, phase: string, events: number, expected: number): Promise<LoadResult> => {
    const started = performance.now();
    const deadline = started + SECONDS * 1000;
    publisherProc.stdin.write(`${phase} ${events} 256\n`);
    publisherProc.stdin.flush();
    await publisherSays(SECONDS * 1000);
    const published = (performance.now() - started) / 1000;
    let got = await stats(phase);
    const atPublished = got.unique;
    // Deliveries per half second, to see where the pipeline waits (during or after publishing).
    const timeline: number[] = [];
    let mark = performance.now() + 500;
    let last = atPublished;
    while (got.unique < expected && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      got = await stats(phase);
      if (performance.now() >= mark) {
        timeline.push(got.unique - last);
        last = got.unique;
        mark += 500;
      }
    }
    const seconds = (performance.now() - started) / 1000;
    got = await stats(phase, true);
    const result = {
      name,
      count: got.unique,
      errors: expected - got.unique,
      seconds,
      opsPerSec: got.unique / seconds,
      p50Ms: percentile(got.latencies, 50),
      p99Ms: percentile(got.latencies, 99),
      maxMs: got.latencies.at(-1) ?? Number.NaN,
    };
    notes.push(
      `${name}: ${events} events published in ${published.toFixed(2)} s (${atPublished} delivered by then), last delivery after ${seconds.toFixed(2)} s; deliveries per 0.5 s after publishing: ${timeline.join(" ")}`,
    );
    if (got.count > got.unique) notes.push(`${name}: ${got.count - got.unique} duplicate deliveries (at least once)`);
    results.push(result);
    return result;
  };

  await subscribeAs("bench-0");
  await flood("warm-up", "warm", 2000, 2000);
  results.pop();
  await drain("warm", 2000);

  let one: LoadResult | undefined;
  if (PHASES.has("one")) {
    one = await withCpu("1 subscription", () => flood("derrick publish → 2xx, 1 subscription", "one", EVENTS_ONE, EVENTS_ONE));
    ratios["1 subscription / raw fetch loop"] = one.opsPerSec / raw.opsPerSec;
    await drain("one", EVENTS_ONE);
  }

  // Fixed offered load on an idle system, one subscription: latency from publish to the receiver's 2xx.
  let p99AtRate = Number.NaN;
  if (PHASES.has("rate")) {
    const total = RATE * RATE_SECONDS;
    await withCpu(`${RATE} events/s`, async () => {
      const t0 = performance.now();
      for (let i = 0; i < total; i++) {
        const due = t0 + (i * 1000) / RATE;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        void js.publish(subject, event("rate", i));
      }
    });
    await drain("rate", total, performance.now() + 10_000);
    const got = await stats("rate", true);
    p99AtRate = percentile(got.latencies, 99);
    results.push({
      name: `derrick at ${RATE} events/s, 1 subscription`,
      count: got.unique,
      errors: total - got.unique,
      seconds: RATE_SECONDS,
      opsPerSec: got.unique / RATE_SECONDS,
      p50Ms: percentile(got.latencies, 50),
      p99Ms: p99AtRate,
      maxMs: got.latencies.at(-1) ?? Number.NaN,
    });
  }

  let many: LoadResult | undefined;
  if (PHASES.has("many")) {
    for (let i = 1; i < FANOUT; i++) await subscribeAs(`bench-${i}`);
    many = await withCpu(`${FANOUT} subscriptions`, () =>
      flood(`derrick publish → 2xx, ${FANOUT} subscriptions`, "many", EVENTS_MANY, EVENTS_MANY * FANOUT),
    );
    ratios[`${FANOUT} subscriptions / raw fetch loop`] = many.opsPerSec / raw.opsPerSec;
    await drain("many", EVENTS_MANY * FANOUT);
  }

  const best = Math.max(one?.opsPerSec ?? 0, many?.opsPerSec ?? 0);
  notes.push(
    `receiver: separate Bun process on loopback; per-subscription concurrency ${PER_SUBSCRIPTION}; EVENTS/DELIVERIES/ATTEMPTS on file storage`,
  );
  notes.push(
    "throughput counts distinct (subscription, webhook-id) pairs from the first publish to the last 2xx at the receiver (includes draining)",
  );
  report({
    bench: "delivery",
    results,
    ratios,
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
  publisherProc.kill();
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
