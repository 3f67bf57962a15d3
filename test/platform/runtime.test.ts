import { describe, expect } from "vitest";
import { Svcm } from "@nats-io/services";
import { jetstream } from "@nats-io/jetstream";
import { startDerrick, eventually } from "../harness/index.ts";
import { connectNats } from "../../platform/nats.ts";
import { createLogger } from "../../platform/logger.ts";
import { serveActor, endpoint } from "../../actors/runtime/service.ts";
import { subjects, serviceName, DerrickError, reply } from "../../subjects/index.ts";
import { Bus } from "../../platform/transport/index.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ACTOR_NAMES, loadConfig } from "../../config/index.ts";
import { startActors } from "../../actors/index.ts";
import { TEST_CLIENTS } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { Problem } from "../../subjects/errors.ts";

const silent = createLogger("silent");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function echo(url: string, body: unknown = { ping: 1 }) {
  return fetch(`${url}/v1/system/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

const it = natsTest();

describe("actor runtime", () => {
  it("runtime - no actor serving a subject is 503 with Retry-After", async ({ nats }) => {
    const edge = await startDerrick(nats, { actors: ["identity"] });
    try {
      const res = await echo(edge.url);
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(res.headers.get("content-type")).toContain("application/problem+json");
    } finally {
      await edge.cleanup();
    }
  });

  it("runtime - an actor slower than the request timeout is 504, and skips work past its deadline", async ({ nats }) => {
    const edge = await startDerrick(nats, { actors: ["identity"], env: { DERRICK_REQUEST_TIMEOUT: "200ms" } });
    const nc = await connectNats(nats.url, "slow-actor");
    let ran = 0;
    const slow = await serveActor(
      nc,
      {
        name: "system",
        version: "0.0.0",
        description: "slow",
        endpoints: [endpoint({ name: "echo", subject: subjects.system.echo(), handler: async (b) => (ran++, await sleep(400), b) })],
      },
      { log: silent, concurrency: 1 },
    );
    try {
      const first = echo(edge.url);
      const second = echo(edge.url); // queued behind the first; its deadline passes before it runs
      const [a, b] = await Promise.all([first, second]);
      expect(a.status).toBe(504);
      expect(b.status).toBe(504);
      await sleep(500);
      expect(ran).toBe(1);
    } finally {
      await slow.stop();
      await nc.close();
      await edge.cleanup();
    }
  });

  it("runtime - beyond its queue (requests or body bytes) an overloaded actor answers 503 with Retry-After at once, without running the request", async ({
    nats,
  }) => {
    const nc = await connectNats(nats.url, "busy-actor");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const ran: number[] = [];
    const actor = await serveActor(
      nc,
      {
        name: "busy",
        version: "1.0.0",
        description: "holds every request until released",
        endpoints: [
          endpoint({ name: "work", subject: "test.busy.work", handler: async (b) => (ran.push((b as { i: number }).i), await gate, b) }),
        ],
      },
      { log: silent, concurrency: 1, queue: { requests: 2, bytes: 1000 } },
    );
    const bus = new Bus(nc, { timeoutMs: 5000 });
    const send = (i: number, pad = 0) =>
      bus.request<{ i: number }>("test.busy.work", { i, pad: "x".repeat(pad) }).then(
        (r) => r.body.i,
        (e: DerrickError) => e,
      );
    try {
      const running = send(0);
      await eventually(() => ran.length === 1, { what: "the first request running" });
      const waiting = send(1, 600); // queued: 1 of 2 requests, ~620 of 1000 bytes
      await bus.request("test.busy.none", {}).catch(() => undefined); // a round trip: request 1 has reached the actor
      const tooLarge = await send(2, 600); // the bytes would exceed 1000
      const small = send(3); // fits: 2 of 2 requests
      await bus.request("test.busy.none", {}).catch(() => undefined);
      const overCount = await send(4); // a third waiting request
      for (const refused of [tooLarge, overCount]) {
        expect(refused).toBeInstanceOf(DerrickError);
        expect((refused as DerrickError).status).toBe(503);
        expect((refused as DerrickError).headers["Retry-After"]).toBe("1");
        expect((refused as DerrickError).detail).toContain("busy actor is overloaded");
      }
      release();
      expect(await Promise.all([running, waiting, small])).toEqual([0, 1, 3]);
      expect(ran).toEqual([0, 1, 3]);
      // Once the queue has room again, requests are taken.
      expect(await send(5)).toBe(5);
    } finally {
      release();
      await actor.stop();
      await nc.close();
    }
  });

  it("runtime - reply header blocks made once per status and headers arrive whole every time, a per-resource ETag each its own", async ({
    nats,
  }) => {
    const nc = await connectNats(nats.url, "headers-actor");
    let n = 0;
    const actor = await serveActor(
      nc,
      {
        name: "headers",
        version: "1.0.0",
        description: "answers with headers",
        endpoints: [
          endpoint({
            name: "answer",
            subject: "test.headers.answer",
            handler: (input) => {
              const { kind } = input as { kind: string };
              n++;
              if (kind === "created") return reply({ n }, 201, { "x-kind": "same" });
              if (kind === "tagged") return reply({ n }, 200, { ETag: `"${n}"` });
              return reply({ n }, 200, { "x-kind": "same" });
            },
          }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(nc, { timeoutMs: 2000 });
    try {
      const seen: Array<[number, Record<string, string>]> = [];
      for (let round = 0; round < 3; round++)
        for (const kind of ["plain", "created", "tagged"]) {
          const answer = await bus.request<{ n: number }>("test.headers.answer", { kind });
          seen.push([answer.status, { ...answer.headers }]);
        }
      const plain = seen.filter((_, i) => i % 3 === 0);
      const created = seen.filter((_, i) => i % 3 === 1);
      const tagged = seen.filter((_, i) => i % 3 === 2);
      for (const row of plain) expect(row).toEqual([200, { "x-kind": "same" }]);
      for (const row of created) expect(row).toEqual([201, { "x-kind": "same" }]);
      expect(tagged.map(([status, headers]) => [status, headers.ETag])).toEqual([
        [200, '"3"'],
        [200, '"6"'],
        [200, '"9"'],
      ]);
    } finally {
      await actor.stop();
      await nc.close();
    }
  });

  it("runtime - an actor error keeps its status and problem across the NATS hop", async ({ nats }) => {
    const nc = await connectNats(nats.url, "failing-actor");
    const actor = await serveActor(
      nc,
      {
        name: "failing",
        version: "1.0.0",
        description: "fails",
        endpoints: [
          endpoint({
            name: "conflict",
            subject: "test.failing.conflict",
            handler: () => {
              throw new DerrickError(409, "busy", { extensions: { state: "running" } });
            },
          }),
          endpoint({
            name: "crash",
            subject: "test.failing.crash",
            handler: () => {
              throw new Error("secret internals");
            },
          }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(nc, { timeoutMs: 2000 });
    try {
      const conflict = await bus.request("test.failing.conflict", {}).catch((e) => e as DerrickError);
      expect(conflict).toBeInstanceOf(DerrickError);
      expect((conflict as DerrickError).status).toBe(409);
      expect((conflict as DerrickError).toProblem()).toMatchObject({ state: "running", detail: "busy" });
      const crash = (await bus.request("test.failing.crash", {}).catch((e) => e)) as DerrickError;
      expect(crash.status).toBe(500);
      expect(crash.detail).not.toContain("secret internals");
      // the service survived both failures
      expect(((await bus.request("test.failing.conflict", {}).catch((e) => e)) as DerrickError).status).toBe(409);
    } finally {
      await actor.stop();
      await nc.close();
    }
  });

  it("runtime - a JetStream write no stream answered (a leader being elected) is 503 with Retry-After, not 500", async ({ nats }) => {
    const nc = await connectNats(nats.url, "jetstream-actor");
    const js = jetstream(nc);
    const actor = await serveActor(
      nc,
      {
        name: "electing",
        version: "1.0.0",
        description: "writes where no stream listens",
        endpoints: [
          endpoint({
            name: "write",
            subject: "test.electing.write",
            // No stream takes this subject: the server answers no responders, as while a stream has no leader.
            handler: async () => (await js.publish("test.no-stream.write", "x", { retries: 1 })).seq,
          }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(nc, { timeoutMs: 5000 });
    try {
      const failed = (await bus.request("test.electing.write", {}).catch((e) => e)) as DerrickError;
      expect(failed.status).toBe(503);
      expect(failed.headers["Retry-After"]).toBe("1");
    } finally {
      await actor.stop();
      await nc.close();
    }
  });

  it("runtime - /readyz goes 503 when a configured actor is gone and back to 200 when it returns", async ({ nats }) => {
    const edge = await startDerrick(nats, { actors: [], env: { ACTORS: "system,identity" } });
    const identity = await startDerrick(nats, { edge: false, actors: ["identity"] });
    let system = await startDerrick(nats, { edge: false, actors: ["system"] });
    try {
      await eventually(async () => (await fetch(`${edge.url}/readyz`)).status === 200, { what: "ready" });
      await system.cleanup();
      const res = await eventually(
        async () => {
          const r = await fetch(`${edge.url}/readyz`);
          return r.status === 503 ? r : undefined;
        },
        { what: "not ready" },
      );
      expect(res.headers.get("retry-after")).toBeTruthy();
      expect((await json<Problem>(res)).detail).toContain("system");
      system = await startDerrick(nats, { edge: false, actors: ["system"] });
      await eventually(async () => (await fetch(`${edge.url}/readyz`)).status === 200, { what: "ready again" });
    } finally {
      await system.cleanup();
      await identity.cleanup();
      await edge.cleanup();
    }
  });

  it("runtime - concurrent /readyz calls share one actor ping: a flood of probes does not send a ping each", async ({ nats }) => {
    // system is configured but not running: each ping waits its full 500 ms for the missing actor.
    const edge = await startDerrick(nats, { actors: ["identity"], env: { ACTORS: "system,identity" } });
    try {
      // Pings are requests on the connection's shared reply inbox: count the requests waiting there.
      const nc = edge.nc as unknown as { protocol: { muxSubscriptions: { size(): number } } };
      const idle = nc.protocol.muxSubscriptions.size();
      const probes = Array.from({ length: 40 }, () => fetch(`${edge.url}/readyz`));
      let most = 0;
      const watching = setInterval(() => (most = Math.max(most, nc.protocol.muxSubscriptions.size() - idle)), 5);
      const answers = await Promise.all(probes);
      clearInterval(watching);
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 503));
      expect(most).toBeLessThanOrEqual(1);
    } finally {
      await edge.cleanup();
    }
  });

  it("runtime - a stopped actor leaves no subscription or status listener on the connection it was given", async ({ nats }) => {
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-stop-"));
    const cfg = loadConfig({
      NATS_URL: nats.url,
      DERRICK_DATA_DIR: dataDir,
      DERRICK_LOG_LEVEL: "silent",
      DERRICK_PARTITIONS: "opendes",
      DERRICK_CLIENTS: JSON.stringify(Object.values(TEST_CLIENTS)),
    });
    const nc = await connectNats(nats.url, "stop-release");
    // The connection's shared request inbox lives as long as the connection: made before counting.
    await nc.request("$JS.API.INFO", undefined, { timeout: 2_000 });
    const held = () => {
      const protocol = (nc as unknown as { protocol: { listeners: unknown[]; subscriptions: { size(): number } } }).protocol;
      return { listeners: protocol.listeners.length, subscriptions: protocol.subscriptions.size() };
    };
    const idle = held();
    try {
      for (const name of ACTOR_NAMES) {
        const running = await startActors([name], nc, cfg, silent);
        await running.stop();
        expect({ actor: name, ...held() }).toEqual({ actor: name, ...idle });
      }
    } finally {
      await nc.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("runtime - two processes of an actor share its queue group and the work", async ({ nats }) => {
    const a = await startDerrick(nats, { edge: false, actors: ["system"] });
    const b = await startDerrick(nats, { edge: false, actors: ["system"] });
    const nc = await connectNats(nats.url, "client");
    try {
      const bus = new Bus(nc, { timeoutMs: 2000 });
      await Promise.all(Array.from({ length: 200 }, (_, i) => bus.request(subjects.system.echo(), { i })));
      const stats = [];
      for await (const s of await new Svcm(nc).client({ strategy: "timer", maxWait: 300 }).stats(serviceName("system"))) stats.push(s);
      expect(stats.length).toBe(2);
      const counts = stats.map((s) => s.endpoints?.find((e) => e.name === "echo")?.num_requests ?? 0);
      expect(counts.reduce((x, y) => x + y, 0)).toBe(200);
      for (const count of counts) expect(count).toBeGreaterThan(20);
      expect(stats.every((s) => s.endpoints?.every((e) => e.queue_group === serviceName("system")))).toBe(true);
    } finally {
      await nc.close();
      await a.cleanup();
      await b.cleanup();
    }
  });

  it("runtime - stopping an actor under load answers every request it accepted", async ({ nats }) => {
    const nc = await connectNats(nats.url, "drain-client");
    const serverNc = await connectNats(nats.url, "drain-actor");
    const otherNc = await connectNats(nats.url, "drain-actor-2");
    const spec = (tag: string) => ({
      name: "drainer",
      version: "1.0.0",
      description: "slow echo",
      endpoints: [endpoint({ name: "work", subject: "test.drainer.work", handler: async (b: unknown) => (await sleep(30), { tag, b }) })],
    });
    const first = await serveActor(serverNc, spec("first"), { log: silent, concurrency: 8 });
    const second = await serveActor(otherNc, spec("second"), { log: silent, concurrency: 8 });
    const bus = new Bus(nc, { timeoutMs: 5000 });
    try {
      const requests = Array.from({ length: 300 }, (_, i) => bus.request<{ tag: string }>("test.drainer.work", { i }));
      await sleep(100);
      await first.stop(); // drains mid-load; the second process keeps serving
      const replies = await Promise.allSettled(requests);
      const failed = replies.filter((r) => r.status === "rejected");
      expect(failed).toEqual([]);
      const tags = replies.map((r) => (r as PromiseFulfilledResult<{ body: { tag: string } }>).value.body.tag);
      expect(tags).toContain("first");
      expect(tags).toContain("second");
    } finally {
      await second.stop();
      await Promise.all([nc.close(), serverNc.close(), otherNc.close()]);
    }
  });
});
