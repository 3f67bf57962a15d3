/**
 * Read routes against the one-hop floor: each route's throughput and p99 under the same closed-loop
 * load (wrk, 32 connections) as `POST /v1/system/echo`, in the same run, on one derrick process with
 * every actor (what `npm start` runs). Targets: throughput ≥ 0.8× echo, p99 ≤ 1.5× echo's p99.
 * Each route is measured in ROUNDS turns, each beside a turn of echo just before it, and compared with
 * those echo turns only: a shared machine's load drifts over a run, and a ratio of two measurements
 * minutes apart tells the drift more than the route. The targets hold the median round's ratios: a
 * neighbour's burst in one turn, on either side, moves a pooled ratio by ~0.05 on a 2-core machine.
 * The client takes gzip, as browsers, curl --compressed and Python's requests (the OSDU Python SDK's HTTP client) do;
 * the large replies are measured once more with a client that does not, for the record (no target: that case is bound
 * by the reply's bytes, docs/operations.md#memory-views).
 * Each route first runs BENCH_WARMUP_SECONDS unmeasured, as echo has before it.
 * Knobs: BENCH_SECONDS (10 per route, split over the rounds), BENCH_ROUNDS (5), BENCH_CONNECTIONS (32),
 * BENCH_READS (comma list of case names to run), BENCH_WARMUP_SECONDS (3).
 */
import { clientToken, startDerrick, startTestNats, testClient } from "../test/harness/index.ts";
import { seedDemo } from "../actors/reporting/index.ts";
import { httpLoad, ID_TOKEN, LOAD_GENERATOR } from "./load.ts";
import { report, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ONLY = process.env.BENCH_READS?.split(",");
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const PARTITION = "opendes";

// One client holding every group these reads and their set-up need.
const CLIENT = testClient("bench", [
  "users.datalake.admins",
  "users.datalake.editors",
  "users.data.root",
  "twins.writers",
  "projects.admins",
  "assessments.editors",
  "notifications.publishers",
]);
const nats = await startTestNats();
const derrick = await startDerrick(nats, {
  env: {
    DERRICK_CLIENTS: JSON.stringify([CLIENT]),
    DERRICK_CALLBACK_ALLOW_HTTP: "true",
    DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.0/8",
    DERRICK_LOG_LEVEL: "warn",
  },
});
const results: LoadResult[] = [];
const ratios: Record<string, number> = {};
const targets: Record<string, { value: number; target: string; met: boolean }> = {};
const roundNotes: string[] = [];
try {
  const headers = {
    authorization: `Bearer ${await clientToken(derrick.url, CLIENT)}`,
    appkey: CLIENT.appkey,
    "slb-partition-id": PARTITION,
    "data-partition-id": PARTITION,
    "accept-encoding": "gzip, deflate",
  };
  const { "accept-encoding": _, ...identityHeaders } = headers;
  const ok = async (path: string, init: { method?: string; body?: string } = {}) => {
    const r = await fetch(`${derrick.url}${path}`, { ...init, headers: { ...headers, "content-type": "application/json" } });
    if (r.status >= 300) throw new Error(`${init.method ?? "GET"} ${path}: ${r.status} ${await r.text()}`);
    return r.json() as Promise<Record<string, unknown>>;
  };

  // One of each thing read, written the way a client would.
  await ok("/v1/notifications/subscriptions/types/PublishData", {
    method: "POST",
    body: JSON.stringify({ subscriber: "bench", callback_uri: "http://127.0.0.1:9/hook" }),
  });
  await ok("/api/twin-properties/v1/acme/prod/rig-7/twin-properties", {
    method: "PUT",
    body: JSON.stringify({
      group: "setpoints",
      twins: [
        { name: "rate", value: "42" },
        { name: "mode", value: "auto" },
      ],
    }),
  });
  await ok("/v1/projects/plan-a", {
    method: "PUT",
    body: JSON.stringify({ name: "F-21 A plan", members: ["bench"], values: { displayItems: { "well-name": "NO 15/9-F-21 A" } } }),
  });
  // A result lives 60 s after its task completes: each measurement of it asks for a new one first.
  const freshContent = async () => {
    const task = await ok("/v1/projects/plan-a/display-items/content/requests", { method: "POST", body: '{"ids":["well-name"]}' });
    for (let i = 0; i < 100; i++) {
      if (JSON.stringify(await ok(`/v2/projects/plan-a/tasks/${task.taskId}`)).includes("succeeded")) break;
      await Bun.sleep(100);
    }
    return `/v1/projects/plan-a/display-items/content/${task.contentId}`;
  };
  await seedDemo(derrick.bus, PARTITION);
  await ok("/assessments/v1/prospectanalysisaggregation/pa-alpha-oil");
  await ok("/api/storage/v2/records", {
    method: "PUT",
    body: JSON.stringify([
      {
        kind: "osdu:wks:master-data--Well:1.0.0",
        acl: { viewers: ["data.default.viewers@opendes.example.com"], owners: ["data.default.owners@opendes.example.com"] },
        legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
        data: { FacilityName: "Volve F-21" },
      },
    ]),
  });

  /** `prepare` gives the path just before the route is measured (what it reads may not live the whole run). */
  type Case = {
    name: string;
    path: string;
    body?: string;
    prepare?: () => Promise<string>;
    distinctBodies?: boolean;
    /** Asked by a client that does not take gzip: reported, not held to the targets. */
    identity?: boolean;
  };
  const cases: Case[] = [
    { name: "POST /v1/system/echo (floor)", path: "/v1/system/echo", body: '{"well":"F-12","depth":3521.4}' },
    { name: "GET /v1/notifications/subscriptions", path: "/v1/notifications/subscriptions" },
    { name: "GET twin properties, one group", path: "/api/twin-properties/v1/acme/prod/rig-7/twin-properties?group=setpoints" },
    { name: "GET /v1/projects/{id}", path: "/v1/projects/plan-a" },
    { name: "GET /v1/display-items?limit=20", path: "/v1/display-items?limit=20" },
    { name: "GET content result", path: "", prepare: freshContent },
    { name: "GET prospect aggregation (cached)", path: "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil" },
    {
      name: "POST /api/search/v2/query (text, limit 10)",
      path: "/api/search/v2/query",
      body: '{"kind":"*:*:*:*","query":"volve","limit":10}',
    },
    { name: "GET /v1/display-items?limit=20, no gzip", path: "/v1/display-items?limit=20", identity: true },
    {
      name: "GET prospect aggregation (cached), no gzip",
      path: "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil",
      identity: true,
    },
    // The same query, each request's body made unique by a field search ignores: what the reply cache never answers.
    {
      name: "POST /api/search/v2/query (text, limit 10, each body new)",
      path: "/api/search/v2/query",
      body: `{"kind":"*:*:*:*","query":"volve","limit":10,"benchRequest":${ID_TOKEN}}`,
      distinctBodies: true,
    },
  ];
  const [floor, ...routes] = cases as [Case, ...Case[]];
  const url = (c: Case) => `${derrick.url}${c.path}`;
  const options = (c: Case) => ({
    connections: CONNECTIONS,
    headers: c.identity ? identityHeaders : headers,
    method: c.body ? ("POST" as const) : ("GET" as const),
    distinctBodies: c.distinctBodies,
  });
  const turn = (c: Case, name: string, seconds: number) => httpLoad(name, url(c), c.body ?? "", { ...options(c), seconds });
  const turnSeconds = Math.max(1, Math.round(SECONDS / ROUNDS));
  for (const c of routes) {
    if (ONLY && !ONLY.some((o) => c.name.includes(o))) continue;
    if (c.prepare) c.path = await c.prepare();
    for (const checked of [floor, c]) {
      const check = await fetch(url(checked), {
        method: checked.body ? "POST" : "GET",
        headers: { ...headers, "content-type": "application/json" },
        body: checked.body?.replace(ID_TOKEN, "0"),
      });
      if (check.status !== 200) throw new Error(`${checked.name}: ${check.status} ${await check.text()}`);
      await check.arrayBuffer();
    }
    // Unmeasured: a route's first seconds under load pay JSC's tier-up of its code (compiled on the same two cores);
    // echo, run before every route, is always past it (docs/operations.md#memory-views).
    await turn(c, `${c.name} warm-up`, WARMUP_SECONDS);
    const echoTurns: LoadResult[] = [];
    const routeTurns: LoadResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      echoTurns.push(await turn(floor, `${floor.name} beside ${c.name}`, turnSeconds));
      routeTurns.push(await turn(c, c.name, turnSeconds));
    }
    const echo = merged(`${floor.name} beside ${c.name}`, echoTurns);
    const route = merged(c.name, routeTurns);
    results.push(echo, route);
    // The median round's ratios: one turn hit by a neighbour's burst must not decide either.
    const roundThroughputs = routeTurns.map((r, i) => r.opsPerSec / echoTurns[i]!.opsPerSec);
    const throughput = median(roundThroughputs);
    const tail = median(routeTurns.map((r, i) => r.p99Ms / echoTurns[i]!.p99Ms));
    ratios[`${c.name} / echo throughput`] = throughput;
    ratios[`${c.name} / echo throughput, pooled turns`] = route.opsPerSec / echo.opsPerSec;
    ratios[`${c.name} / echo p99`] = tail;
    roundNotes.push(`${c.name}: throughput ÷ echo by round ${roundThroughputs.map((r) => r.toFixed(3)).join(" ")}`);
    // A query asked once is measured for the record, not held to the targets of the routes (repeated reads).
    if (c.distinctBodies || c.identity) continue;
    targets[`${c.name} throughput`] = { value: throughput, target: "≥ 0.8× echo", met: throughput >= 0.8 };
    targets[`${c.name} p99`] = { value: tail, target: "≤ 1.5× echo", met: tail <= 1.5 };
  }
  report({
    bench: "reads",
    results,
    ratios,
    targets,
    notes: [
      `load generator: ${LOAD_GENERATOR}, ${CONNECTIONS} connections, ${ROUNDS} rounds of ${turnSeconds} s per route, each after ${turnSeconds} s of echo; ${WARMUP_SECONDS} s of each route unmeasured first`,
      "p50/p99 rows are the median turn's; ratios compare each route with the echo turns beside it (the median round's; pooled: all turns' requests over their time)",
      ...roundNotes,
    ],
  });
} finally {
  await derrick.cleanup();
  await nats.stop();
}

/** Turns of one load as one row: counts summed, throughput over their time, the median turn's latencies. */
function merged(name: string, turns: LoadResult[]): LoadResult {
  const count = turns.reduce((sum, t) => sum + t.count, 0);
  const seconds = turns.reduce((sum, t) => sum + t.seconds, 0);
  return {
    name,
    count,
    errors: turns.reduce((sum, t) => sum + t.errors, 0),
    seconds,
    opsPerSec: count / seconds,
    p50Ms: median(turns.map((t) => t.p50Ms)),
    p99Ms: median(turns.map((t) => t.p99Ms)),
    maxMs: Math.max(...turns.map((t) => t.maxMs)),
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
