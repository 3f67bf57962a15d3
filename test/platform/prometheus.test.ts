/**
 * derrick's metrics as Prometheus sees them: the shipped alert rules pass `promtool check rules`, and a
 * real Prometheus (Debian's package, on a free loopback port, data in a temporary dir) scrapes an edge
 * and an actor-only process (DERRICK_METRICS_PORT), loads the rules and answers queries for derrick series.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, freePort, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { ROOT } from "../harness/cli.ts";

const RULES = join(ROOT, "ops", "prometheus", "alerts.yml");
let nats: TestNats;
let edge: TestDerrick;
let actors: TestDerrick;
let prometheus: ChildProcess | undefined;
let promUrl = "";
let dir = "";
let actorsMetricsPort = 0;

type Vector = { status: string; data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } };
const query = async (promql: string): Promise<Vector["data"]["result"]> => {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await res.json()) as Vector;
  expect(body.status).toBe("success");
  return body.data.result;
};

beforeAll(async () => {
  nats = await startTestNats();
  edge = await startDerrick(nats, { actors: ["system", "identity"] });
  actorsMetricsPort = await freePort();
  actors = await startDerrick(nats, {
    actors: ["notifications", "deliverer"],
    edge: false,
    env: { DERRICK_METRICS_PORT: String(actorsMetricsPort) },
  });
  dir = mkdtempSync(join(tmpdir(), "derrick-prometheus-"));
  const port = await freePort();
  const targets = [new URL(edge.url).host, `127.0.0.1:${actorsMetricsPort}`];
  writeFileSync(
    join(dir, "prometheus.yml"),
    JSON.stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: [RULES],
      scrape_configs: [{ job_name: "derrick", static_configs: [{ targets }] }],
    }),
  );
  prometheus = spawn(
    "prometheus",
    [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: "ignore" },
  );
  promUrl = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 30_000,
    what: "prometheus ready",
  });
}, 60_000);

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus!.once("exit", resolve));
    prometheus.kill("SIGTERM");
    await exited;
  }
  await actors?.cleanup();
  await edge?.cleanup();
  await nats?.cleanup();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("prometheus", () => {
  it("prometheus - the shipped alert rules pass promtool check rules", () => {
    const check = spawnSync("promtool", ["check", "rules", RULES], { encoding: "utf8" });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it("prometheus - scrapes the edge and an actor-only process, loads the rules, and answers queries for derrick series", async () => {
    // Both targets up: the edge's /metrics and the actor-only process's DERRICK_METRICS_PORT.
    await eventually(async () => (await query('up{job="derrick"} == 1')).length === 2, { timeoutMs: 30_000, what: "both targets up" });
    const inflight = await eventually(
      async () => {
        const found = await query("derrick_actor_inflight");
        return found.length >= 4 ? found : undefined;
      },
      { timeoutMs: 30_000, what: "derrick_actor_inflight of every actor" },
    );
    expect(new Set(inflight.map((s) => s.metric.actor))).toEqual(new Set(["system", "identity", "notifications", "deliverer"]));
    expect((await query("derrick_runtime_info")).map((s) => s.metric.runtime)).toEqual(["bun", "bun"]);
    // The system actor's fleet gauges: a durable consumer's pending, and the actor processes seen up.
    await eventually(async () => (await query('derrick_consumer_pending{stream="DELIVERIES"}')).length > 0, {
      timeoutMs: 30_000,
      what: "consumer pending of DELIVERIES",
    });
    expect((await query('derrick_actor_processes{actor="deliverer",state="up"}'))[0]?.value[1]).toBe("1");
    const rules = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as { data: { groups: Array<{ rules: unknown[] }> } };
    expect(rules.data.groups.flatMap((g) => g.rules).length).toBe(8);
  });
});
