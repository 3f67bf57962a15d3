import { describe, expect } from "vitest";
import type { TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";
import { twinBucket } from "../../subjects/twins.ts";
import type { ActorName } from "../../config/index.ts";
import { putTwin } from "./helpers.ts";

const TWINS: ActorName[] = ["identity", "twins"];
const limited = derrickTest({ actors: TWINS, env: { DERRICK_TWINS_MAX: "3", DERRICK_TWIN_MAX_BYTES: String(256 * 1024) } });
// Servers of their own: a small store limit, where each twin's stream reserves 256 KiB of it; and a
// twins actor that would otherwise answer in the same queue group as the one above (cap 3).
const smallStore = derrickTest({
  actors: TWINS,
  nats: { maxFileStore: "1MB" },
  env: { DERRICK_TWINS_MAX: "0", DERRICK_TWIN_MAX_BYTES: String(256 * 1024) },
});
const capped = derrickTest({ actors: TWINS, env: { DERRICK_TWINS_MAX: "3" } });

const put = (derrick: TestDerrick, twin: string, values: Array<{ name: string; value: string }>, group = "g") =>
  putTwin(derrick, twin, { group, twins: values });

/** One client must not be able to exhaust what every capability shares: streams (descriptors) and store bytes. */
describe("twin storage limits", () => {
  const it = limited;

  it("twins - past DERRICK_TWINS_MAX a PUT that would create a twin is 507 problem+json; existing twins still take writes", async ({
    derrick,
    jsm,
  }) => {
    for (const twin of ["dev-1", "dev-2", "dev-3"]) expect((await put(derrick, twin, [{ name: "p", value: "1" }])).status).toBe(200);
    const refused = await put(derrick, "dev-4", [{ name: "p", value: "1" }]);
    expect((await expectProblem(refused, 507)).detail).toMatch(/DERRICK_TWINS_MAX/);
    await expect(jsm.streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-4" })}`)).rejects.toThrow(
      /not found/,
    );
    expect((await put(derrick, "dev-2", [{ name: "p", value: "2" }])).status).toBe(200);
  });

  smallStore(
    "twins - when JetStream cannot reserve a new twin's bytes (its store limit is taken) a PUT that would create one is 507 naming DERRICK_TWIN_MAX_BYTES, not 500; existing twins still take writes",
    async ({ derrick: small }) => {
      const putTo = (twin: string) => put(small, twin, [{ name: "p", value: "1" }]);
      const statuses: number[] = [];
      for (let i = 0; i < 10 && statuses.at(-1) !== 507; i++) statuses.push((await putTo(`full-${i}`)).status);
      expect(statuses.at(-1)).toBe(507);
      expect(statuses.slice(0, -1).every((status) => status === 200)).toBe(true);
      expect(statuses.length).toBeGreaterThan(1);
      expect((await expectProblem(await putTo("full-last"), 507)).detail).toMatch(/DERRICK_TWIN_MAX_BYTES/);
      expect((await putTo("full-0")).status).toBe(200);
    },
  );

  capped("twins - concurrent first PUTs of one twin count it once towards DERRICK_TWINS_MAX", async ({ derrick }) => {
    const putTo = (twin: string, group: string) => put(derrick, twin, [{ name: "p", value: "1" }], group);
    expect((await putTo("fresh-1", "g")).status).toBe(200);
    const together = await Promise.all(["a", "b", "c", "d"].map((group) => putTo("fresh-2", group)));
    expect(together.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect((await putTo("fresh-3", "g")).status).toBe(200);
    expect((await putTo("fresh-4", "g")).status).toBe(507);
  });

  it("twins - a twin's bucket is capped at DERRICK_TWIN_MAX_BYTES: writes past it are 507, the stream says so", async ({
    derrick,
    jsm,
  }) => {
    const info = await jsm.streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-1" })}`);
    expect(info.config.max_bytes).toBe(256 * 1024);
    let status = 200;
    for (let i = 0; i < 20 && status === 200; i++)
      status = (await put(derrick, "dev-1", [{ name: `big${i}`, value: "x".repeat(60_000) }])).status;
    expect(status).toBe(507);
    expect((await put(derrick, "dev-3", [{ name: "other", value: "fine" }])).status).toBe(200);
  });
});
