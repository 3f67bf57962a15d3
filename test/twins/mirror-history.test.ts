import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import {
  eventually,
  startDerrick,
  startTestNats,
  startTestRedis,
  type TestDerrick,
  type TestNats,
  type TestRedis,
} from "../harness/index.ts";
import { twinKey } from "../../subjects/twins.ts";

// A twin bucket keeps two revisions per key, so after a few PUTs it holds values of an older PUT whose
// claim records JetStream already removed. A mirror starting on it replays that history: copied as it
// came, the device's Redis would hold the older PUT's values one at a time before the current ones.
describe("twin mirror: starting on a twin with history", () => {
  let nats: TestNats;
  let redis: TestRedis;
  let writer: TestDerrick;
  let mirror: TestDerrick | undefined;
  let monitor: Awaited<ReturnType<Redis["monitor"]>> | undefined;
  let device: Redis;
  beforeAll(async () => {
    nats = await startTestNats();
    redis = await startTestRedis();
    writer = await startDerrick(nats, { actors: ["identity", "twins"] });
    device = new Redis(redis.url);
  });
  afterAll(async () => {
    monitor?.disconnect();
    device?.disconnect();
    await mirror?.cleanup();
    await writer?.cleanup();
    await redis?.cleanup();
    await nats?.cleanup();
  });

  it("twin mirror - a mirror started after several PUTs writes the device's Redis only the current values, never an older PUT's", async () => {
    const names = ["a", "b", "c"];
    const path = "/api/twin-properties/v1/acme/prod/hist/twin-properties";
    for (let round = 0; round < 4; round++) {
      const body = JSON.stringify({ group: "g", twins: names.map((name) => ({ name, value: `r${round}` })) });
      expect((await writer.call(path, { method: "PUT", body, as: "admin", partition: null })).status).toBe(200);
    }
    const written: string[] = [];
    monitor = await device.monitor();
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === "set") written.push(`${args[1]}=${args[2]}`);
    });
    mirror = await startDerrick(nats, {
      actors: ["twin-mirror"],
      env: { DERRICK_TWIN_MIRRORS: JSON.stringify([{ organization: "acme", environment: "prod", twinId: "hist", redis: redis.url }]) },
    });
    const keys = names.map((n) => twinKey("g", "desired", n));
    await eventually(async () => (await device.mget(...keys)).every((v) => v === "r3"), { what: "the current values in Redis" });
    await new Promise((r) => setTimeout(r, 200));
    expect(written.filter((w) => keys.some((k) => w.startsWith(`${k}=`))).sort()).toEqual(keys.map((k) => `${k}=r3`));
  });
});
