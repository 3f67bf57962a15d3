import { afterAll, describe, expect } from "vitest";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { eventually, startDerrick, startSlowLink, type TestDerrick } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { subjects, type DerrickError } from "../../subjects/index.ts";
import { RECORD_MAX_DEPTH, recordKey, type SearchStatus } from "../../subjects/search.ts";
import { putRecords as putRecordsHandler } from "../../actors/storage/handlers.ts";
import type { RecordChange, SearchBackend } from "../../actors/search/backend.ts";
import { followRecords, type Replica } from "../../actors/search/replica.ts";
import { IDENTITY_CHECK_MS } from "../../actors/search/replica-policy.ts";
import { ManualClock } from "../../platform/clock.ts";
import { SqliteBackend } from "../../actors/search/sqlite.ts";
import { parseQuery } from "../../actors/search/query/parser.ts";
import { pino } from "pino";
import { createLogger } from "../../platform/logger.ts";
import { NORTH_ACL, WELL, api, northWell, putRecords, searchOk, searchTest, startSearchDerrick, tokenOf, untilFound } from "./helpers.ts";
import type { Problem } from "../../subjects/errors.ts";
import { join } from "node:path";

/** A record whose `data.x` holds `levels` nested arrays, as raw JSON (JSON.stringify itself overflows on deep values). */
const deepRecordJson = (id: string, levels: number) =>
  `{"id":"${id}","kind":"${WELL}","acl":${JSON.stringify(NORTH_ACL)},"data":{"Name":"Deep","x":${"[".repeat(levels)}${"]".repeat(levels)}}}`;

/** Nested arrays under `data.x` that make the record exactly `depth` levels deep (record 1, data 2, x 3). */
const arraysForDepth = (depth: number) => depth - 2;

async function putRaw(derrick: TestDerrick, body: string): Promise<{ status: number; problem: Partial<Problem> }> {
  const res = await fetch(`${derrick.url}/api/storage/v2/records`, {
    method: "PUT",
    headers: {
      authorization: `Bearer ${await tokenOf(derrick, "writer")}`,
      "data-partition-id": "opendes",
      "content-type": "application/json",
    },
    body,
  });
  return { status: res.status, problem: await json<Partial<Problem>>(res) };
}

const unindexable = searchTest();
const replicaFailures = natsTest();
const indexFiles = natsTest();

const status = async (derrick: TestDerrick) => (await derrick.bus.request<SearchStatus>(subjects.search.status(), undefined)).body;

describe("search records that cannot be indexed", () => {
  const it = unindexable;

  it("storage - a record nested deeper than 64 levels is refused with 400 naming the field, and nothing of the request is stored", async ({
    derrick,
  }) => {
    expect(RECORD_MAX_DEPTH).toBe(64);
    // Exactly at the limit: stored.
    const atLimit = await putRaw(derrick, `[${deepRecordJson("opendes:well:at-limit", arraysForDepth(64))}]`);
    expect(atLimit.status).toBe(201);
    // One level more, in the second record of the request: 400 naming the first container too deep, and the first record is not written either.
    const over = await putRaw(
      derrick,
      `[{"id":"opendes:well:beside-deep","kind":"${WELL}","acl":${JSON.stringify(NORTH_ACL)},"data":{"Name":"Beside"}},${deepRecordJson("opendes:well:over-limit", arraysForDepth(65))}]`,
    );
    expect(over.status).toBe(400);
    const pointer = `/body/1/data/x${"/0".repeat(arraysForDepth(65) - 1)}`;
    expect(over.problem.errors).toEqual([{ pointer, message: expect.stringContaining("more than 64 levels deep") }]);
    // The reviewer's bodies: 30,000 levels (201 before, and the replica stopped) and 45,000 (500 before: JSON.stringify overflowed).
    for (const levels of [30_000, 45_000]) {
      const deep = await putRaw(derrick, `[${deepRecordJson("opendes:well:very-deep", levels)}]`);
      expect(deep.status, `${levels} levels`).toBe(400);
      expect(deep.problem.errors?.[0]?.pointer, `${levels} levels`).toMatch(/^\/body\/0\/data\/x(\/0)+$/);
    }
    for (const id of ["opendes:well:beside-deep", "opendes:well:over-limit", "opendes:well:very-deep"])
      expect((await api(derrick, `/api/storage/v2/records/${id}`)).status, id).toBe(404);
    await untilFound(derrick, "id:opendes\\:well\\:at\\-limit", 1, "the record at the limit indexed");
  });

  it("storage - the storage actor refuses a record too deep from NATS callers too, before reading or writing anything", async () => {
    const untouched = {
      read: () => Promise.reject(new Error("read")),
      put: () => Promise.reject(new Error("put")),
      remove: () => Promise.reject(new Error("remove")),
      purge: () => Promise.reject(new Error("purge")),
      count: () => Promise.reject(new Error("count")),
    };
    const ctx = {
      requestId: "deep",
      log: createLogger("silent"),
      partition: "opendes",
      principal: {
        clientId: "writer",
        subject: "writer",
        groups: ["users.datalake.editors", "data.north.owners"],
        kind: "service" as const,
      },
    };
    const body = JSON.parse(`[${deepRecordJson("opendes:well:deep-nats", 100)}]`) as unknown;
    const attempt = putRecordsHandler({ body }, ctx, { records: untouched });
    await expect(attempt).rejects.toMatchObject({
      status: 400,
      errors: [
        { pointer: `/body/0/data/x${"/0".repeat(arraysForDepth(65) - 1)}`, message: expect.stringContaining("more than 64 levels deep") },
      ],
    } satisfies Partial<DerrickError>);
  });

  it("replica - a message it cannot index is skipped with a warning and counted, and records published after it are searchable", async ({
    derrick,
  }) => {
    const js = jetstream(derrick.nc);
    const before = await status(derrick);
    const publish = (id: string, raw: string) => js.publish(subjects.records("opendes", recordKey(id)), raw);
    // A non-string ACL entry (a TypeError in the indexer before), 30,000 nested arrays (a stack
    // overflow before), and a body that is not JSON: each stopped every replica for good, or was skipped.
    await publish(
      "opendes:well:poison-acl",
      JSON.stringify({
        id: "opendes:well:poison-acl",
        kind: WELL,
        acl: { viewers: [1], owners: ["data.north.owners"] },
        data: { Name: "Poison" },
      }),
    );
    await publish("opendes:well:poison-deep", deepRecordJson("opendes:well:poison-deep", 30_000));
    await publish("opendes:well:poison-json", "{not json");
    const last = await publish(
      "opendes:well:after-poison",
      JSON.stringify({ id: "opendes:well:after-poison", kind: WELL, acl: NORTH_ACL, data: { Name: "Survivor" } }),
    );
    await untilFound(derrick, "survivor", 1, "the record after the poison messages indexed");
    const after = await status(derrick);
    expect(after).toMatchObject({ following: true, restarts: 0, appliedSeq: last.seq, loading: false, indexing: false });
    expect(after.skipped - before.skipped).toBe(3);
    expect(after.lastSkipped).toEqual({
      subject: subjects.records("opendes", recordKey("opendes:well:poison-json")),
      seq: last.seq - 1,
      reason: "not JSON",
    });
    // Still following: a record put through storage afterwards is searchable too.
    const later = await putRaw(
      derrick,
      `[{"id":"opendes:well:later","kind":"${WELL}","acl":${JSON.stringify(NORTH_ACL)},"data":{"Name":"Latecomer"}}]`,
    );
    expect(later.status).toBe(201);
    await untilFound(derrick, "latecomer", 1, "a later record indexed");
  });
});

/** Decides whether an apply of `changes` up to sequence `seq` fails, and how. */
type Fault = (changes: RecordChange[], seq: number) => Error | undefined;

/** A real index whose writes fail when `fault()` says so, as a full disk or an I/O error would make them. */
function withFaults(real: SqliteBackend, fault: () => Fault): SearchBackend {
  return {
    engine: real.engine,
    apply: (changes, seq) => {
      const error = fault()(changes, seq);
      if (error) throw error;
      real.apply(changes, seq);
    },
    appliedSeq: () => real.appliedSeq(),
    streamIdentity: () => real.streamIdentity(),
    reset: (identity) => real.reset(identity),
    bulkLoad: (on) => real.bulkLoad(on),
    search: (request) => real.search(request),
    recordCount: () => real.recordCount(),
    close: () => real.close(),
  };
}

/** A logger that keeps what it writes at warn and above. */
function loggedTo(logged: Array<Record<string, unknown>>) {
  return pino({ level: "warn" }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
}

describe("search replica failures", () => {
  const it = replicaFailures;
  let nc: NatsConnection;
  let edge: TestDerrick;
  let real: SqliteBackend;
  let replica: Replica;
  let fault: Fault = () => undefined;
  /** What the replica logged at warn and above. */
  const logged: Array<Record<string, unknown>> = [];
  const sqliteError = (code: string, message: string) => Object.assign(new Error(message), { name: "SQLiteError", code });

  it.beforeAll(async ({ nats, nc: connection }) => {
    nc = connection;
    real = new SqliteBackend({ file: ":memory:" });
    replica = await followRecords(
      nc,
      withFaults(real, () => fault),
      loggedTo(logged),
      { backoff: { firstMs: 20, maxMs: 200 } },
    );
    // An edge without a search actor; this replica answers its health subject, as a search actor would.
    edge = await startDerrick(nats, { actors: ["identity"] });
    nc.subscribe(subjects.search.health(), {
      callback: (_, msg) => void msg.respond(JSON.stringify({ ...replica.health(), appliedSeq: real.appliedSeq() })),
    });
    await nc.flush();
  }, 60_000);
  afterAll(async () => {
    await edge?.cleanup();
    await replica?.stop();
    real?.close();
  });

  const js = () => jetstream(nc);
  const publish = (id: string, name: string) =>
    js().publish(subjects.records("opendes", recordKey(id)), JSON.stringify({ id, kind: WELL, acl: NORTH_ACL, data: { Name: name } }));
  const found = (word: string, index = real) =>
    index.search({
      partition: "opendes",
      kinds: ["*:*:*:*"],
      query: parseQuery(word),
      access: { all: true },
      sort: [],
      offset: 0,
      limit: 10,
      trackTotalCount: true,
    }).total;
  const readiness = async () => (await fetch(`${edge.url}/api/search/v2/readiness_check`)).status;

  it("replica - a follow loop that fails restarts after the last applied sequence with backoff, and is not ready meanwhile", async () => {
    expect(await readiness()).toBe(200);
    const appliedBefore = real.appliedSeq();
    const skippedBefore = replica.health().skipped;
    // The index file cannot be written (disk full, I/O error): nothing may be skipped, the replica retries.
    let failures = 0;
    fault = (changes) => (changes.length > 0 ? (failures++, sqliteError("SQLITE_IOERR_WRITE", "disk I/O error")) : undefined);
    const first = await publish("opendes:well:during-outage", "Outage");
    await eventually(() => replica.health().restarts >= 2, { what: "restarts" });
    expect(replica.health().lastError).toContain("disk I/O error");
    expect(real.appliedSeq()).toBe(appliedBefore);
    await eventually(async () => (await readiness()) === 503, { what: "readiness 503 while not following" });
    // The file is writable again: the message that failed is applied, then what came after.
    fault = () => undefined;
    const second = await publish("opendes:well:after-outage", "Recovered");
    await eventually(() => real.appliedSeq() >= second.seq, { what: "caught up after the failure" });
    expect(first.seq).toBeGreaterThan(appliedBefore);
    expect(found("outage")).toBe(1);
    expect(found("recovered")).toBe(1);
    expect(failures).toBeGreaterThanOrEqual(2);
    expect(replica.health()).toMatchObject({ following: true, skipped: skippedBefore });
    expect(logged).toContainEqual(
      expect.objectContaining({
        level: 50,
        appliedSeq: appliedBefore,
        msg: expect.stringContaining("restarting after the last applied sequence"),
      }),
    );
    await eventually(async () => (await readiness()) === 200, { what: "ready again" });
  });

  it("replica - a record the index refuses on its own account is skipped; the rest of its batch is applied", async () => {
    const { restarts, skipped } = replica.health();
    // Held back (the file is busy) so that both messages come in one batch once it is free again.
    fault = (changes) => (changes.length > 0 ? sqliteError("SQLITE_BUSY", "database is locked") : undefined);
    const refused = await publish("opendes:well:refused", "Refused");
    const last = await publish("opendes:well:accepted", "Accepted");
    await eventually(() => replica.health().restarts > restarts, { what: "held back" });
    fault = (changes) =>
      changes.some((c) => c.op === "upsert" && c.doc.id === "opendes:well:refused")
        ? sqliteError("SQLITE_CONSTRAINT_CHECK", "CHECK constraint failed")
        : undefined;
    await eventually(() => real.appliedSeq() >= last.seq, { what: "both applied" });
    fault = () => undefined;
    expect(found("accepted")).toBe(1);
    expect(found("refused")).toBe(0);
    const subject = subjects.records("opendes", recordKey("opendes:well:refused"));
    expect(replica.health()).toMatchObject({
      following: true,
      skipped: skipped + 1,
      lastSkipped: { subject, seq: refused.seq, reason: expect.stringContaining("CHECK constraint failed") },
    });
    expect(logged).toContainEqual(
      expect.objectContaining({ level: 40, subject, seq: refused.seq, reason: expect.stringContaining("CHECK constraint failed") }),
    );
  });

  it("replica - a write that fails when the flush timer applies a partial batch restarts the consumer after the last applied sequence; nothing is skipped and nothing escapes to the process", async ({
    nats,
  }) => {
    const burst = Array.from({ length: 40 }, (_, i) => `opendes:well:burst-${i}`);
    let last = 0;
    for (const [i, id] of burst.entries()) last = (await publish(id, `Burst ${i}`)).seq;
    // A new replica reads the stream over a slow link: it gets the burst in pieces and idles between
    // two. The batch it holds when a piece ends is short of BATCH and is not the stream's end
    // (pending > 0), so only the 5 ms flush timer can write it: an apply ending before `last` is
    // the timer's. The second such apply fails (disk I/O error), after the first one applied.
    const link = await startSlowLink(nats, { pieceBytes: 2048, pauseMs: 25 });
    const slowNc = await connect({ servers: link.url });
    const index = new SqliteBackend({ file: ":memory:" });
    const timerApplies: number[] = [];
    let failedAfter: number | undefined;
    const timerFault: Fault = (changes, seq) => {
      if (changes.length === 0 || seq >= last) return undefined;
      timerApplies.push(seq);
      if (timerApplies.length !== 2) return undefined;
      failedAfter = index.appliedSeq();
      return sqliteError("SQLITE_IOERR_WRITE", "disk I/O error from the timer");
    };
    // An error thrown in a timer would reach the process (Bun exits on it outside of the tests).
    const escaped: unknown[] = [];
    const onUncaught = (error: unknown) => void escaped.push(error);
    process.on("uncaughtException", onUncaught);
    const slowLogged: Array<Record<string, unknown>> = [];
    const slow = await followRecords(
      slowNc,
      withFaults(index, () => timerFault),
      loggedTo(slowLogged),
      { backoff: { firstMs: 20, maxMs: 200 } },
    );
    try {
      await eventually(() => index.appliedSeq() >= last, { what: "the slow replica caught up" });
      expect(escaped).toEqual([]);
      expect(found("burst", index), "burst records searchable").toBe(burst.length);
      expect(timerApplies.length, "applies by the flush timer").toBeGreaterThanOrEqual(2);
      expect(failedAfter).toBeGreaterThan(0);
      expect(slow.health()).toMatchObject({
        following: true,
        skipped: 0,
        lastError: expect.stringContaining("disk I/O error from the timer"),
      });
      expect(slow.health().restarts).toBeGreaterThanOrEqual(1);
      expect(slowLogged).toContainEqual(
        expect.objectContaining({
          level: 50,
          appliedSeq: failedAfter,
          msg: expect.stringContaining("restarting after the last applied sequence"),
        }),
      );
    } finally {
      process.off("uncaughtException", onUncaught);
      await slow.stop();
      index.close();
      await slowNc.close();
      await link.close();
    }
  });
  it("replica - a check of the stream's identity that throws is logged; nothing escapes to the process", async () => {
    const index = new SqliteBackend({ file: ":memory:" });
    const clock = new ManualClock(Date.now());
    // The index as another process's writer can leave it under this one (its tables dropped): every read throws.
    let unreadable = false;
    const backend: SearchBackend = {
      ...withFaults(index, () => () => undefined),
      streamIdentity: () => (unreadable ? undefined : index.streamIdentity()),
      appliedSeq: () => {
        if (unreadable) throw sqliteError("SQLITE_ERROR", "no such table: main.meta");
        return index.appliedSeq();
      },
    };
    const escaped: unknown[] = [];
    const onRejection = (error: unknown) => void escaped.push(error);
    process.on("unhandledRejection", onRejection);
    const checkLogged: Array<Record<string, unknown>> = [];
    const other = await followRecords(nc, backend, loggedTo(checkLogged), { clock });
    try {
      const last = (
        await jetstream(nc)
          .jetstreamManager()
          .then((jsm) => jsm.streams.info("RECORDS"))
      ).state.last_seq;
      await eventually(() => index.appliedSeq() >= last, { what: "the replica caught up" });
      unreadable = true;
      await clock.advance(IDENTITY_CHECK_MS);
      await eventually(() => checkLogged.some((l) => String(l.msg).includes("checking the RECORDS stream's identity failed")), {
        what: "the failed check logged",
      });
      expect(checkLogged).toContainEqual(
        expect.objectContaining({ level: 50, err: expect.objectContaining({ message: "no such table: main.meta" }) }),
      );
      expect(escaped).toEqual([]);
    } finally {
      unreadable = false;
      process.off("unhandledRejection", onRejection);
      await other.stop();
      index.close();
    }
  });

  it("replica - stopping it releases what it holds on the shared connection (its status listener too), so a process that starts and stops replicas does not pile them up", async () => {
    const listeners = () => (nc as unknown as { protocol: { listeners: unknown[] } }).protocol.listeners.length;
    const before = listeners();
    const index = new SqliteBackend({ file: ":memory:" });
    const other = await followRecords(nc, index, loggedTo([]), { backoff: { firstMs: 20, maxMs: 200 } });
    expect(listeners()).toBeGreaterThan(before);
    await other.stop();
    index.close();
    expect(listeners()).toBe(before);
  });
});

describe("search processes and their index files", () => {
  const it = indexFiles;

  it("search - a second search process on the same index file refuses to start, naming the settings; the first keeps answering, and the file is free once it stops", async ({
    nats,
    dataDir,
  }) => {
    const first = await startSearchDerrick(nats, {}, dataDir);
    let last: TestDerrick | undefined;
    try {
      await putRecords(first, [northWell("opendes:well:shared-1", "Shared")]);
      await eventually(async () => (await searchOk(first, { query: "shared" })).totalCount === 1, { what: "the record searchable" });
      // Sharing the file would let each process skip what the other applied: queries would silently miss records.
      await expect(startDerrick(nats, { edge: false, actors: ["search"], dataDir })).rejects.toThrow(
        `the search index file ${join(dataDir, "search", "index.sqlite")} is in use by another search process; give each search process its own DERRICK_DATA_DIR or DERRICK_SEARCH_INDEX_FILE`,
      );
      expect((await searchOk(first, { query: "shared" })).totalCount).toBe(1);
      await first.cleanup();
      last = await startSearchDerrick(nats, {}, dataDir);
      expect((await searchOk(last, { query: "shared" })).totalCount).toBe(1);
    } finally {
      await first.cleanup().catch(() => undefined);
      await last?.cleanup();
    }
  });
});
