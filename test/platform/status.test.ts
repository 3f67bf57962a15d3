import { describe, expect, it as plain } from "vitest";
import type { ServiceStats } from "@nats-io/services";
import { FleetWatch, GONE_KEPT_MS, processOf, summarize } from "../../actors/system/status.ts";
import { statusTable } from "../../bin/status-table.ts";
import { OPERATORS_GROUP, type FleetStatus } from "../../subjects/system.ts";
import { clientToken, startDerrick, TEST_CLIENTS, testClient } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";

const OPERATOR = testClient("operator", [OPERATORS_GROUP]);
const it = derrickTest({
  actors: ["system", "identity", "notifications", "dispatcher", "deliverer", "search", "storage", "projects"],
  env: { DERRICK_CLIENTS: JSON.stringify([...Object.values(TEST_CLIENTS), OPERATOR]) },
});

const stats = (id: string, actor: string, data: Record<string, unknown>, requests = 4): ServiceStats =>
  ({
    type: "io.nats.micro.v1.stats_response",
    name: `derrick-${actor}`,
    id,
    version: "1.2.3",
    started: "2026-11-28T10:00:00.000Z",
    metadata: { actor, host: "rig-a", pid: "42" },
    endpoints: [
      {
        name: "a",
        subject: "s.a",
        queue_group: "q",
        num_requests: requests,
        num_errors: 1,
        processing_time: 8e6,
        average_processing_time: 2e6,
        last_error: "",
        data,
      },
      {
        name: "b",
        subject: "s.b",
        queue_group: "q",
        num_requests: 0,
        num_errors: 0,
        processing_time: 0,
        average_processing_time: 0,
        last_error: "",
        data,
      },
    ],
  }) as unknown as ServiceStats;

describe("fleet status, pure", () => {
  plain("status - a process's numbers are summed over its endpoints; load and work come from its stats data", () => {
    const now = new Date("2026-11-28T10:01:00.000Z");
    const { actor, process } = processOf(stats("p1", "search", { inflight: 2, queued: 5, appliedSeq: 90 }), now);
    expect(actor).toBe("search");
    expect(process).toMatchObject({ id: "p1", state: "up", host: "rig-a", pid: 42, uptimeSeconds: 60, requests: 4, errors: 1 });
    expect(process).toMatchObject({ averageProcessingMs: 2, inflight: 2, queued: 5, work: { appliedSeq: 90 } });
  });

  plain("status - a process that stops answering is shown as gone with its last numbers, then forgotten", () => {
    const watch = new FleetWatch();
    const t0 = new Date("2026-11-28T10:00:00.000Z");
    const both = [processOf(stats("p1", "search", {}), t0), processOf(stats("p2", "search", {}), t0)];
    expect(watch.observe(both, t0)[0]!.processes.map((p) => p.state)).toEqual(["up", "up"]);
    const t1 = new Date(t0.getTime() + 1_000);
    const [search] = watch.observe([processOf(stats("p1", "search", {}), t1)], t1);
    expect(search!.processes.map((p) => [p.id, p.state, p.lastSeenAt])).toEqual([
      ["p1", "up", t1.toISOString()],
      ["p2", "gone", t0.toISOString()],
    ]);
    const later = new Date(t0.getTime() + GONE_KEPT_MS + 1);
    expect(watch.observe([processOf(stats("p1", "search", {}), later)], later)[0]!.processes.map((p) => p.id)).toEqual(["p1"]);
  });

  plain(
    "status - replica lag is RECORDS' last sequence less each replica's applied one; dead letters and queued tasks are stream counts",
    () => {
      const now = new Date();
      const actors = new FleetWatch().observe(
        [
          processOf(stats("r1", "search", { appliedSeq: 70 }), now),
          processOf(stats("r2", "search", { appliedSeq: 100 }), now),
          processOf(stats("n1", "notifications", { pausedSubscriptions: 3 }), now),
        ],
        now,
      );
      const stream = (name: string, messages: number, lastSeq: number, ackPending = 0) => ({
        name,
        messages,
        bytes: 0,
        lastSeq,
        consumers: [{ name: "w", pending: 0, ackPending, redelivered: 0, ackFloor: 0 }],
      });
      const fleet = summarize(now, actors, [stream("RECORDS", 100, 100), stream("DEAD", 7, 9), stream("CONTENT_TASKS", 3, 50, 1)], {
        count: 0,
        bytes: 0,
      });
      expect(fleet.search.replicas).toEqual([
        { id: "r1", appliedSeq: 70, lagRecords: 30 },
        { id: "r2", appliedSeq: 100, lagRecords: 0 },
      ]);
      expect(fleet.notifications).toEqual({ deadLetters: 7, pausedSubscriptions: 3 });
      expect(fleet.content).toEqual({ tasksQueued: 2, tasksRunning: 1 });
      const table = statusTable(fleet);
      expect(table).toMatch(/^search\s+up\s+rig-a\s+42\s+1\.2\.3/m);
      expect(table).toContain("dead letters: 7   paused subscriptions: 3   content tasks queued: 2   running: 1");
    },
  );
});

describe("GET /v1/system/status", () => {
  it("status - an operator sees every actor process, the streams with their durable consumers, and a second process that stops is shown as gone", async ({
    derrick,
    nats,
  }) => {
    const token = await clientToken(derrick.url, OPERATOR);
    const read = async () => {
      const res = await fetch(`${derrick.url}/v1/system/status`, {
        headers: { authorization: `Bearer ${token}`, appkey: OPERATOR.appkey },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as FleetStatus;
    };
    const second = await startDerrick(nats, { actors: ["search"], edge: false });
    let fleet = await read();
    const names = fleet.actors.map((a) => a.name);
    for (const actor of ["system", "identity", "notifications", "dispatcher", "deliverer", "search", "storage", "projects"])
      expect(names).toContain(actor);
    const search = fleet.actors.find((a) => a.name === "search")!.processes;
    expect(search.map((p) => p.state)).toEqual(["up", "up"]);
    expect(search.every((p) => p.pid === process.pid && p.work?.appliedSeq !== undefined)).toBe(true);
    expect(fleet.search.replicas).toHaveLength(2);
    const streams = fleet.streams.map((s) => s.name);
    expect(streams).toEqual(expect.arrayContaining(["RECORDS", "EVENTS", "DELIVERIES", "DEAD", "CONTENT_TASKS"]));
    expect(fleet.streams.find((s) => s.name === "DELIVERIES")!.consumers.length).toBeGreaterThan(0);
    expect(fleet.buckets.count).toBeGreaterThan(0);

    const secondIds = new Set(fleet.actors.find((a) => a.name === "search")!.processes.map((p) => p.id));
    await second.cleanup();
    fleet = await read();
    const after = fleet.actors.find((a) => a.name === "search")!.processes;
    expect(after.filter((p) => p.state === "gone")).toHaveLength(1);
    expect(after.every((p) => secondIds.has(p.id))).toBe(true);
    expect(fleet.search.replicas).toHaveLength(1);
  });

  it("status - a client without derrick.operators is refused with 403 naming the group", async ({ derrick }) => {
    expect((await expectProblem(await derrick.call("/v1/system/status", { partition: null }), 403)).detail).toMatch(/derrick\.operators/);
  });
});
