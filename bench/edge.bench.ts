/**
 * Edge round trip: HTTP → edge → NATS → system actor → reply, for a small JSON echo, against
 * (a) a direct in-process Elysia handler and (b) Moleculer + moleculer-web over its NATS transporter,
 * all driven by the same load generator in the same run. Then p99 at 50% of derrick's peak rate.
 * Targets: derrick ≥ 50% of direct, ≥ 3× Moleculer, p99 < 5 ms at 50% of peak.
 *
 * The floor: the same HTTP → NATS → reply path with no derrick code (`peers/nats-floor.ts`: a bare
 * Bun.serve handler making one nats.js request per HTTP request), at its peak and at derrick's
 * half-peak rate. It bounds what any edge of this design can reach on this machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNatsServer } from "../platform/nats-server.ts";
import { freePort } from "../test/harness/redis.ts";
import { httpLoad, httpLoadAtRate, startPeer, LOAD_GENERATOR } from "./load.ts";
import { report, type LoadResult } from "./lib.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const BODY = JSON.stringify({ well: "NO 15/9-F-12", depth: 3521.4, ok: true, tags: ["a", "b", "c"] });
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const bun = process.execPath;

const dir = mkdtempSync(join(tmpdir(), "derrick-bench-edge-"));
const nats = await startNatsServer({ dir: join(dir, "nats"), port: -1 });
const results: LoadResult[] = [];
let derrickPeak = 0;
let atHalf: LoadResult | undefined;
try {
  const measure = async (name: string, peer: { port: number; stop(): Promise<void> }) => {
    const url = `http://127.0.0.1:${peer.port}/v1/system/echo`;
    await httpLoad(`${name} warm-up`, url, BODY, { connections: CONNECTIONS, seconds: 2 });
    const result = await httpLoad(name, url, BODY, { connections: CONNECTIONS, seconds: SECONDS });
    results.push(result);
    return { url, result };
  };

  const derrick = await startPeer(bun, [here("./peers/derrick-node.ts"), nats.url, "0", join(dir, "data")]);
  const { url, result } = await measure("derrick edge → NATS → actor", derrick);
  derrickPeak = result.opsPerSec;
  const rate = Math.max(100, Math.floor(derrickPeak / 2));
  atHalf = await httpLoadAtRate(`derrick at 50% of peak (${rate}/s offered, autocannon -R)`, url, BODY, { perSecond: rate, seconds: 6 });
  results.push(atHalf);
  await derrick.stop();

  // The baseline at its peak, then at derrick's half-peak rate: the latency floor of this machine and
  // load generator at that rate, measured in the same run.
  const direct = await startPeer(bun, [here("./peers/direct-elysia.ts"), "0"]);
  const directRun = await measure("direct Elysia (in-process)", direct);
  results.push(await httpLoadAtRate(`direct Elysia at the same ${rate}/s (control)`, directRun.url, BODY, { perSecond: rate, seconds: 6 }));
  await direct.stop();

  const floor = await startPeer(bun, [here("./peers/nats-floor.ts"), nats.url, "echo"]);
  const floorRun = await measure("floor: Bun.serve + one nats.js request (no derrick code)", floor);
  results.push(await httpLoadAtRate(`floor at the same ${rate}/s`, floorRun.url, BODY, { perSecond: rate, seconds: 6 }));
  await floor.stop();

  // The same path with the edge and the actor in separate processes (`derrick edge` + `derrick actor`).
  const actors = await startPeer(bun, [here("./peers/derrick-node.ts"), nats.url, "0", join(dir, "data"), "actors"]);
  const edgeOnly = await startPeer(bun, [here("./peers/derrick-node.ts"), nats.url, "0", join(dir, "data"), "edge"]);
  await measure("derrick, edge and actor in two processes", edgeOnly);
  await edgeOnly.stop();
  await actors.stop();

  // Bun runs JavaScript on one thread, so one process uses one core. The same layouts with two
  // processes sharing the port (SO_REUSEPORT, DERRICK_HTTP_REUSE_PORT for derrick): how far each
  // scales on this machine's two cores, baseline included.
  const sharedPort = await freePort();
  const twice = async (start: () => ReturnType<typeof startPeer>) => {
    const a = await start();
    const b = await start();
    return { port: sharedPort, stop: async () => void (await Promise.all([a.stop(), b.stop()])) };
  };
  const directTwice = await twice(() => startPeer(bun, [here("./peers/direct-elysia.ts"), String(sharedPort), "reuse-port"]));
  await measure("direct Elysia, two processes on one port", directTwice);
  await directTwice.stop();
  const derrickTwice = await twice(() =>
    startPeer(bun, [here("./peers/derrick-node.ts"), nats.url, String(sharedPort), join(dir, `data-${Math.random()}`)], {
      DERRICK_HTTP_REUSE_PORT: "true",
    }),
  );
  const shared = await measure("derrick, two processes on one port (edge + actor each)", derrickTwice);
  const sharedRate = Math.max(100, Math.floor(shared.result.opsPerSec / 2));
  results.push(
    await httpLoadAtRate(`derrick, two processes, at 50% of peak (${sharedRate}/s offered)`, shared.url, BODY, {
      perSecond: sharedRate,
      seconds: 6,
    }),
  );
  await derrickTwice.stop();

  const moleculer = await startPeer("node", [here("./peers/moleculer.cjs"), nats.url, String(await freePort())]);
  await measure("Moleculer + moleculer-web (NATS transporter)", moleculer);
  await moleculer.stop();
} finally {
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });
}

const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix))!;
const ops = (prefix: string) => byName(prefix).opsPerSec;
const oneProcess = Math.max(derrickPeak, ops("derrick, edge and actor"));
const twoOnOnePort = ops("derrick, two processes on one port");
const best = Math.max(oneProcess, twoOnOnePort);
const bestAtHalf = twoOnOnePort > oneProcess ? byName("derrick, two processes, at 50%") : atHalf!;
const vsDirect = best / ops("direct Elysia (in-process)");
const vsMoleculer = best / ops("Moleculer");
report({
  bench: "edge",
  results,
  ratios: {
    "derrick one process / direct Elysia one process": oneProcess / ops("direct Elysia (in-process)"),
    "derrick two processes / direct Elysia one process (the baseline of the targets)": twoOnOnePort / ops("direct Elysia (in-process)"),
    "derrick two processes / direct Elysia two processes (same resources)": twoOnOnePort / ops("direct Elysia, two processes"),
    "derrick one process / Moleculer (gateway + service in one process)": oneProcess / ops("Moleculer"),
    "derrick two processes / Moleculer": twoOnOnePort / ops("Moleculer"),
    "p99 at derrick's half-peak rate: derrick one process / direct Elysia (control)":
      atHalf!.p99Ms / byName("direct Elysia at the same").p99Ms,
    "floor (no derrick code) / direct Elysia one process: the design's ceiling here":
      ops("floor: Bun.serve") / ops("direct Elysia (in-process)"),
    "derrick one process / floor": oneProcess / ops("floor: Bun.serve"),
    "p99 at derrick's half-peak rate: derrick one process / floor": atHalf!.p99Ms / byName("floor at the same").p99Ms,
  },
  targets: {
    "derrick (best layout) ≥ 50% of direct (one process)": { value: vsDirect, target: "≥ 0.5", met: vsDirect >= 0.5 },
    "derrick (best layout) ≥ 3× Moleculer": { value: vsMoleculer, target: "≥ 3", met: vsMoleculer >= 3 },
    "p99 at 50% of peak (best layout)": { value: bestAtHalf.p99Ms, target: "< 5 ms", met: bestAtHalf.p99Ms < 5 },
  },
  notes: [
    "targets use derrick's best layout; the ratios above show each layout",
    `load generator: ${LOAD_GENERATOR}, ${CONNECTIONS} connections, ${SECONDS} s per case, 2 s warm-up`,
    "every peer runs in its own process(es); nats-server 2.9 shared; the load generator runs on the same 2 cores",
  ],
});
