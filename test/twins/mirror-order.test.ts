import { afterAll, describe, expect } from "vitest";
import type { KV } from "@nats-io/kv";
import { Redis } from "ioredis";
import { eventually, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { twinBucket } from "../../subjects/twins.ts";
import { mirrorTo } from "./helpers.ts";

const it = derrickTest({ actors: ["twins", "twin-mirror"], env: ({ redis }) => mirrorTo("order", redis) });

// The twin mirror copies a reported value Redis → JetStream on each keyspace notification. Copies of
// one key used to run concurrently (read Redis, read JetStream, put): a copy that read the newer
// value could find JetStream already equal to it (an older copy's put not landed yet) and skip, then
// the older copy's put landed last — JetStream kept the older value for good. And a device delete
// the mirror copied came back through its watch and deleted the device's next value in Redis when
// it equalled the one before the delete.
describe("twin mirror: reported values keep per-key order", () => {
  let kv: KV;
  let device: Redis;
  it.beforeAll(async ({ nc, redis }) => {
    kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "order" }));
    device = new Redis(redis.url);
  });
  afterAll(() => {
    device?.disconnect();
  });

  it("twin mirror - rapid writes of one reported key (toggling values and deletes) leave JetStream with the device's last value", {
    timeout: 60_000,
  }, async ({ redis }) => {
    await device.set("twin_properties/state/reported/first", "1");
    await eventually(async () => (await kv.get("twin_properties/state/reported/first"))?.string() === "1", { what: "a single copy" });
    // Three bursts of 40 keys × 40 writes: on the unserialized copies at least one key of one burst
    // ended wrong in every run tried (one burst alone: about one run in three).
    for (let burst = 0; burst < 3; burst++) {
      const keys = Array.from({ length: 40 }, (_, i) => `twin_properties/state${burst}/reported/k${i}`);
      const rounds = 40;
      // Each key toggles on/off, now and then deleted, one write after another (each acknowledged
      // by Redis, so the mirror's reads fall between them): several copies of one key in flight.
      // All keys at once, one connection per key so their writes interleave.
      const writers = keys.map(() => new Redis(redis.url));
      try {
        await Promise.all(
          keys.map(async (key, k) => {
            const writer = writers[k]!;
            for (let round = 0; round < rounds; round++) {
              await writer.set(key, round % 2 === 0 ? "on" : "off");
              if (round % 7 === 3) await writer.del(key);
            }
          }),
        );
      } finally {
        for (const writer of writers) writer.disconnect();
      }
      // The last value equals earlier ones (on, off, on, …): a copy comparing it with JetStream may find it there already.
      const last = keys.map(() => ((rounds - 1) % 2 === 0 ? "on" : "off"));
      const inJetStream = async () =>
        Promise.all(
          keys.map(async (key) => {
            const entry = await kv.get(key);
            return entry?.operation === "PUT" ? entry.string() : null;
          }),
        );
      // Give the copies time to finish, then compare (a lost order never heals by itself).
      const deadline = Date.now() + 5_000;
      let current = await inJetStream();
      while (Date.now() < deadline && JSON.stringify(current) !== JSON.stringify(last)) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        current = await inJetStream();
      }
      expect(current, `burst ${burst}: JetStream`).toEqual(last);
      // And the mirror did not take the device's value away in Redis (its own copied delete coming
      // back through the watch used to delete a value equal to the one before it).
      expect(await device.mget(...keys), `burst ${burst}: Redis`).toEqual(last);
    }
  });
});
