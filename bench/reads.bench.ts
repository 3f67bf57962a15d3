/**
 * Read routes against the one-hop floor: each route's throughput and p99 under the same closed-loop
 * load (wrk, 32 connections) as `POST /v1/system/echo`, in the same run, on one derrick process with
 * every actor (what `npm start` runs). Targets: throughput ≥ 0.8× echo, p99 ≤ 1.5× echo's p99.
 * Knobs: BENCH_SECONDS (5), BENCH_CONNECTIONS (32), BENCH_READS (comma list of case names to run).
 */
import { clientToken, startDerrick, startTestNats, testClient } from "../test/harness/index.ts";
import { seedDemo } from "../actors/reporting/index.ts";
import { httpLoad, LOAD_GENERATOR } from "./load.ts";
import { report, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ONLY = process.env.BENCH_READS?.split(",");
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
try {
  const headers = {
    authorization: `Bearer ${await clientToken(derrick.url, CLIENT)}`,
    appkey: CLIENT.appkey,
    "slb-partition-id": PARTITION,
    "data-partition-id": PARTITION,
  };
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
  const task = await ok("/v1/projects/plan-a/display-items/content/requests", { method: "POST", body: '{"ids":["well-name"]}' });
  for (let i = 0; i < 100; i++) {
    if (JSON.stringify(await ok(`/v2/projects/plan-a/tasks/${task.taskId}`)).includes("succeeded")) break;
    await Bun.sleep(100);
  }
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

  type Case = { name: string; path: string; body?: string };
  const cases: Case[] = [
    { name: "POST /v1/system/echo (floor)", path: "/v1/system/echo", body: '{"well":"F-12","depth":3521.4}' },
    { name: "GET /v1/notifications/subscriptions", path: "/v1/notifications/subscriptions" },
    { name: "GET twin properties, one group", path: "/api/twin-properties/v1/acme/prod/rig-7/twin-properties?group=setpoints" },
    { name: "GET /v1/projects/{id}", path: "/v1/projects/plan-a" },
    { name: "GET /v1/display-items?limit=20", path: "/v1/display-items?limit=20" },
    { name: "GET content result", path: `/v1/projects/plan-a/display-items/content/${task.contentId}` },
    { name: "GET prospect aggregation (cached)", path: "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil" },
    {
      name: "POST /api/search/v2/query (text, limit 10)",
      path: "/api/search/v2/query",
      body: '{"kind":"*:*:*:*","query":"volve","limit":10}',
    },
  ];
  let echo: LoadResult | undefined;
  for (const c of cases) {
    if (ONLY && c !== cases[0] && !ONLY.some((o) => c.name.includes(o))) continue;
    const url = `${derrick.url}${c.path}`;
    const check = await fetch(url, {
      method: c.body ? "POST" : "GET",
      headers: { ...headers, "content-type": "application/json" },
      body: c.body,
    });
    if (check.status !== 200) throw new Error(`${c.name}: ${check.status} ${await check.text()}`);
    await check.arrayBuffer();
    const options = { connections: CONNECTIONS, headers, method: c.body ? ("POST" as const) : ("GET" as const) };
    await httpLoad(`${c.name} warm-up`, url, c.body ?? "", { ...options, seconds: 1 });
    const result = await httpLoad(c.name, url, c.body ?? "", { ...options, seconds: SECONDS });
    results.push(result);
    if (!echo) {
      echo = result;
      continue;
    }
    const throughput = result.opsPerSec / echo.opsPerSec;
    const tail = result.p99Ms / echo.p99Ms;
    ratios[`${c.name} / echo throughput`] = throughput;
    ratios[`${c.name} / echo p99`] = tail;
    targets[`${c.name} throughput`] = { value: throughput, target: "≥ 0.8× echo", met: throughput >= 0.8 };
    targets[`${c.name} p99`] = { value: tail, target: "≤ 1.5× echo", met: tail <= 1.5 };
  }
  report({
    bench: "reads",
    results,
    ratios,
    targets,
    notes: [`load generator: ${LOAD_GENERATOR}, ${CONNECTIONS} connections, ${SECONDS} s per route`],
  });
} finally {
  await derrick.cleanup();
  await nats.stop();
}
