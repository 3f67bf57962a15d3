import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { eventually, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import { NORTH_ACL, WELL, api, putRecords, searchOk, startSearchDerrick } from "./helpers.ts";

const record = (id: string, name: string) => ({
  id,
  kind: WELL,
  acl: NORTH_ACL,
  legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
  data: { Name: name },
});

/**
 * A RECORDS stream that went without a deletion advisory (a store lost while nats-server was down; an
 * advisory the server did not send, or sent while this process was disconnected) is noticed all the
 * same: the replica rebuilds from the stream made in its place.
 */
describe("search after its RECORDS stream was lost without an advisory", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startSearchDerrick(nats, { DERRICK_SEARCH_RECHECK: "500ms" });
  }, 60_000);
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("records - the stream lost with the server's store is made again and followed: a record written after is searchable, the old ones are not", {
    timeout: 40_000,
  }, async () => {
    await putRecords(derrick, [record("opendes:well:lost-1", "alpha")]);
    await eventually(async () => (await searchOk(derrick, { query: "alpha" })).totalCount === 1, {
      what: "the first record to be searchable",
    });
    const first = nats;
    await first.stop();
    const streamDir = join(first.dir, "jetstream", "jetstream", "$G", "streams", RECORDS_STREAM);
    expect(existsSync(streamDir)).toBe(true);
    rmSync(streamDir, { recursive: true, force: true });
    const restarted = await startTestNats({ port: first.port, dir: first.dir });
    nats = { ...restarted, cleanup: async () => (await restarted.stop(), await first.cleanup()) };
    await eventually(async () => putRecords(derrick, [record("opendes:well:lost-2", "bravo")]).catch(() => undefined), {
      timeoutMs: 15_000,
      intervalMs: 200,
      what: "a write after the restart",
    });
    await eventually(async () => (await searchOk(derrick, { query: "bravo" })).totalCount === 1, {
      timeoutMs: 15_000,
      what: "the record written after the restart to be searchable",
    });
    expect((await api(derrick, `/api/storage/v2/records/${encodeURIComponent("opendes:well:lost-1")}`)).status).toBe(404);
    expect((await searchOk(derrick, { query: "alpha" })).totalCount).toBe(0);
  });
});
