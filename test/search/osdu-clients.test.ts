/**
 * OSDU's own clients against derrick, with the bodies they put on the wire (fixtures/osdu-sdk-*.json,
 * as the OSDU Python SDK `osdu_api` serializes them: every field, unset ones null, keys sorted,
 * indented by 4) and the headers they send (content-type application/json on every call, bodiless
 * GET and DELETE included). OSDU reads bodies with Jackson set to ignore unknown properties: a null is
 * an absent field, unknown and server-assigned fields are ignored, only what OSDU refuses is a 400.
 */
import { describe, expect } from "vitest";
import { readFileSync } from "node:fs";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually, startDerrick, type TestDerrick } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { subjects } from "../../subjects/index.ts";
import { RECORDS_STREAM, SEARCH_ROLES, recordKey, type StoredRecord } from "../../subjects/search.ts";
import {
  NORTH_ACL,
  SEARCH_CLIENTS,
  WELL,
  api,
  ids,
  putRecords,
  searchOk,
  searchTest,
  startSearchDerrick,
  tokenOf,
  type Page,
  type SearchClient,
  untilFound,
} from "./helpers.ts";

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");
const SDK_QUERY = fixture("osdu-sdk-query.json");
const SDK_CURSOR_QUERY = fixture("osdu-sdk-query-with-cursor.json");
const SDK_RECORDS = fixture("osdu-sdk-records.json");
/** The first record of SDK_RECORDS has this id; the second has `"id": null`. */
const SDK_W1 = "opendes:master-data--Well:sdk-w1";
const DEFAULT_ACL = { viewers: ["data.default.viewers@opendes.example.com"], owners: ["data.default.owners@opendes.example.com"] };

/** A call as `osdu_api`'s BaseClient.make_request sends it: JSON content type always, the body as text. */
async function sdkCall(derrick: TestDerrick, method: string, path: string, body?: string, as: SearchClient = "sdk"): Promise<Response> {
  const headers = {
    "content-type": "application/json",
    "data-partition-id": "opendes",
    authorization: `Bearer ${await tokenOf(derrick, as)}`,
  };
  return fetch(`${derrick.url}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
}

/** A fixture body with some fields set, serialized as the SDK does (the fixture's key order kept). */
const withFields = (body: string, fields: Record<string, unknown>) =>
  JSON.stringify({ ...(JSON.parse(body) as object), ...fields }, null, 4);

/** Every message the RECORDS stream holds for a record: what storage keeps of it, all versions. */
async function streamMessages(derrick: TestDerrick, id: string) {
  const jsm = await jetstreamManager(derrick.nc);
  const subject = subjects.records("opendes", recordKey(id));
  const info = await jsm.streams.info(RECORDS_STREAM, { subjects_filter: subject });
  const last = await jsm.streams.getMessage(RECORDS_STREAM, { last_by_subj: subject });
  return {
    count: info.state.subjects?.[subject] ?? 0,
    last: last ? { bytes: last.data.length, text: new TextDecoder().decode(last.data) } : undefined,
  };
}

const unchanged = searchTest();
const purge = natsTest();

describe("OSDU clients, unchanged", () => {
  const it = unchanged;
  it.beforeAll(async ({ derrick }) => {
    await putRecords(derrick, [
      { id: "opendes:well:n1", kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Default One", Depth: 100 } },
      { id: "opendes:well:n2", kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Default Two", Depth: 200 } },
      { id: "opendes:well:n3", kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Default Three", Depth: 300 } },
      { id: "opendes:well:north", kind: WELL, acl: NORTH_ACL, data: { FacilityName: "North Only" } },
    ]);
    await eventually(async () => (await searchOk(derrick, {}, "root")).totalCount === 4, { what: "records indexed" });
  });

  it("search - SearchClient.query_records' body (cursor, from, returnHighlightedFields and every unset field null) answers 200 as the plain query", async ({
    derrick,
  }) => {
    const expected = await searchOk(derrick, { kind: WELL, query: "*" }, "sdk");
    expect(ids(expected)).toEqual(["opendes:well:n1", "opendes:well:n2", "opendes:well:n3"]);
    const page = await json<Page>(await sdkCall(derrick, "POST", "/api/search/v2/query", SDK_QUERY), 200);
    expect(page).toEqual(expected);
    // `from` is not OSDU's name of the offset (it reads `offset`), and returnHighlightedFields is not in its model: both set nothing.
    expect(
      await json(
        await sdkCall(derrick, "POST", "/api/search/v2/query", withFields(SDK_QUERY, { from: 2, returnHighlightedFields: true })),
        200,
      ),
    ).toEqual(expected);
    // What the SDK sets is applied as usual.
    const sorted = await json<Page>(
      await sdkCall(
        derrick,
        "POST",
        "/api/search/v2/query",
        withFields(SDK_QUERY, { limit: 2, sort: { field: ["data.Depth"], order: ["DESC"] }, aggregateBy: "kind" }),
      ),
      200,
    );
    expect(sorted.results.map((r) => r.id)).toEqual(["opendes:well:n3", "opendes:well:n2"]);
    expect(sorted).toMatchObject({ totalCount: 3, aggregations: [{ key: WELL, count: 3 }] });
  });

  it("search - query_with_cursor's body (aggregateBy and from present, null) pages through every result, also with the generated client's ?search_after=false", async ({
    derrick,
  }) => {
    for (const path of ["/api/search/v2/query_with_cursor", "/api/search/v2/query_with_cursor?search_after=false"]) {
      const seen: string[] = [];
      let body = SDK_CURSOR_QUERY;
      for (let i = 0; i < 10; i++) {
        const page = await json<Page>(await sdkCall(derrick, "POST", path, body), 200);
        seen.push(...page.results.map((r) => r.id as string));
        if (!page.cursor) break;
        expect(page.results.length).toBeLessThanOrEqual(2);
        // The SDK sends the same object again with its cursor set.
        body = withFields(SDK_CURSOR_QUERY, { cursor: page.cursor });
      }
      expect(seen.sort(), path).toEqual(["opendes:well:n1", "opendes:well:n2", "opendes:well:n3"]);
    }
  });

  it("storage - RecordClient.create_update_records' body (version, ancestry and meta null; one id null) is 201, and nothing null is stored", async ({
    derrick,
  }) => {
    const created = await json<{ recordCount: number; recordIds: string[]; recordIdVersions: string[] }>(
      await sdkCall(derrick, "PUT", "/api/storage/v2/records", SDK_RECORDS),
      201,
    );
    expect(created.recordCount).toBe(2);
    expect(created.recordIds[0]).toBe(SDK_W1);
    expect(created.recordIds[1]).toMatch(/^opendes:master-data--Well:[0-9a-f]{32}$/);
    for (const id of created.recordIds) {
      const read = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
      expect(Object.keys(read).sort()).toEqual(["acl", "createTime", "createUser", "data", "id", "kind", "legal", "version"]);
      expect(read).toMatchObject({
        id,
        kind: WELL,
        acl: DEFAULT_ACL,
        legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["US"], status: "compliant" },
        createUser: "sdk",
      });
      expect(read.version).toEqual(expect.any(Number));
    }
    await untilFound(derrick, "data.FacilityName:sdk", 2, "SDK records indexed", { as: "sdk" });
  });

  it("storage - a record read with GET and sent back with PUT (version, createUser, createTime, modifyUser, modifyTime, unknown fields) is written; the server's values stay and nothing unknown is kept", async ({
    derrick,
  }) => {
    const id = "opendes:well:round-trip";
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Round Trip", Step: 0 } }], "sdk");
    const first = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
    expect(first.modifyUser).toBeUndefined();

    // The normal update flow: change `data`, send the record back as read.
    await json(
      await sdkCall(derrick, "PUT", "/api/storage/v2/records", JSON.stringify([{ ...first, data: { ...first.data, Step: 1 } }])),
      201,
    );
    const second = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
    expect(second).toMatchObject({ data: { Step: 1 }, createUser: first.createUser, createTime: first.createTime, modifyUser: "sdk" });
    expect(second.version).toBeGreaterThan(first.version);

    // Again, now with modifyUser/modifyTime in it, made-up server values, fields of search results and of nobody's model.
    const sent = {
      ...second,
      data: { ...second.data, Step: 2 },
      version: 1,
      createUser: "mallory",
      createTime: 0,
      modifyUser: "mallory",
      modifyTime: "1999-01-01T00:00:00.000Z",
      authority: "osdu",
      color: "red",
      acl: { ...second.acl, extra: ["x"] },
    };
    await json(await sdkCall(derrick, "PUT", "/api/storage/v2/records", JSON.stringify([sent])), 201);
    const third = await json<StoredRecord & Record<string, unknown>>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
    expect(third).toMatchObject({
      data: { Step: 2 },
      createUser: first.createUser,
      createTime: first.createTime,
      modifyUser: "sdk",
      acl: DEFAULT_ACL,
    });
    expect(third.version).toBeGreaterThan(second.version);
    expect(third.modifyTime).not.toBe(sent.modifyTime);
    expect(Object.keys(third.acl).sort()).toEqual(["owners", "viewers"]);
    for (const unknown of ["color", "authority"]) expect(third, unknown).not.toHaveProperty(unknown);
    // Not indexed either: the search result holds no such field.
    const hit = await eventually(async () => (await searchOk(derrick, { query: "data.Step:2" }, "sdk")).results[0]);
    expect(hit.id).toBe(id);
    expect(hit).not.toHaveProperty("color");
    expect(hit.acl).toEqual(DEFAULT_ACL);
  });

  it("bodies - unknown fields are ignored at every level and null is absent; values OSDU refuses are still 400 naming the field", async ({
    derrick,
  }) => {
    const box = { topLeft: { latitude: 90, longitude: -180, altitude: 1 }, bottomRight: { latitude: -90, longitude: 180 }, crs: "WGS84" };
    const lenient = {
      kind: WELL,
      size: 10,
      offset: null,
      trackTotalCount: null,
      spatialFilter: { field: "data.Location", byBoundingBox: box, shape: "box" },
      sort: { field: ["id"], order: ["ASC"], missing: "last", filter: null },
    };
    for (const route of ["query", "query_with_cursor"])
      expect((await api(derrick, `/api/search/v2/${route}`, { as: "sdk", body: lenient })).status, route).toBe(200);
    const record = {
      kind: WELL,
      acl: { ...DEFAULT_ACL, note: "n" },
      data: { Null: null },
      ancestry: { parents: null },
      tags: null,
      legal: null,
      meta: null,
      id: null,
    };
    const created = await json<{ recordIds: string[] }>(
      await api(derrick, "/api/storage/v2/records", { as: "sdk", method: "PUT", body: [record] }),
      201,
    );
    const read = await json<StoredRecord>(await api(derrick, `/api/storage/v2/records/${created.recordIds[0]}`, { as: "sdk" }), 200);
    // A null inside `data` is a value of the record, kept; null fields of the record itself are absent.
    expect(Object.keys(read).sort()).toEqual(["acl", "createTime", "createUser", "data", "id", "kind", "version"]);
    expect(read.data).toEqual({ Null: null });

    for (const [route, body, pointer] of [
      ["/api/search/v2/query", { kind: WELL, limit: "ten" }, "/body/limit"],
      [
        "/api/search/v2/query",
        { kind: WELL, spatialFilter: { field: "data.Location", byBoundingBox: { ...box, topLeft: { latitude: "north" } } } },
        "/body/spatialFilter/byBoundingBox/topLeft/latitude",
      ],
      ["/api/search/v2/query_with_cursor", { kind: WELL, returnedFields: "id" }, "/body/returnedFields"],
    ] as const) {
      const problem = await json<{ errors: Array<{ pointer: string }> }>(await api(derrick, route, { as: "sdk", body }), 400);
      expect(
        problem.errors.map((e) => e.pointer),
        pointer,
      ).toContain(pointer);
    }
    for (const [fields, pointer] of [
      [{ kind: null }, "/body/0/kind"],
      [{ data: null }, "/body/0/data"],
      [{ acl: null }, "/body/0/acl"],
      [{ acl: { viewers: DEFAULT_ACL.viewers, owners: null } }, "/body/0/acl/owners"],
      [{ version: { n: 1 } }, "/body/0/version"],
      [{ id: "opendes:well:bad id" }, "/body/0/id"],
    ] as const) {
      const problem = await json<{ errors: Array<{ pointer: string }> }>(
        await api(derrick, "/api/storage/v2/records", { as: "sdk", method: "PUT", body: [{ ...record, ...fields }] }),
        400,
      );
      expect(
        problem.errors.map((e) => e.pointer),
        pointer,
      ).toContain(pointer);
    }
  });

  it("storage - purge (RecordClient.delete_record, DELETE /records/{id}) is 204: the record and every version are gone from GET, the stream and search", async ({
    derrick,
  }) => {
    const id = "opendes:well:purged";
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Purge Candidate", Step: 1 } }], "sdk");
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Purge Candidate", Step: 2 } }], "sdk");
    await untilFound(derrick, "data.Step:2 AND purge", 1, "indexed", { as: "sdk" });
    const before = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);

    const res = await sdkCall(derrick, "DELETE", `/api/storage/v2/records/${id}`, undefined, "ops");
    expect(res.status, await res.clone().text()).toBe(204);
    expect(await res.text()).toBe("");
    const gone = await json(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 404);
    expect(gone).toMatchObject({ reason: "Record not found" });
    // One message is left on the record's subject, an empty mark: no version, nothing of the record.
    expect(await streamMessages(derrick, id)).toEqual({ count: 1, last: { bytes: 0, text: "" } });
    await untilFound(derrick, "purge", 0, "purge reflected in search", { as: "sdk" });
    // Purged is gone for good: a second purge and a delete find nothing; a new PUT creates anew.
    expect(await json(await sdkCall(derrick, "DELETE", `/api/storage/v2/records/${id}`, undefined, "ops"), 404)).toMatchObject({
      reason: "Record not found",
      message: `Record with id '${id}' does not exist`,
    });
    expect((await sdkCall(derrick, "POST", `/api/storage/v2/records/${id}:delete`)).status).toBe(404);
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Reborn" } }], "sdk");
    const reborn = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
    expect(reborn.createTime >= before.createTime).toBe(true);
    expect(reborn).not.toHaveProperty("modifyUser");
  });

  it("storage - a logically deleted record keeps its owners until purged: only they may purge it or write it again", async ({
    derrick,
  }) => {
    const id = "opendes:well:deleted-then-purged";
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Deleted First" } }], "sdk");
    const created = await json<StoredRecord>(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200);
    expect((await sdkCall(derrick, "POST", `/api/storage/v2/records/${id}:delete`)).status).toBe(204);
    expect((await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`)).status).toBe(404);
    await untilFound(derrick, '"Deleted First"', 0, "delete reflected", { as: "sdk" });
    // Another editor cannot take the id over; ops that does not own it cannot purge it.
    const takeover = await api(derrick, "/api/storage/v2/records", {
      as: "writer",
      method: "PUT",
      body: [{ id, kind: WELL, acl: NORTH_ACL, data: {} }],
    });
    expect(takeover.status).toBe(403);
    const denied = await json<{ message: string }>(
      await sdkCall(derrick, "DELETE", `/api/storage/v2/records/${id}`, undefined, "opsNorth"),
      403,
    );
    expect(denied.message).toBe(
      "The user is not authorized to purge the record: purging a record needs one of the groups in its acl.owners, or users.data.root",
    );
    // Its owner writes it again: it keeps its creation, as OSDU keeps the record's metadata.
    await putRecords(derrick, [{ id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Deleted First", Back: true } }], "sdk");
    expect(await json(await sdkCall(derrick, "GET", `/api/storage/v2/records/${id}`), 200)).toMatchObject({
      createTime: created.createTime,
      modifyUser: "sdk",
      data: { Back: true },
    });
    // Deleted again, then purged by an owner with users.datalake.ops: nothing of it is left.
    expect((await sdkCall(derrick, "POST", `/api/storage/v2/records/${id}:delete`)).status).toBe(204);
    const mark = await streamMessages(derrick, id);
    expect(mark.count).toBe(1);
    expect(JSON.parse(mark.last!.text)).toMatchObject({ id, acl: DEFAULT_ACL, modifyUser: "sdk" });
    expect((await sdkCall(derrick, "DELETE", `/api/storage/v2/records/${id}`, undefined, "ops")).status).toBe(204);
    expect(await streamMessages(derrick, id)).toEqual({ count: 1, last: { bytes: 0, text: "" } });
  });

  it("health - storage answers OSDU's liveness and readiness checks, public, as search does", async ({ derrick }) => {
    for (const [path, text] of [
      ["/api/storage/v2/liveness_check", "Storage service is alive."],
      ["/api/storage/v2/readiness_check", "Storage service is ready."],
      ["/api/search/v2/liveness_check", "Search Service is alive"],
      ["/api/search/v2/readiness_check", "Search Service is ready"],
    ] as const) {
      // As the SDK and probes send them: without a token or partition; and with the SDK's JSON content type.
      for (const headers of [{}, { "content-type": "application/json" }] as Array<Record<string, string>>) {
        const res = await fetch(`${derrick.url}${path}`, { headers });
        expect(res.status, path).toBe(200);
        expect(await res.text(), path).toBe(text);
      }
    }
  });

  it("access - every refusal for a missing group names the groups that would allow it, with OSDU's statuses (401 on search, 403 on storage)", async ({
    derrick,
  }) => {
    const problem = async (res: Response, status: number) => json<{ reason: string; message: string; detail: string }>(res, status);
    const roles = `${SEARCH_ROLES.slice(0, -1).join(", ")} or ${SEARCH_ROLES.at(-1)}`;
    for (const route of ["query", "query_with_cursor"]) {
      const noRole = await problem(await api(derrick, `/api/search/v2/${route}`, { as: "norole", body: { kind: WELL } }), 401);
      expect(noRole).toMatchObject({
        reason: "Access denied",
        message: `The user is not authorized to perform this action: searching needs one of the groups ${roles}`,
      });
      expect(noRole.detail).toBe(noRole.message);
      const noData = await problem(await api(derrick, `/api/search/v2/${route}`, { as: "nodata", body: { kind: WELL } }), 401);
      expect(noData.message).toBe(
        "The user is not authorized to perform this action: searching needs a data group (data.*) or users.data.root",
      );
    }
    const cases: Array<[string, string, SearchClient, unknown, string]> = [
      [
        "PUT",
        "/api/storage/v2/records",
        "north",
        [{ kind: WELL, acl: NORTH_ACL, data: {} }],
        "writing records needs the group users.datalake.editors",
      ],
      ["GET", "/api/storage/v2/records/opendes:well:n1", "norole", undefined, `reading records needs one of the groups ${roles}`],
      [
        "POST",
        "/api/storage/v2/records/opendes:well:n1:delete",
        "north",
        undefined,
        "deleting records needs the group users.datalake.editors",
      ],
      ["DELETE", "/api/storage/v2/records/opendes:well:n1", "sdk", undefined, "purging records needs the group users.datalake.ops"],
    ];
    for (const [method, path, as, body, needs] of cases) {
      const refused = await problem(await api(derrick, path, { as, method, ...(body !== undefined ? { body } : {}) }), 403);
      expect(refused, `${method} ${path}`).toMatchObject({
        reason: "Access denied",
        message: `The user is not authorized to perform this action: ${needs}`,
      });
    }
    // Checks against a record's ACL name its ACL fields, never its groups.
    const notViewer = await problem(await api(derrick, "/api/storage/v2/records/opendes:well:n1", { as: "north" }), 403);
    expect(notViewer.message).toBe(
      "The user is not authorized to perform this action: reading this record needs one of the groups in its acl.viewers or acl.owners, or users.data.root",
    );
    const notOwner = await problem(
      await api(derrick, "/api/storage/v2/records", {
        as: "writer",
        method: "PUT",
        body: [{ id: "opendes:well:n1", kind: WELL, acl: NORTH_ACL, data: {} }],
      }),
      403,
    );
    expect(notOwner).toMatchObject({
      reason: "User Unauthorized",
      message:
        "User is not authorized to update records. Replacing a record needs one of the groups in its acl.owners, or users.data.root.",
    });
    expect(JSON.stringify([notViewer, notOwner])).not.toContain("data.default");
  });
});

describe("OSDU purge and the search replicas", () => {
  const it = purge;

  it("replica - a search replica stopped while a record was purged drops it when it catches up", { timeout: 60_000 }, async ({
    nats,
    dataDir,
  }) => {
    const id = "opendes:well:purged-while-away";
    let derrick = await startSearchDerrick(nats, {}, dataDir);
    await putRecords(
      derrick,
      [
        { id, kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Away Purged" } },
        { id: "opendes:well:stays", kind: WELL, acl: DEFAULT_ACL, data: { FacilityName: "Away Stays" } },
      ],
      "sdk",
    );
    await untilFound(derrick, "away", 2, "indexed", { as: "sdk" });
    await derrick.cleanup();

    // Storage alone (no search process) purges while the replica is down.
    const storageOnly = await startDerrick(nats, {
      actors: ["identity", "storage"],
      env: { DERRICK_CLIENTS: JSON.stringify(Object.values(SEARCH_CLIENTS)) },
    });
    try {
      expect((await sdkCall(storageOnly, "DELETE", `/api/storage/v2/records/${id}`, undefined, "ops")).status).toBe(204);
      // Without a search actor, search's readiness is 503 while storage's is 200.
      expect((await fetch(`${storageOnly.url}/api/search/v2/readiness_check`)).status).toBe(503);
      expect((await fetch(`${storageOnly.url}/api/storage/v2/readiness_check`)).status).toBe(200);
    } finally {
      await storageOnly.cleanup();
    }

    // The replica resumes from its index file at the sequence it had applied, and meets the purge mark.
    derrick = await startSearchDerrick(nats, {}, dataDir);
    try {
      await eventually(async () => ids(await searchOk(derrick, { query: "away" }, "sdk")).join() === "opendes:well:stays", {
        what: "purge applied on catching up",
      });
    } finally {
      await derrick.cleanup();
    }
    // A search process without storage: storage's readiness is 503.
    const searchOnly = await startDerrick(nats, {
      actors: ["identity", "search"],
      dataDir,
      env: { DERRICK_CLIENTS: JSON.stringify(Object.values(SEARCH_CLIENTS)) },
    });
    try {
      expect((await fetch(`${searchOnly.url}/api/storage/v2/readiness_check`)).status).toBe(503);
    } finally {
      await searchOnly.cleanup();
    }
  });
});
