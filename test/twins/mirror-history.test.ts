import { afterAll, describe, expect } from "vitest";
import { Redis } from "ioredis";
import { eventually, startDerrick, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { twinKey } from "../../subjects/twins.ts";
import { mirrorTo, putTwin } from "./helpers.ts";

// The writer (the fixture's derrick) runs first; the test starts the mirror later.
const it = derrickTest({ actors: ["identity", "twins"] });

// A twin bucket keeps two revisions per key, so after a few PUTs it holds values of an older PUT whose
// claim records JetStream already removed. A mirror starting on it replays that history: copied as it
// came, the device's Redis would hold the older PUT's values one at a time before the current ones.
describe("twin mirror: starting on a twin with history", () => {
  let mirror: TestDerrick | undefined;
  let monitor: Awaited<ReturnType<Redis["monitor"]>> | undefined;
  let device: Redis | undefined;
  afterAll(async () => {
    monitor?.disconnect();
    device?.disconnect();
    await mirror?.cleanup();
  });

  it("twin mirror - a mirror started after several PUTs writes the device's Redis only the current values, never an older PUT's", async ({
    derrick: writer,
    nats,
    redis,
  }) => {
    const names = ["a", "b", "c"];
    for (let round = 0; round < 4; round++) {
      const twins = names.map((name) => ({ name, value: `r${round}` }));
      expect((await putTwin(writer, "hist", { group: "g", twins })).status).toBe(200);
    }
    const written: string[] = [];
    const deviceRedis = new Redis(redis.url);
    device = deviceRedis;
    monitor = await deviceRedis.monitor();
    monitor.on("monitor", (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === "set") written.push(`${args[1]}=${args[2]}`);
    });
    mirror = await startDerrick(nats, { actors: ["twin-mirror"], env: mirrorTo("hist", redis) });
    const keys = names.map((n) => twinKey("g", "desired", n));
    await eventually(async () => (await deviceRedis.mget(...keys)).every((v) => v === "r3"), { what: "the current values in Redis" });
    await new Promise((r) => setTimeout(r, 200));
    expect(written.filter((w) => keys.some((k) => w.startsWith(`${k}=`))).sort()).toEqual(keys.map((k) => `${k}=r3`));
  });
});
