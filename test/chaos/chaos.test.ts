/**
 * Chaos: a multi-process deployment (nats-server, the edge, two processes each running every actor)
 * under bounded loopback load while faults are injected: kill -9 of an actor process then a restart,
 * nats-server stopped and restarted on the same port with its store, and a webhook receiver that
 * answers 500, hangs, resets connections or is slow. After each fault every accepted write is read
 * back exactly once (events deduplicated by webhook-id), readiness returns within a stated time, and
 * while a dependency was down the edge answered 503/504: never hung, never 500.
 *
 * `npm test` runs the short version (~40 s); `npm run test:chaos` (CHAOS_FULL=1) runs longer load,
 * a 10 s NATS outage, and kills each actor process in turn.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../harness/index.ts";
import { emptyLoad, missingWrites, p99, runLoad, startDeployment, undeliveredEvents, writesAccepted, type Deployment, type LoadResult, type ReceiverMode } from "./deployment.ts";

const FULL = process.env.CHAOS_FULL === "1";
const LOAD_MS = FULL ? 15_000 : 4_000;
const NATS_OUTAGE_MS = FULL ? 10_000 : 3_000;
/** Readiness must come back within this after a fault is repaired. */
const READY_WITHIN_MS = 15_000;
const FAULT_TIMEOUT = FULL ? 240_000 : 60_000;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Row = { fault: string; requests: number; accepted: number; lost: number; duplicates: number; during: string; hung: number; server500: number; readyMs: number; p99Ms: number };
const rows: Row[] = [];

function statusesOutside(load: LoadResult, allowed: (status: number) => boolean): Record<string, number> {
  return Object.fromEntries(Object.entries(load.statuses).filter(([s]) => !allowed(Number(s))));
}

describe("chaos", () => {
  let d: Deployment;
  beforeAll(async () => {
    d = await startDeployment();
  }, 90_000);
  afterAll(async () => {
    if (rows.length) {
      console.log("\nchaos summary");
      console.table(rows);
    }
    await d?.stop();
  });

  /** Reads every accepted write back, waits for every accepted event, and records the row. */
  async function verify(fault: string, load: LoadResult, during: LoadResult | undefined, readyMs: number) {
    const lost = await eventually(async () => ((await missingWrites(d, load)).length === 0 ? [] : undefined), { timeoutMs: 20_000, intervalMs: 500, what: `accepted writes after ${fault}` }).catch(async () => missingWrites(d, load));
    await eventually(() => undeliveredEvents(d, load).length === 0, { timeoutMs: 30_000, intervalMs: 200, what: `deliveries after ${fault}` }).catch(() => undefined);
    const undelivered = undeliveredEvents(d, load);
    const duplicates = [...load.accepted.events].reduce((sum, id) => sum + Math.max(0, (d.receiver.deliveries.get(id) ?? 0) - 1), 0);
    const all = [load, during].filter((l): l is LoadResult => !!l);
    const row: Row = {
      fault,
      requests: all.reduce((s, l) => s + l.requests, 0),
      accepted: writesAccepted(load),
      lost: lost.length + undelivered.length,
      duplicates,
      during: during ? JSON.stringify(during.statuses) : "-",
      hung: all.reduce((s, l) => s + l.hung, 0),
      server500: all.reduce((s, l) => s + (l.statuses["500"] ?? 0), 0),
      readyMs,
      p99Ms: Math.round(p99(load.latenciesMs)),
    };
    rows.push(row);
    expect(lost, "accepted writes not found").toEqual([]);
    expect(undelivered, "accepted events never delivered").toEqual([]);
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
});
