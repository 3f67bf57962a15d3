/**
 * What tracing costs on the edge round trip (HTTP → edge → NATS → system actor → reply, a small JSON echo): derrick
 * with no OTLP endpoint, without and with a caller's traceparent, against derrick exporting every span over OTLP to a
 * loopback receiver in this process. The cases alternate over rounds in the same run; the baseline is measured twice
 * per round so its own spread shows what counts as noise here.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNatsServer } from "../platform/nats-server.ts";
import { httpLoad, startPeer, LOAD_GENERATOR } from "./load.ts";
import { cpuSeconds, report, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const BODY = JSON.stringify({ well: "NO 15/9-F-12", depth: 3521.4, ok: true, tags: ["a", "b", "c"] });
const TRACEPARENT = { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" };
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

// An OTLP/HTTP receiver that takes every export and keeps nothing (protobuf, the default encoding).
let exports = 0;
const sink = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    await request.arrayBuffer();
    exports++;
    return new Response(new Uint8Array(), { headers: { "content-type": "application/x-protobuf" } });
  },
});

const dir = mkdtempSync(join(tmpdir(), "derrick-bench-tracing-"));
const nats = await startNatsServer({ dir: join(dir, "nats"), port: -1 });
const rounds: Record<string, LoadResult[]> = { base: [], again: [], traced: [], exporting: [] };
/** The derrick process's CPU time per request in each case, µs: less disturbed by other tenants than throughput. */
const cpuPerRequest: Record<string, number[]> = { base: [], again: [], traced: [], exporting: [] };
try {
  const plain = await startPeer(process.execPath, [here("./peers/derrick-node.ts"), nats.url, "0", join(dir, "plain")]);
  const exporting = await startPeer(process.execPath, [here("./peers/derrick-node.ts"), nats.url, "0", join(dir, "exporting")], {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}`,
  });
  const url = (peer: { port: number }) => `http://127.0.0.1:${peer.port}/v1/system/echo`;
  const load = (name: string, peer: { port: number }, headers: Record<string, string> = {}, seconds = SECONDS) =>
    httpLoad(name, url(peer), BODY, { connections: CONNECTIONS, seconds, headers });
  const measure = async (key: string, name: string, peer: { port: number; child: { pid?: number } }, headers?: Record<string, string>) => {
    const before = cpuSeconds(peer.child.pid!);
    const result = await load(name, peer, headers);
    cpuPerRequest[key]!.push(((cpuSeconds(peer.child.pid!) - before) / result.count) * 1e6);
    rounds[key]!.push(result);
  };
  await load("warm-up", plain, TRACEPARENT, 3);
  await load("warm-up", exporting, TRACEPARENT, 3);
  for (let round = 1; round <= ROUNDS; round++) {
    await measure("base", `no OTLP endpoint, no traceparent (round ${round})`, plain);
    await measure("traced", `no OTLP endpoint, caller's traceparent (round ${round})`, plain, TRACEPARENT);
    await measure("exporting", `exporting over OTLP, caller's traceparent (round ${round})`, exporting, TRACEPARENT);
    await measure("again", `no OTLP endpoint, no traceparent, again (round ${round})`, plain);
  }
  await exporting.stop();
  await plain.stop();
} finally {
  await nats.stop();
  sink.stop(true);
  rmSync(dir, { recursive: true, force: true });
}

/** The median over rounds: one round disturbed by another tenant of the machine does not decide. */
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};
const ops = (name: string) => median(rounds[name]!.map((r) => r.opsPerSec));
const p99 = (name: string) => median(rounds[name]!.map((r) => r.p99Ms));
const cpu = (name: string) => median(cpuPerRequest[name]!);
report({
  bench: "edge-tracing",
  results: Object.values(rounds).flat(),
  ratios: {
    "CPU per request: baseline again / baseline (the noise between two runs of the same case)": cpu("again") / cpu("base"),
    "CPU per request: no OTLP endpoint, caller's traceparent / baseline": cpu("traced") / cpu("base"),
    "CPU per request: exporting every span / baseline": cpu("exporting") / cpu("base"),
    "throughput: baseline again / baseline (the noise between two runs of the same case)": ops("again") / ops("base"),
    "throughput: no OTLP endpoint, caller's traceparent / baseline": ops("traced") / ops("base"),
    "throughput: exporting every span / baseline": ops("exporting") / ops("base"),
    "p99: no OTLP endpoint, caller's traceparent / baseline": p99("traced") / p99("base"),
    "p99: exporting every span / baseline": p99("exporting") / p99("base"),
  },
  notes: [
    `load generator: ${LOAD_GENERATOR}, ${CONNECTIONS} connections, ${SECONDS} s per case, ${ROUNDS} rounds alternating the cases; ratios of medians`,
    "baseline: derrick with no OTLP endpoint and requests without traceparent (the edge still starts a trace for each)",
    `OTLP receiver: loopback, in the bench process, protobuf; ${exports} exports received`,
    `derrick process CPU per request (µs, median): ${Object.keys(cpuPerRequest)
      .map((key) => `${key} ${cpu(key).toFixed(1)}`)
      .join(", ")}`,
  ],
});
