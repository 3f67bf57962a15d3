import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import type { DerrickError } from "../../subjects/index.ts";
import { RECORD_MAX_DEPTH } from "../../subjects/search.ts";
import { putRecords as putRecordsHandler } from "../../actors/storage/handlers.ts";
import { createLogger } from "../../platform/logger.ts";
import { NORTH_ACL, WELL, api, searchOk, startSearchDerrick, tokenOf } from "./helpers.ts";

/** A record whose `data.x` holds `levels` nested arrays, as raw JSON (JSON.stringify itself overflows on deep values). */
const deepRecordJson = (id: string, levels: number) =>
  `{"id":"${id}","kind":"${WELL}","acl":${JSON.stringify(NORTH_ACL)},"data":{"Name":"Deep","x":${"[".repeat(levels)}${"]".repeat(levels)}}}`;

/** Nested arrays under `data.x` that make the record exactly `depth` levels deep (record 1, data 2, x 3). */
const arraysForDepth = (depth: number) => depth - 2;

async function putRaw(derrick: TestDerrick, body: string): Promise<{ status: number; problem: { errors?: Array<{ pointer: string; message: string }>; detail?: string } }> {
  const res = await fetch(`${derrick.url}/api/storage/v2/records`, {
    method: "PUT",
    headers: { authorization: `Bearer ${await tokenOf(derrick, "writer")}`, "data-partition-id": "opendes", "content-type": "application/json" },
    body,
  });
  return { status: res.status, problem: (await res.json()) as { errors?: Array<{ pointer: string; message: string }>; detail?: string } };
}

describe("search records too deep to index", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startSearchDerrick(nats);
  }, 60_000);
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("storage - a record nested deeper than 64 levels is refused with 400 naming the field, and nothing of the request is stored", async () => {
    expect(RECORD_MAX_DEPTH).toBe(64);
    // Exactly at the limit: stored.
    const atLimit = await putRaw(derrick, `[${deepRecordJson("opendes:well:at-limit", arraysForDepth(64))}]`);
    expect(atLimit.status).toBe(201);
    // One level more, in the second record of the request: 400 naming the first container too deep, and the first record is not written either.
    const over = await putRaw(derrick, `[{"id":"opendes:well:beside-deep","kind":"${WELL}","acl":${JSON.stringify(NORTH_ACL)},"data":{"Name":"Beside"}},${deepRecordJson("opendes:well:over-limit", arraysForDepth(65))}]`);
    expect(over.status).toBe(400);
    const pointer = `/body/1/data/x${"/0".repeat(arraysForDepth(65) - 1)}`;
    expect(over.problem.errors).toEqual([{ pointer, message: expect.stringContaining("more than 64 levels deep") }]);
    // The reviewer's bodies: 30,000 levels (201 before, and the replica stopped) and 45,000 (500 before: JSON.stringify overflowed).
    for (const levels of [30_000, 45_000]) {
      const deep = await putRaw(derrick, `[${deepRecordJson("opendes:well:very-deep", levels)}]`);
      expect(deep.status, `${levels} levels`).toBe(400);
      expect(deep.problem.errors?.[0]?.pointer, `${levels} levels`).toMatch(/^\/body\/0\/data\/x(\/0)+$/);
    }
    for (const id of ["opendes:well:beside-deep", "opendes:well:over-limit", "opendes:well:very-deep"]) expect((await api(derrick, `/api/storage/v2/records/${id}`)).status, id).toBe(404);
    await eventually(async () => (await searchOk(derrick, { query: "id:opendes\\:well\\:at\\-limit" })).totalCount === 1, { what: "the record at the limit indexed" });
  });

  it("storage - the storage actor refuses a record too deep from NATS callers too, before reading or writing anything", async () => {
    const untouched = {
      read: () => Promise.reject(new Error("read")),
      put: () => Promise.reject(new Error("put")),
      remove: () => Promise.reject(new Error("remove")),
    };
    const ctx = { requestId: "deep", log: createLogger("silent"), partition: "opendes", principal: { clientId: "writer", subject: "writer", groups: ["users.datalake.editors", "data.north.owners"], kind: "service" as const } };
    const body = JSON.parse(`[${deepRecordJson("opendes:well:deep-nats", 100)}]`) as unknown;
    const attempt = putRecordsHandler({ body }, ctx, { records: untouched });
    await expect(attempt).rejects.toMatchObject({ status: 400, errors: [{ pointer: `/body/0/data/x${"/0".repeat(arraysForDepth(65) - 1)}`, message: expect.stringContaining("more than 64 levels deep") }] } satisfies Partial<DerrickError>);
  });
});
