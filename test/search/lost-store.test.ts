import { describe, expect } from "vitest";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "../harness/index.ts";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import { api, northWell as record, putRecords, searchOk, searchTest, untilFound } from "./helpers.ts";

const it = searchTest({ DERRICK_SEARCH_RECHECK: "500ms" });

/**
 * A RECORDS stream that went without a deletion advisory (a store lost while nats-server was down; an
 * advisory the server did not send, or sent while this process was disconnected) is noticed all the
 * same: the replica rebuilds from the stream made in its place.
 */
describe("search after its RECORDS stream was lost without an advisory", () => {
  it("records - the stream lost with the server's store is made again and followed: a record written after is searchable, the old ones are not", {
    timeout: 40_000,
  }, async ({ derrick, nats }) => {
    await putRecords(derrick, [record("opendes:well:lost-1", "alpha")]);
    await untilFound(derrick, "alpha", 1, "the first record to be searchable");
    await nats.restart(() => {
      const streamDir = join(nats.dir, "jetstream", "jetstream", "$G", "streams", RECORDS_STREAM);
      expect(existsSync(streamDir)).toBe(true);
      rmSync(streamDir, { recursive: true, force: true });
    });
    await eventually(async () => putRecords(derrick, [record("opendes:well:lost-2", "bravo")]).catch(() => undefined), {
      timeoutMs: 15_000,
      intervalMs: 200,
      what: "a write after the restart",
    });
    await untilFound(derrick, "bravo", 1, "the record written after the restart to be searchable", { timeoutMs: 15_000 });
    expect((await api(derrick, `/api/storage/v2/records/${encodeURIComponent("opendes:well:lost-1")}`)).status).toBe(404);
    expect((await searchOk(derrick, { query: "alpha" })).totalCount).toBe(0);
  });
});
