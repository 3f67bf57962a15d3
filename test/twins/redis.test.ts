import { afterAll, describe, expect } from "vitest";
import { Redis } from "ioredis";
import { endKvWatches, eventually, startTestRedis, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { mirrorTo, putTwin, twinPath as pathOf, twinState } from "./helpers.ts";
import { DeviceClient, parseAppConfig, type TwinChange } from "../../sdk/index.ts";
import { twinBucket, type TwinPutReply } from "../../subjects/twins.ts";
import { RedisTwinBackend } from "../../sdk/kv/redis.ts";

const twinPath = pathOf("rdev");

const it = derrickTest({ actors: ["identity", "twins", "twin-mirror"], env: ({ redis }) => mirrorTo("rdev", redis) });

const put = (derrick: TestDerrick, group: string, twins: Array<{ name: string; value: string }>) =>
  putTwin(derrick, "rdev", { group, twins });

describe("device SDK over Redis with the twin mirror", () => {
  let device: DeviceClient | undefined;
  afterAll(async () => {
    await device?.close();
  });

  it("sdk redis - a REST PUT reaches the device's callback through Redis with the value and the version", async ({
    derrick,
    nats,
    redis,
  }) => {
    const config = parseAppConfig({
      Name: "RApp",
      AEA2: {
        RedisClient: { Server: "127.0.0.1", Port: String(redis.port) },
        BusClient: { Server: nats.url, Subscriptions: [{ DataIn: ["slbapps.RApp.DataIn"] }] },
      },
    });
    device = await DeviceClient.connect(config, { reconnectTimeWaitMs: 100 });
    const seen: TwinChange[] = [];
    device.observe("setpoints", undefined, (c) => seen.push(c));
    const res = await put(derrick, "setpoints", [
      { name: "a", value: "1" },
      { name: "b", value: "2" },
    ]);
    const body = await json<TwinPutReply>(res);
    await eventually(() => seen.length === 2, { what: "both values via Redis" });
    expect(seen.map((c) => [c.name, c.value, c.version]).sort()).toEqual([
      ["a", "1", body.twins[0]!.version],
      ["b", "2", body.twins[1]!.version],
    ]);
    await put(derrick, "setpoints", [{ name: "a", value: "3" }]);
    await eventually(() => seen.length === 3);
    expect(seen[2]).toMatchObject({ name: "a", value: "3" });
  });

  it("sdk redis - a reported value written on the device reaches JetStream (the REST GET)", async ({ derrick }) => {
    await device!.setReported("setpoints", "a", "3");
    await eventually(
      async () => {
        const state = await twinState(derrick, "rdev");
        return state.reported.setpoints?.a?.value === "3";
      },
      { what: "reported copied back" },
    );
  });

  it("sdk redis - a config twin is applied on a Redis-backed device and acknowledged back to JetStream", async ({
    derrick,
    nats,
    redis,
  }) => {
    const next = {
      Name: "RApp",
      AEA2: {
        RedisClient: { Server: "127.0.0.1", Port: String(redis.port) },
        BusClient: { Server: nats.url, Subscriptions: [{ DataIn: ["slbapps.RApp.Other"] }] },
      },
    };
    const text = JSON.stringify(next);
    await put(derrick, "config", [{ name: "RApp", value: text }]);
    await eventually(() => device!.config.bus.subscriptions.DataIn[0] === "slbapps.RApp.Other", { what: "reload" });
    await eventually(
      async () => {
        const state = await twinState(derrick, "rdev", "config");
        return state.reported.config?.RApp?.value === text;
      },
      { what: "ack in JetStream" },
    );
  });
  it("sdk redis - after Redis restarts empty, values put while it was down reach the callback once and in order, older ones are back, and a reported value written meanwhile reaches JetStream", async ({
    derrick,
    redis,
  }) => {
    const seen: TwinChange[] = [];
    device!.observe("restart", undefined, (c) => seen.push(c));
    await put(derrick, "restart", [{ name: "keep", value: "k" }]);
    await eventually(() => seen.some((c) => c.name === "keep"), { what: "value before the outage" });
    await redis.stop();
    const versions: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const res = await put(derrick, "restart", [{ name: "a", value: String(i) }]);
      expect(res.status).toBe(200);
      versions.push((await json<TwinPutReply>(res)).twins[0]!.version);
    }
    // Queued by the client until Redis is back.
    const reported = device!.setReported("restart", "r", "written while down");
    await redis.restart();
    await reported;
    await eventually(() => seen.some((c) => c.name === "a" && c.value === "5"), { what: "latest value after the restart" });
    const a = seen.filter((c) => c.name === "a").map((c) => c.version);
    expect(new Set(a).size).toBe(a.length);
    expect([...a].sort((x, y) => x - y)).toEqual(a);
    expect(a.at(-1)).toBe(versions.at(-1));
    // The restarted (memory-only) Redis lost everything: the mirror wrote the desired values again.
    await eventually(async () => (await device!.getDesired("restart", "keep"))?.value === "k", { what: "older desired value rewritten" });
    expect(seen.filter((c) => c.name === "keep")).toHaveLength(1);
    await eventually(
      async () => {
        const state = await twinState(derrick, "rdev", "restart");
        return state.reported.restart?.r?.value === "written while down";
      },
      { what: "reported value copied back" },
    );
  });

  it("sdk redis - a commit record the device wrote with names that are no list stops neither the twin mirror nor the GET: later PUTs still reach the device", async ({
    derrick,
    nc,
  }) => {
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "rdev" }));
    // A device may write any key of its own bucket: the mirror's watch replays this one after every restart.
    await kv.put("twin_commits/setpoints", JSON.stringify({ state: "pending", names: 1 }));
    const res = await put(derrick, "setpoints", [{ name: "a", value: "after a bad commit record" }]);
    expect(res.status).toBe(200);
    await eventually(async () => (await device!.getDesired("setpoints", "a"))?.value === "after a bad commit record", {
      what: "the PUT through the mirror",
    });
    expect((await derrick.call(twinPath, { as: "admin", partition: null })).status).toBe(200);
  });

  it("sdk redis - the mirror's watch that ends by itself is opened again: a PUT made afterwards reaches the device", async ({
    derrick,
  }) => {
    // The connection's KV watches: the mirror's and the identity actor's.
    expect(endKvWatches(derrick.nc)).toBeGreaterThanOrEqual(1);
    const res = await put(derrick, "setpoints", [{ name: "a", value: "after the watch ended" }]);
    expect(res.status).toBe(200);
    await eventually(async () => (await device!.getDesired("setpoints", "a"))?.value === "after the watch ended", {
      what: "the PUT through the re-opened watch",
    });
  });

  it("sdk redis - desired values put while the device's Redis is down are not queued one by one: once it is back the mirror writes the latest values, not every PUT", async ({
    derrick,
    redis,
  }) => {
    const seen: TwinChange[] = [];
    device!.observe("outage", undefined, (c) => seen.push(c));
    await redis.stop();
    for (let i = 1; i <= 60; i++) expect((await put(derrick, "outage", [{ name: "a", value: String(i) }])).status).toBe(200);
    await redis.restart();
    await eventually(() => seen.some((c) => c.name === "a" && c.value === "60"), { what: "the latest value after the outage" });
    // The restarted Redis counts from zero: one rewrite of the twin's latest values is a few SETs.
    const probe = new Redis(redis.url);
    try {
      const stats = await probe.info("commandstats");
      const sets = Number(/cmdstat_set:calls=(\d+)/.exec(stats)?.[1] ?? 0);
      expect(sets).toBeGreaterThan(0);
      expect(sets).toBeLessThan(30);
    } finally {
      probe.disconnect();
    }
    expect(seen.filter((c) => c.name === "a").map((c) => c.value)).toEqual(["60"]);
  });

  it("sdk redis - a desired value deleted while the device's Redis is down reaches the callback as a delete once Redis is back", async ({
    derrick,
    redis,
  }) => {
    const seen: TwinChange[] = [];
    device!.observe("gone", undefined, (c) => seen.push(c));
    await put(derrick, "gone", [
      { name: "p", value: "1" },
      { name: "q", value: "1" },
    ]);
    await eventually(() => seen.length === 2, { what: "both values before the outage" });
    await redis.stop();
    expect((await derrick.call(`${twinPath}/gone/p`, { method: "DELETE", as: "admin", partition: null })).status).toBe(204);
    await redis.restart();
    await eventually(() => seen.some((c) => c.name === "p" && c.value === null), { what: "the delete after the outage", timeoutMs: 8_000 });
    expect(seen.filter((c) => c.name === "q")).toHaveLength(1);
    expect(await device!.getDesired("gone", "q")).toMatchObject({ value: "1" });
  });

  it("sdk redis - a REST DELETE of a reported value deletes it in the device's Redis too, so the mirror does not copy it back", async ({
    derrick,
  }) => {
    await device!.setReported("deleted", "r", "1");
    const reportedR = async () => (await twinState(derrick, "rdev", "deleted")).reported.deleted?.r?.value;
    await eventually(async () => (await reportedR()) === "1", { what: "the reported value in JetStream" });
    expect((await derrick.call(`${twinPath}/deleted/r`, { method: "DELETE", as: "admin", partition: null })).status).toBe(204);
    await eventually(async () => (await device!.getReported("deleted", "r")) === undefined, { what: "the reported value gone from Redis" });
    expect(await reportedR()).toBeUndefined();
  });
});

describe("device SDK Redis backend while its Redis is down", () => {
  it("sdk redis - reads and writes waiting for an unreachable Redis are bounded: past maxWaiting a call fails at once, and those waiting land once it is back", async () => {
    const redis = await startTestRedis();
    const backend = new RedisTwinBackend({ host: "127.0.0.1", port: redis.port, maxWaiting: 3 }, () => undefined);
    const status = () => (backend as unknown as { cmd: Redis }).cmd.status;
    try {
      await backend.put("g", "reported", "n", "before");
      await redis.stop();
      await eventually(() => status() !== "ready", { what: "the client saw Redis go" });
      const waiting = ["1", "2", "3"].map((v) => backend.put("g", "reported", "n", v));
      await expect(backend.put("g", "reported", "n", "4")).rejects.toThrow(/unreachable and 3 twin reads and writes already wait/);
      await expect(backend.get("g", "reported", "n")).rejects.toThrow(/already wait/);
      await redis.restart();
      await Promise.all(waiting);
      expect(await backend.get("g", "reported", "n")).toEqual({ value: "3", version: 0 });
      // Back: calls are taken again.
      await backend.put("g", "reported", "n", "5");
      expect((await backend.get("g", "reported", "n"))?.value).toBe("5");
    } finally {
      await backend.close();
      await redis.cleanup();
    }
  });
});
