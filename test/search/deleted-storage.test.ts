import { describe, expect } from "vitest";
import { json } from "../harness/json.ts";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import { CURSOR_BUCKET } from "../../actors/search/store.ts";
import { WELL, api, northWell as record, putRecords, searchOk, searchTest, untilFound, type Page } from "./helpers.ts";

const it = searchTest();

/**
 * Storage deleted at runtime (an operator, a tool, a lost store) is made again, as every other store of
 * derrick is: the RECORDS stream by storage's next write, the search replica rebuilt from the new one.
 * Before, every record write answered 500 until a restart, and the replica never followed again.
 */
describe("search and storage after their storage was deleted", () => {
  it("records - a deleted RECORDS stream is made again: writes succeed at once, the old records are gone, and new ones become searchable", {
    timeout: 20_000,
  }, async ({ derrick, jsm }) => {
    await putRecords(derrick, [record("opendes:well:before-delete", "alpha")]);
    await untilFound(derrick, "alpha", 1, "the first record to be searchable");

    expect(await jsm.streams.delete(RECORDS_STREAM)).toBe(true);

    // The first write after the deletion already succeeds (storage makes the stream again).
    await putRecords(derrick, [record("opendes:well:after-delete", "bravo")]);
    await untilFound(derrick, "bravo", 1, "the record written after the deletion to be searchable", { timeoutMs: 10_000 });
    // What the deleted stream held is gone from storage and, once rebuilt, from the index.
    expect((await api(derrick, `/api/storage/v2/records/${encodeURIComponent("opendes:well:before-delete")}`)).status).toBe(404);
    expect((await searchOk(derrick, { query: "alpha" })).totalCount).toBe(0);
  });

  it("cursors - a deleted cursor bucket is made again: cursor queries keep working", { timeout: 20_000 }, async ({ derrick, jsm }) => {
    await putRecords(derrick, [record("opendes:well:c1", "charlie"), record("opendes:well:c2", "charlie")]);
    await untilFound(derrick, "charlie", 2, "the records to be searchable");
    expect(await jsm.streams.delete(`KV_${CURSOR_BUCKET}`)).toBe(true);
    const first = await api(derrick, "/api/search/v2/query_with_cursor", { body: { kind: WELL, query: "charlie", limit: 1 } });
    const { cursor } = await json<Page>(first, 200);
    const second = await api(derrick, "/api/search/v2/query_with_cursor", { body: { cursor } });
    expect((await json<Page>(second, 200)).results).toHaveLength(1);
  });

  it("cursors - a cursor continued first after its bucket was deleted is answered at once as unknown, not after the request timed out", {
    timeout: 20_000,
  }, async ({ derrick, jsm }) => {
    await untilFound(derrick, "charlie", 2, "the records to be searchable");
    const first = await api(derrick, "/api/search/v2/query_with_cursor", { body: { kind: WELL, query: "charlie", limit: 1 } });
    const { cursor } = await json<Page>(first, 200);
    expect(await jsm.streams.delete(`KV_${CURSOR_BUCKET}`)).toBe(true);
    // The cursor went with its bucket: the continuation is the 400 of an expired cursor.
    const second = await api(derrick, "/api/search/v2/query_with_cursor", { body: { cursor } });
    expect(second.status, await second.clone().text()).toBe(400);
  });
});
