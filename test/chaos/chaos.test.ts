/**
 * Chaos: a multi-process deployment (nats-server, the edge, two processes each running every actor)
 * under bounded loopback load while faults are injected: kill -9 of an actor process then a restart,
 * nats-server stopped and restarted on the same port with its store, and a webhook receiver that
 * answers 500, hangs, resets connections or is slow, and the Redis of a Redis-backed device (the
 * twin-mirror actor in both actor processes copies its twin) stopped and restarted empty. After each
 * fault every accepted write is read back exactly once (events deduplicated by webhook-id, every
 * content task answered 202 succeeded with its content id and completed once, rechecked after every
 * later fault), readiness returns within a stated time, and while a dependency was down the edge
 * answered 503/504: never hung, never 500.
 *
 * `npm test` runs the short version (~50 s); `npm run test:chaos` (CHAOS_FULL=1) runs longer load,
 * a 10 s NATS outage, an 8 s Redis outage, and kills each actor process in turn.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { eventually, startTestRedis, type TestRedis } from "../harness/index.ts";
import { DeviceClient, parseAppConfig, type TwinChange } from "../../sdk/index.ts";
import {
  emptyLoad,
  missingWrites,
  latencyPercentile,
  runLoad,
  startDeployment,
  taskProblems,
  undeliveredEvents,
  writesAccepted,
  type Deployment,
  type LoadResult,
  type ReceiverMode,
} from "./deployment.ts";

const FULL = process.env.CHAOS_FULL === "1";
const LOAD_MS = FULL ? 15_000 : 4_000;
const NATS_OUTAGE_MS = FULL ? 10_000 : 3_000;
const REDIS_OUTAGE_MS = FULL ? 8_000 : 2_000;
/** The Redis-backed device's twin (DERRICK_TWIN_MIRRORS of both actor processes). */
const DEVICE_TWIN = { organization: "acme", environment: "chaos", twinId: "rdev" };
const DEVICE_TWIN_PATH = `/api/twin-properties/v1/${DEVICE_TWIN.organization}/${DEVICE_TWIN.environment}/${DEVICE_TWIN.twinId}/twin-properties`;
/** Readiness must come back within this after a fault is repaired. */
const READY_WITHIN_MS = 15_000;
const FAULT_TIMEOUT = FULL ? 240_000 : 60_000;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Row = {
  fault: string;
  requests: number;
  accepted: number;
  tasks: number;
  lost: number;
  duplicates: number;
  during: string;
  hung: number;
  server500: number;
  readyMs: number;
  p99Ms: number;
};
const rows: Row[] = [];

function statusesOutside(load: LoadResult, allowed: (status: number) => boolean): Record<string, number> {
  return Object.fromEntries(Object.entries(load.statuses).filter(([s]) => !allowed(Number(s))));
}

describe("chaos", () => {
  let d: Deployment;
  let redis: TestRedis;
  /** Every content task accepted so far (task id → content id), rechecked after each fault. */
  const allTasks = new Map<string, string>();
  beforeAll(async () => {
    redis = await startTestRedis();
    d = await startDeployment({ env: { DERRICK_TWIN_MIRRORS: JSON.stringify([{ ...DEVICE_TWIN, redis: redis.url }]) } });
  }, 90_000);
  // A failure is explained by what the processes logged (stalls, outages), not by the assertion alone.
  beforeEach(({ onTestFailed }) => onTestFailed(() => console.log(`\nchaos: process logs at the failure\n${d?.logs()}`)));
  afterAll(async () => {
    if (rows.length) {
      console.log("\nchaos summary");
      console.table(rows);
    }
    await d?.stop();
    await redis?.cleanup();
  });

  /** Reads every accepted write back, waits for every accepted event, and records the row. */
  async function verify(fault: string, load: LoadResult, during: LoadResult | undefined, readyMs: number) {
    const lost = await eventually(async () => ((await missingWrites(d, load)).length === 0 ? [] : undefined), {
      timeoutMs: 20_000,
      intervalMs: 500,
      what: `accepted writes after ${fault}`,
    }).catch(async () => missingWrites(d, load));
    await eventually(() => undeliveredEvents(d, load).length === 0, {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: `deliveries after ${fault}`,
    }).catch(() => undefined);
    const undelivered = undeliveredEvents(d, load);
    for (const [taskId, contentId] of load.accepted.tasks) allTasks.set(taskId, contentId);
    // Tasks of earlier faults too: still succeeded, never completed a second time.
    const tasksNotOnce = await taskProblems(d, allTasks);
    const duplicates = [...load.accepted.events].reduce((sum, id) => sum + Math.max(0, (d.receiver.deliveries.get(id) ?? 0) - 1), 0);
    const all = [load, during].filter((l): l is LoadResult => !!l);
    const row: Row = {
      fault,
      requests: all.reduce((s, l) => s + l.requests, 0),
      accepted: writesAccepted(load),
      tasks: load.accepted.tasks.size,
      lost: lost.length + undelivered.length + tasksNotOnce.length,
      duplicates,
      during: during ? JSON.stringify(during.statuses) : "-",
      hung: all.reduce((s, l) => s + l.hung, 0),
      server500: all.reduce((s, l) => s + (l.statuses["500"] ?? 0), 0),
      readyMs,
      p99Ms: Math.round(latencyPercentile(load.latenciesMs, 99)),
    };
    rows.push(row);
    expect(lost, "accepted writes not found").toEqual([]);
    expect(undelivered, "accepted events never delivered").toEqual([]);
    expect(tasksNotOnce, "accepted content tasks not succeeded exactly once").toEqual([]);
    expect(row.hung, "requests without an answer").toBe(0);
    expect(row.server500, "500 answers").toBe(0);
    expect(readyMs).toBeLessThan(READY_WITHIN_MS);
    expect(writesAccepted(load)).toBeGreaterThan(10);
  }

  it(
    "chaos - kill -9 of an actor process under load, then a restart: nothing accepted is lost",
    async () => {
      const victims = FULL ? ["actors-1", "actors-2"] : ["actors-1"];
      for (const victim of victims) {
        const load = emptyLoad();
        const running = runLoad(d, load, { durationMs: LOAD_MS, concurrency: 6 });
        await pause(LOAD_MS / 4);
        d.kill(victim);
        await pause(LOAD_MS / 4);
        await d.start(victim);
        await running;
        const readyMs = await d.waitReady(READY_WITHIN_MS);
        await verify(`kill -9 ${victim}`, load, undefined, readyMs);
        // Only answers a client can act on: success, 503/504 while the killed process's requests time out.
        expect(statusesOutside(load, (s) => s < 300 || s === 503 || s === 504)).toEqual({});
      }
    },
    FAULT_TIMEOUT,
  );

  it(
    `chaos - nats-server stopped for ${NATS_OUTAGE_MS / 1000} s and restarted with its store: 503/504 meanwhile, nothing accepted is lost`,
    async () => {
      const before = emptyLoad();
      await runLoad(d, before, { durationMs: 1_500, concurrency: 4 });
      await d.stopNats();
      const during = emptyLoad();
      const outage = runLoad(d, during, { durationMs: NATS_OUTAGE_MS, concurrency: 4, timeoutMs: 10_000 });
      const readyDuring = await fetch(`${d.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
      expect(readyDuring.status).toBe(503);
      await outage;
      await d.startNats();
      const readyMs = await d.waitReady(READY_WITHIN_MS);
      const after = emptyLoad();
      await runLoad(d, after, { durationMs: 1_500, concurrency: 4 });
      // While NATS was down every answer was a 503 or 504 (tokens and appkeys may still be served from cache: 2xx reads are fine).
      expect(statusesOutside(during, (s) => s === 503 || s === 504 || (s >= 200 && s < 300))).toEqual({});
      const merged = emptyLoad();
      for (const l of [before, during, after]) {
        for (const k of Object.keys(merged.accepted) as Array<keyof LoadResult["accepted"]>) {
          const into = merged.accepted[k] as Set<string> | Map<string, string>;
          if (into instanceof Map) for (const [a, b] of l.accepted[k] as Map<string, string>) into.set(a, b);
          else for (const a of l.accepted[k] as Set<string>) into.add(a);
        }
        merged.requests += l.requests;
        merged.hung += l.hung;
        merged.latenciesMs.push(...l.latenciesMs);
        for (const [s, c] of Object.entries(l.statuses)) merged.statuses[s] = (merged.statuses[s] ?? 0) + c;
      }
      await verify(`nats-server down ${NATS_OUTAGE_MS / 1000} s`, merged, during, readyMs);
    },
    FAULT_TIMEOUT,
  );

  it(
    "chaos - a webhook receiver that answers 500, hangs, resets or is slow gets every accepted event once it recovers",
    async () => {
      const modes: ReceiverMode[] = ["500", "hang", "reset", "slow"];
      for (const mode of modes) {
        d.receiver.mode = mode;
        const load = emptyLoad();
        await runLoad(d, load, { durationMs: FULL ? 5_000 : 1_500, concurrency: 4 });
        d.receiver.mode = "ok";
        await verify(`receiver ${mode}`, load, undefined, await d.waitReady(READY_WITHIN_MS));
      }
    },
    FAULT_TIMEOUT,
  );

  it(
    `chaos - Redis of a Redis-backed device stopped for ${REDIS_OUTAGE_MS / 1000} s and restarted empty: desired values put meanwhile reach the device once and in order, reported ones flow back, no 500`,
    async () => {
      const config = parseAppConfig({
        Name: "ChaosDevice",
        AEA2: {
          RedisClient: { Server: "127.0.0.1", Port: String(redis.port) },
          BusClient: { Server: d.nats().url, Subscriptions: [{ DataIn: ["slbapps.ChaosDevice.DataIn"] }] },
        },
      });
      const device = await DeviceClient.connect(config, { reconnectTimeWaitMs: 100 });
      try {
        const seen: TwinChange[] = [];
        device.observe("setpoints", undefined, (c) => seen.push(c));
        const twinStatuses: Record<string, number> = {};
        /** Every twin answer other than 200: when, which request, and the problem it gave. */
        const failures: string[] = [];
        const started = Date.now();
        const count = async (what: string, res: Response) => {
          twinStatuses[res.status] = (twinStatuses[res.status] ?? 0) + 1;
          if (res.status !== 200) failures.push(`+${Date.now() - started} ms ${what} → ${res.status} ${await res.text()}`);
        };
        const put = async (twins: Array<{ name: string; value: string }>) => {
          const res = await d.call(DEVICE_TWIN_PATH, { method: "PUT", body: JSON.stringify({ group: "setpoints", twins }) });
          await count("PUT", res);
          return res.status === 200 ? ((await res.json()) as { twins: Array<{ name: string; version: number }> }).twins : [];
        };
        /** The group's state; a 504 (counted against the budget below) is asked again. */
        const readGroup = async () => {
          for (;;) {
            const res = await d.call(`${DEVICE_TWIN_PATH}?group=setpoints`);
            await count("GET", res);
            if (res.status === 200)
              return (await res.json()) as { desired: Record<string, Record<string, { value: string; version: number }>> };
            if (res.status !== 504 || failures.length > 5) throw new Error(`reading the twin: ${failures.join("; ")}`);
          }
        };
        await put([{ name: "kept", value: "before" }]);
        await eventually(() => seen.some((c) => c.name === "kept"), { what: "the device's first value" });

        await redis.stop();
        const during = emptyLoad();
        const outage = runLoad(d, during, { durationMs: REDIS_OUTAGE_MS, concurrency: 4 });
        // Desired values put while Redis is down, one after another so their versions are ordered.
        const latest = new Map<string, { value: string; version: number }>();
        const deadline = Date.now() + REDIS_OUTAGE_MS;
        for (let i = 1; Date.now() < deadline && i <= 200; i++) {
          for (const t of await put([{ name: `sp${i % 3}`, value: String(i) }]))
            latest.set(t.name, { value: String(i), version: t.version });
          const read = await d.call(`${DEVICE_TWIN_PATH}?group=setpoints`);
          await count("GET", read);
          if (read.status === 200) await read.body?.cancel();
          await new Promise((r) => setTimeout(r, 20));
        }
        // Written on the device while its Redis is down: the client queues it until Redis is back.
        const reported = device.setReported("setpoints", "state", "written while Redis was down");
        await outage;
        await redis.restart();
        await reported;
        const readyMs = await d.waitReady(READY_WITHIN_MS);

        // The server's final desired values: what the device must converge to. A put that timed out
        // (504, tolerated once below) may still have landed, so the replies alone are not the truth.
        const final = (await readGroup()).desired.setpoints ?? {};
        for (const [name, accepted] of latest) {
          const stored = final[name];
          expect(
            stored && stored.version >= accepted.version,
            `${name}: accepted version ${accepted.version} kept (server has ${JSON.stringify(stored)})`,
          ).toBe(true);
        }
        for (const [name, stored] of Object.entries(final))
          if (name !== "kept") latest.set(name, { value: stored.value, version: stored.version });
        await eventually(() => [...latest].every(([name, want]) => seen.filter((c) => c.name === name).at(-1)?.version === want.version), {
          timeoutMs: 15_000,
          what: "latest desired values on the device",
        });
        for (const [name, want] of latest) {
          const versions = seen.filter((c) => c.name === name).map((c) => c.version);
          expect(new Set(versions).size, `${name} delivered twice`).toBe(versions.length);
          expect(
            [...versions].sort((a, b) => a - b),
            `${name} out of order`,
          ).toEqual(versions);
          expect(seen.filter((c) => c.name === name).at(-1)?.value).toBe(want.value);
        }
        expect(seen.filter((c) => c.name === "kept")).toHaveLength(1);
        // The restarted Redis was empty: the mirror wrote the desired values held before the outage again.
        await eventually(async () => (await device.getDesired("setpoints", "kept"))?.value === "before", {
          what: "older desired value back in Redis",
        });
        await device.setReported("setpoints", "after", "written after the restart");
        await eventually(
          async () => {
            const state = (await (await d.call(`${DEVICE_TWIN_PATH}?group=setpoints`)).json()) as {
              reported: Record<string, Record<string, { value: string }>>;
            };
            return (
              state.reported.setpoints?.state?.value === "written while Redis was down" &&
              state.reported.setpoints?.after?.value === "written after the restart"
            );
          },
          { timeoutMs: 15_000, what: "reported values back in JetStream" },
        );

        expect(latest.size, "desired values accepted while Redis was down").toBeGreaterThan(0);
        // Every put and read answered; a lone 504 is the starved-actor case described below.
        expect(
          Object.keys(twinStatuses).filter((s) => s !== "200" && s !== "504"),
          failures.join("\n"),
        ).toEqual([]);
        expect(twinStatuses["504"] ?? 0, failures.join("\n")).toBeLessThanOrEqual(1);
        // Redis is no dependency of the edge: the load's twin requests (and everything else) answered as
        // usual. A request that depended on Redis would wait out its timeout (504) for the whole outage;
        // a lone 504 is a CPU-starved actor on a busy 2-core CI machine (seen once in a full-suite run).
        const twinCounts = during.byKind.twin ?? {};
        const twinTotal = Object.values(twinCounts).reduce((a, n) => a + n, 0);
        expect(
          Object.keys(twinCounts).filter((s) => !(Number(s) >= 200 && Number(s) < 300) && s !== "504"),
          JSON.stringify(twinCounts),
        ).toEqual([]);
        expect(twinCounts["504"] ?? 0, JSON.stringify(twinCounts)).toBeLessThanOrEqual(Math.max(1, Math.floor(twinTotal * 0.05)));
        expect(twinTotal).toBeGreaterThan(10);
        await verify(`redis down ${REDIS_OUTAGE_MS / 1000} s`, during, undefined, readyMs);
        rows.at(-1)!.accepted += [...latest].length;
      } finally {
        await device.close();
      }
    },
    FAULT_TIMEOUT,
  );
});
