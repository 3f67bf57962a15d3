import { describe, expect } from "vitest";
import { existsSync, rmSync } from "node:fs";
import { eventually, type TestDerrick, openBucket } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { subjects } from "../../subjects/index.ts";
import { CURSOR_BUCKET } from "../../actors/search/store.ts";
import { readKv } from "../../actors/runtime/kv.ts";
import type { SearchStatus } from "../../subjects/search.ts";
import { NORTH_ACL, SOUTH_ACL, WELL, api, putRecords, searchOk, searchTest, startSearchDerrick, untilFound, type Page } from "./helpers.ts";

const TOTAL = 2500;
const CURSOR_LIMIT = 5;
const PRINCIPAL_CURSOR_LIMIT = 3;

function records(count: number, prefix: string) {
  return Array.from({ length: count }, (_, i) => ({
    id: `opendes:well:${prefix}-${String(i).padStart(5, "0")}`,
    kind: WELL,
    acl: i % 2 === 0 ? NORTH_ACL : SOUTH_ACL,
    // Group repeats and is missing on every 10th record: sort keys with ties and gaps.
    data: { Name: `Paged ${prefix} ${i}`, ...(i % 10 === 0 ? {} : { Group: i % 7 }), Serial: i },
  }));
}

async function cursorCall(derrick: TestDerrick, body: Record<string, unknown>, as: "writer" | "north" | "south" = "writer") {
  const res = await api(derrick, "/api/search/v2/query_with_cursor", { as, body });
  return { status: res.status, body: await json<Page & { reason?: string; message?: string }>(res) };
}

async function pageAll(
  derrick: TestDerrick,
  first: Record<string, unknown>,
  as: "writer" | "north" = "writer",
): Promise<{ pages: Page[]; rows: Array<Record<string, any>> }> {
  const pages: Page[] = [];
  let res = await cursorCall(derrick, first, as);
  for (let i = 0; i < 100; i++) {
    expect(res.status).toBe(200);
    pages.push(res.body);
    if (!res.body.cursor) break;
    res = await cursorCall(derrick, { cursor: res.body.cursor }, as);
  }
  return { pages, rows: pages.flatMap((p) => p.results) };
}

const cursors = searchTest({
  DERRICK_SEARCH_CURSOR_LIMIT: String(CURSOR_LIMIT),
  DERRICK_SEARCH_CURSOR_PRINCIPAL_LIMIT: String(PRINCIPAL_CURSOR_LIMIT),
  DERRICK_SEARCH_CURSOR_TTL: "3s",
});
const replica = natsTest();

describe("search cursors", () => {
  const it = cursors;
  it.beforeAll(async ({ derrick }) => {
    const all = records(TOTAL, "p");
    for (let i = 0; i < all.length; i += 500) await putRecords(derrick, all.slice(i, i + 500));
    await eventually(async () => (await searchOk(derrick, { trackTotalCount: true })).totalCount === TOTAL, {
      timeoutMs: 20_000,
      what: "2,500 records indexed",
    });
  }, 60_000);

  it("cursor - pages over 2,500 records without duplicates or gaps; the last page is empty without a cursor", async ({ derrick }) => {
    const { pages, rows } = await pageAll(derrick, { kind: WELL, limit: 300, returnedFields: ["id"] });
    expect(pages.length).toBe(10); // 8 full pages, a short one, then the empty closing page
    expect(pages[0]!.cursor).toMatch(/^[0-9A-F]{32}$/);
    expect(pages.every((p) => p.totalCount === TOTAL)).toBe(true);
    expect(pages.at(-1)).toEqual({ results: [], totalCount: TOTAL });
    const ids = rows.map((r) => r.id as string);
    expect(new Set(ids).size).toBe(TOTAL);
    expect(ids).toEqual([...ids].sort());
  });

  it("cursor - sorted paging keeps the order across pages, ties and missing values included", async ({ derrick }) => {
    const { rows } = await pageAll(derrick, {
      kind: WELL,
      limit: 400,
      sort: { field: ["data.Group"], order: ["DESC"] },
      returnedFields: ["id", "data.Group"],
    });
    expect(rows.length).toBe(TOTAL);
    expect(new Set(rows.map((r) => r.id)).size).toBe(TOTAL);
    const groups = rows.map((r) => (r.data?.Group as number | undefined) ?? null);
    const present = groups.filter((g) => g !== null) as number[];
    expect(present).toEqual([...present].sort((a, b) => b - a));
    expect(groups.slice(present.length).every((g) => g === null)).toBe(true); // missing last
  });

  it("cursor - the ACL applies on every page: a viewer pages over only what it may see", async ({ derrick }) => {
    const { rows, pages } = await pageAll(derrick, { kind: WELL, limit: 1000, query: "paged", returnedFields: ["id", "acl"] }, "north");
    expect(pages[0]!.totalCount).toBe(TOTAL / 2);
    expect(rows.length).toBe(TOTAL / 2);
    expect(rows.every((r) => r.acl.viewers[0] === NORTH_ACL.viewers[0])).toBe(true);
  });

  it("cursor - another principal's cursor is 403; an unknown one is 400; a closed one is gone", async ({ derrick }) => {
    const first = await cursorCall(derrick, { kind: WELL, limit: 10 });
    const cursor = first.body.cursor!;
    const stolen = await cursorCall(derrick, { cursor }, "north");
    expect(stolen.status).toBe(403);
    expect(stolen.body).toMatchObject({
      reason: "cursor issuer doesn't match the cursor consumer",
      message: "cursor sharing is forbidden",
    });
    const unknown = await cursorCall(derrick, { cursor: "0123456789ABCDEF0123456789ABCDEF" });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ reason: "Can't find the given cursor", message: "The given cursor is invalid or expired" });
    // The problem names the field at fault, as every 400 does: the body's cursor, or the path's.
    expect(unknown.body).toMatchObject({ errors: [{ pointer: "/body/cursor" }] });
    expect((await cursorCall(derrick, { cursor: "not-a-cursor" })).status).toBe(400);
    const unknownDelete = await api(derrick, "/api/search/v2/query_with_cursor/0123456789ABCDEF0123456789ABCDEF", { method: "DELETE" });
    expect(unknownDelete.status).toBe(400);
    expect(await unknownDelete.json()).toMatchObject({
      message: "The given cursor is invalid or expired",
      errors: [{ pointer: "/params/cursor" }],
    });

    expect((await api(derrick, `/api/search/v2/query_with_cursor/${cursor}`, { as: "north", method: "DELETE" })).status).toBe(403);
    const closed = await api(derrick, `/api/search/v2/query_with_cursor/${cursor}`, { method: "DELETE" });
    expect(closed.status).toBe(200);
    expect(await closed.text()).toBe("");
    expect((await cursorCall(derrick, { cursor })).status).toBe(400);
  });

  it("cursor - a query with no results opens no cursor", async ({ derrick }) => {
    const res = await cursorCall(derrick, { kind: WELL, query: "nothingmatchesthis" });
    expect(res).toEqual({ status: 200, body: { results: [], totalCount: 0 } });
  });

  it("cursor - open cursors are capped per partition (429), and closing one makes room", async ({ derrick }) => {
    // Two principals fill the partition (each within its own limit); a third, with none open, is refused.
    const opened: Array<[string, "writer" | "north" | "south"]> = [];
    for (const as of ["writer", "writer", "writer", "north", "north"] as const) {
      const res = await cursorCall(derrick, { kind: WELL, limit: 1 }, as);
      expect(res.status).toBe(200);
      opened.push([res.body.cursor!, as]);
    }
    expect(opened.length).toBe(CURSOR_LIMIT);
    const refused = await cursorCall(derrick, { kind: WELL, limit: 1 }, "south");
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({
      reason: "Too many requests",
      message: "Too many cursor requests, please re-try after some time.",
    });
    expect((await api(derrick, `/api/search/v2/query_with_cursor/${opened[3]![0]}`, { as: "north", method: "DELETE" })).status).toBe(200);
    const again = await cursorCall(derrick, { kind: WELL, limit: 1 }, "south");
    expect(again.status).toBe(200);
    opened[3] = [again.body.cursor!, "south"];
    for (const [c, as] of opened) await api(derrick, `/api/search/v2/query_with_cursor/${c}`, { as, method: "DELETE" });
  });

  it("cursor - open cursors are capped per principal too (429): one caller cannot take the partition's quota", async ({ derrick }) => {
    const mine: string[] = [];
    for (let i = 0; i < PRINCIPAL_CURSOR_LIMIT; i++) {
      const res = await cursorCall(derrick, { kind: WELL, limit: 1 });
      expect(res.status).toBe(200);
      mine.push(res.body.cursor!);
    }
    // The partition has room (3 of 5), the caller has none: the same answer as a full partition.
    const refused = await api(derrick, "/api/search/v2/query_with_cursor", { body: { kind: WELL, limit: 1 } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("10");
    expect(await refused.json()).toMatchObject({
      reason: "Too many requests",
      message: "Too many cursor requests, please re-try after some time.",
    });
    const other = await cursorCall(derrick, { kind: WELL, limit: 1 }, "north");
    expect(other.status).toBe(200);

    // Closing one makes room, whether by DELETE or by paging to the end.
    expect((await api(derrick, `/api/search/v2/query_with_cursor/${mine.pop()}`, { method: "DELETE" })).status).toBe(200);
    const single = await cursorCall(derrick, { kind: WELL, limit: 1, query: "id:opendes\\:well\\:p-00007" });
    expect(single.status).toBe(200);
    expect((await cursorCall(derrick, { kind: WELL, limit: 1 })).status).toBe(429);
    expect(await cursorCall(derrick, { cursor: single.body.cursor! })).toEqual({ status: 200, body: { results: [], totalCount: 1 } });
    const reopened = await cursorCall(derrick, { kind: WELL, limit: 1 });
    expect(reopened.status).toBe(200);
    mine.push(reopened.body.cursor!);

    for (const c of mine) await api(derrick, `/api/search/v2/query_with_cursor/${c}`, { method: "DELETE" });
    await api(derrick, `/api/search/v2/query_with_cursor/${other.body.cursor}`, { as: "north", method: "DELETE" });
  });

  it("cursor - a cursor expires after its time to live without use, and its issuer's count with it", async ({ derrick }) => {
    const first = await cursorCall(derrick, { kind: WELL, limit: 5 });
    // Watch the bucket, not the API: every use of a cursor restarts its time to live.
    const kv = await openBucket(derrick.nc, CURSOR_BUCKET);
    const marks = async () =>
      (await readKv(kv, { key: `issuers.opendes.*.${first.body.cursor}`, headersOnly: true })).filter((e) => e.operation === "PUT").length;
    expect(await marks()).toBe(1);
    await eventually(async () => (await kv.get(`opendes.${first.body.cursor}`))?.operation !== "PUT", {
      timeoutMs: 8_000,
      intervalMs: 250,
      what: "cursor expired",
    });
    await eventually(async () => (await marks()) === 0, { timeoutMs: 2_000, intervalMs: 100, what: "issuer's mark expired" });
    expect((await cursorCall(derrick, { cursor: first.body.cursor! })).status).toBe(400);
  }, 15_000);
});

describe("search index replica", () => {
  const it = replica;

  const status = async (derrick: TestDerrick) => (await derrick.bus.request<SearchStatus>(subjects.search.status(), undefined)).body;

  it("replica - resumes from its last applied sequence after a restart, and is rebuilt from the stream when its file is lost", async ({
    nats,
    dataDir,
  }) => {
    let derrick = await startSearchDerrick(nats, {}, dataDir);
    await putRecords(derrick, records(300, "r"));
    await eventually(async () => (await searchOk(derrick, { trackTotalCount: true })).totalCount === 300, { what: "indexed" });
    const before = await status(derrick);
    expect(before.records).toBe(300);
    await derrick.cleanup();

    // Restart with the file: nothing to replay, the index is there at once.
    derrick = await startSearchDerrick(nats, {}, dataDir);
    expect((await status(derrick)).appliedSeq).toBe(before.appliedSeq);
    expect((await searchOk(derrick, { trackTotalCount: true })).totalCount).toBe(300);
    // A write while running, then the file is lost while stopped.
    await putRecords(derrick, [{ id: "opendes:well:late", kind: WELL, acl: NORTH_ACL, data: { Name: "Late Arrival" } }]);
    await untilFound(derrick, "late", 1, "late record indexed");
    await api(derrick, "/api/storage/v2/records/opendes:well:r-00000:delete", { method: "POST" });
    await eventually(async () => (await searchOk(derrick, { trackTotalCount: true })).totalCount === 300, { what: "delete indexed" });
    await derrick.cleanup();

    const file = before.indexFile;
    expect(existsSync(file)).toBe(true);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true });
    derrick = await startSearchDerrick(nats, {}, dataDir);
    try {
      await eventually(async () => (await searchOk(derrick, { trackTotalCount: true })).totalCount === 300, { what: "index rebuilt" });
      expect((await searchOk(derrick, { query: "late" })).totalCount).toBe(1);
      expect((await searchOk(derrick, { query: "id:opendes\\:well\\:r-00000" })).totalCount).toBe(0);
      expect(existsSync(file)).toBe(true);
    } finally {
      await derrick.cleanup();
    }
  }, 60_000);
});
