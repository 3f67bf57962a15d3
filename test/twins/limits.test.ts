import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { twinBucket } from "../../subjects/twins.ts";

const path = (twin: string) => `/api/twin-properties/v1/acme/prod/${twin}/twin-properties`;

/** One client must not be able to exhaust what every capability shares: streams (descriptors) and store bytes. */
describe("twin storage limits", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, {
      actors: ["identity", "twins"],
      env: { DERRICK_TWINS_MAX: "3", DERRICK_TWIN_MAX_BYTES: String(256 * 1024) },
    });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const put = (twin: string, twins: Array<{ name: string; value: string }>) =>
    derrick.call(path(twin), { method: "PUT", body: JSON.stringify({ group: "g", twins }), as: "admin", partition: null });

  it("twins - past DERRICK_TWINS_MAX a PUT that would create a twin is 507 problem+json; existing twins still take writes", async () => {
    for (const twin of ["dev-1", "dev-2", "dev-3"]) expect((await put(twin, [{ name: "p", value: "1" }])).status).toBe(200);
    const refused = await put("dev-4", [{ name: "p", value: "1" }]);
    expect(refused.status).toBe(507);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    expect(((await refused.json()) as { detail: string }).detail).toMatch(/DERRICK_TWINS_MAX/);
    const jsm = await jetstreamManager(derrick.nc);
    await expect(jsm.streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-4" })}`)).rejects.toThrow(
      /not found/,
    );
    expect((await put("dev-2", [{ name: "p", value: "2" }])).status).toBe(200);
  });

  it("twins - when JetStream cannot reserve a new twin's bytes (its store limit is taken) a PUT that would create one is 507 naming DERRICK_TWIN_MAX_BYTES, not 500; existing twins still take writes", async () => {
    // A server of its own with a small store limit: each twin's stream reserves 256 KiB of it.
    const own = await startTestNats({ maxFileStore: "1MB" });
    const small = await startDerrick(own, {
      actors: ["identity", "twins"],
      env: { DERRICK_TWINS_MAX: "0", DERRICK_TWIN_MAX_BYTES: String(256 * 1024) },
    });
    try {
      const putTo = (twin: string) =>
        small.call(path(twin), {
          method: "PUT",
          body: JSON.stringify({ group: "g", twins: [{ name: "p", value: "1" }] }),
          as: "admin",
          partition: null,
        });
      const statuses: number[] = [];
      for (let i = 0; i < 10 && statuses.at(-1) !== 507; i++) statuses.push((await putTo(`full-${i}`)).status);
      expect(statuses.at(-1)).toBe(507);
      expect(statuses.slice(0, -1).every((status) => status === 200)).toBe(true);
      expect(statuses.length).toBeGreaterThan(1);
      const refused = await putTo("full-last");
      expect(refused.status).toBe(507);
      expect(refused.headers.get("content-type")).toContain("application/problem+json");
      expect(((await refused.json()) as { detail: string }).detail).toMatch(/DERRICK_TWIN_MAX_BYTES/);
      expect((await putTo("full-0")).status).toBe(200);
    } finally {
      await small.cleanup();
      await own.cleanup();
    }
  });

  it("twins - concurrent first PUTs of one twin count it once towards DERRICK_TWINS_MAX", async () => {
    // A server of its own: the twins actor above (cap 3) would answer in the same queue group.
    const own = await startTestNats();
    const capped = await startDerrick(own, { actors: ["identity", "twins"], env: { DERRICK_TWINS_MAX: "3" } });
    try {
      const putTo = (twin: string, group: string) =>
        capped.call(path(twin), {
          method: "PUT",
          body: JSON.stringify({ group, twins: [{ name: "p", value: "1" }] }),
          as: "admin",
          partition: null,
        });
      expect((await putTo("fresh-1", "g")).status).toBe(200);
      const together = await Promise.all(["a", "b", "c", "d"].map((group) => putTo("fresh-2", group)));
      expect(together.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect((await putTo("fresh-3", "g")).status).toBe(200);
      expect((await putTo("fresh-4", "g")).status).toBe(507);
    } finally {
      await capped.cleanup();
      await own.cleanup();
    }
  });

  it("twins - a twin's bucket is capped at DERRICK_TWIN_MAX_BYTES: writes past it are 507, the stream says so", async () => {
    const jsm = await jetstreamManager(derrick.nc);
    const info = await jsm.streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-1" })}`);
    expect(info.config.max_bytes).toBe(256 * 1024);
    let status = 200;
    for (let i = 0; i < 20 && status === 200; i++) status = (await put("dev-1", [{ name: `big${i}`, value: "x".repeat(60_000) }])).status;
    expect(status).toBe(507);
    expect((await put("dev-3", [{ name: "other", value: "fine" }])).status).toBe(200);
  });
});
