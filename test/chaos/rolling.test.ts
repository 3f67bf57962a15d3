/**
 * Rolling restart, the way an upgrade goes process by process: two processes of every actor kind (one
 * kind per process), and while a mixed load of reads and writes runs through the edge, each process
 * in turn is stopped gracefully (SIGTERM, its exit awaited), started again and waited for until it
 * answers `$SRV.PING` before the next one goes. No request may fail (every answer 2xx, none retried),
 * every accepted write reads back, every accepted event reaches the receiver exactly once (by
 * webhook-id), every content task succeeds once, and a search replica that restarts never answers
 * from less than its index held before.
 *
 * `npm test` restarts the first process of each kind; `npm run test:chaos` (CHAOS_FULL=1) both.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ACTOR_NAMES } from "../../config/index.ts";
import { eventually } from "../harness/index.ts";
import {
  emptyLoad,
  latencyPercentile,
  processPerKind,
  runLoad,
  settledOutcome,
  startDeployment,
  writesAccepted,
  type Deployment,
} from "./deployment.ts";

const FULL = process.env.CHAOS_FULL === "1";
/** Which copies of each kind are restarted (two run of each). */
const COPIES_RESTARTED = FULL ? [1, 2] : [1];
/** Records written before the restarts: every search answer must count all of them. */
const SEEDED_RECORDS = 20;
const SEEDED_KIND = "osdu:wks:rolling:1.0.0";
/** Upper bound of the load, should the restarts hang (they end it sooner). */
const LOAD_BOUND_MS = FULL ? 600_000 : 240_000;

type Restart = { process: string; exit: string; stopMs: number; servingMs: number };

describe("rolling restart", () => {
  let d: Deployment;
  beforeAll(async () => {
    // A generous request timeout: on a busy 2-core machine a starting process can starve a request for
    // seconds, and this test is about restarts, not latency (a 504 would still count as a failure).
    // 25 processes starting at once on a busy machine: one may time out creating a stream another is creating,
    // and is started again, as a supervisor does (printed; docs/operations.md, "Starting on a new cluster").
    d = await startDeployment({ layout: processPerKind(2), env: { DERRICK_REQUEST_TIMEOUT: "15s" }, restartFailedStarts: true });
    if (d.bootRestarts.length) console.log(`rolling: started again after a failed start-up: ${d.bootRestarts.join(", ")}`);
  }, 240_000);
  beforeEach(({ onTestFailed }) => onTestFailed(() => console.log(`\nrolling: process logs at the failure\n${d?.logs()}`)));
  afterAll(async () => {
    await d?.stop();
  });

  it(
    "rolling restart - each actor process stopped gracefully and started again in turn under load: no request fails, nothing accepted is lost or delivered twice",
    async () => {
      const seeded = Array.from({ length: SEEDED_RECORDS }, (_, i) => ({
        id: `opendes:rolling:seed-${i}`,
        kind: SEEDED_KIND,
        acl: { viewers: ["users.datalake.admins"], owners: ["users.datalake.admins"] },
        data: { i },
      }));
      const put = await d.call("/api/storage/v2/records", { method: "PUT", body: JSON.stringify(seeded) });
      expect(put.status, await put.clone().text()).toBe(201);
      /** Search answers other than 200: the status and the problem. */
      const searchProblems: string[] = [];
      const seededCount = async () => {
        try {
          const res = await d.call("/api/search/v2/query", {
            as: "searcher",
            method: "POST",
            body: JSON.stringify({ kind: SEEDED_KIND, limit: 1 }),
          });
          if (res.status === 200) return ((await res.json()) as { totalCount: number }).totalCount;
          searchProblems.push(`${res.status} ${(await res.text()).slice(0, 300)}`);
          return -res.status;
        } catch (error) {
          searchProblems.push(`${(error as Error).name}: ${(error as Error).message}`);
          return -1;
        }
      };
      // Both search replicas hold them: queries go to either.
      let counts: number[] = [];
      await eventually(
        async () => {
          counts = await Promise.all(Array.from({ length: 6 }, seededCount));
          return counts.every((n) => n === SEEDED_RECORDS);
        },
        { timeoutMs: 20_000, what: "the seeded records in both search replicas" },
      ).catch((error: Error) => {
        throw new Error(`${error.message} (counted ${counts.join(", ")}; ${searchProblems.slice(-2).join("; ")})`);
      });

      const load = emptyLoad();
      let restarting = true;
      const running = runLoad(d, load, {
        durationMs: LOAD_BOUND_MS,
        concurrency: 4,
        reads: true,
        timeoutMs: 20_000,
        until: () => !restarting,
      });
      // A restarted search replica must not answer from an index that lacks what it held before.
      const searchCounts: number[] = [];
      const searching = (async () => {
        while (restarting) {
          searchCounts.push(await seededCount());
          await new Promise((r) => setTimeout(r, 100));
        }
      })();

      const restarts: Restart[] = [];
      try {
        for (const copy of COPIES_RESTARTED) {
          for (const kind of ACTOR_NAMES) {
            const name = `${kind}-${copy}`;
            const exit = await d.stopGracefully(name);
            await d.start(name);
            const servingMs = await d.waitServing(name, 60_000);
            restarts.push({ process: name, exit: exit.signal ?? String(exit.code), stopMs: exit.ms, servingMs });
          }
        }
      } finally {
        restarting = false;
        await running;
        await searching;
        console.log("\nrolling restart: each process");
        console.table(restarts);
      }

      const { lost, undelivered, tasksNotOnce, duplicated } = await settledOutcome(d, load, {
        timeoutMs: 30_000,
        what: "the rolling restart",
      });
      const nonSuccess = Object.fromEntries(Object.entries(load.statuses).filter(([s]) => !(Number(s) >= 200 && Number(s) < 300)));
      console.log("\nrolling restart: summary");
      console.table([
        {
          restarts: restarts.length,
          requests: load.requests,
          accepted: writesAccepted(load),
          events: load.accepted.events.size,
          tasks: load.accepted.tasks.size,
          failed: Object.values(nonSuccess).reduce((a, n) => a + n, 0) + load.hung,
          lost: lost.length + undelivered.length + tasksNotOnce.length,
          duplicates: duplicated.length,
          searches: searchCounts.length,
          p50Ms: Math.round(latencyPercentile(load.latenciesMs, 50)),
          p99Ms: Math.round(latencyPercentile(load.latenciesMs, 99)),
          maxMs: Math.round(Math.max(0, ...load.latenciesMs)),
        },
      ]);
      console.log("rolling restart: statuses per kind", JSON.stringify(load.byKind));

      expect(
        restarts.filter((r) => r.exit !== "0"),
        "processes that did not exit 0 on SIGTERM",
      ).toEqual([]);
      expect(nonSuccess, load.failures.join("\n")).toEqual({});
      expect(load.hung, "requests without an answer").toBe(0);
      expect(lost, "accepted writes not found").toEqual([]);
      expect(undelivered, "accepted events never delivered").toEqual([]);
      expect(duplicated, "events delivered more than once").toEqual([]);
      expect(tasksNotOnce, "accepted content tasks not succeeded exactly once").toEqual([]);
      expect(
        searchCounts.filter((n) => n !== SEEDED_RECORDS),
        `search answers that missed seeded records (or failed: minus the status) ${searchProblems.slice(0, 5).join("; ")}`,
      ).toEqual([]);
      // The load ran across every restart and touched every kind of request.
      expect(Object.keys(load.byKind).sort()).toEqual(
        [
          "event",
          "project",
          "project-get",
          "read",
          "record",
          "search",
          "segment",
          "segment-get",
          "subscribe",
          "task",
          "twin",
          "twin-get",
        ].sort(),
      );
      expect(writesAccepted(load)).toBeGreaterThan(restarts.length * 5);
    },
    FULL ? 900_000 : 300_000,
  );
});
