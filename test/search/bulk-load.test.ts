import { describe, expect } from "vitest";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/nats-core";
import { jetstream } from "@nats-io/jetstream";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { pino } from "pino";
import { natsTest } from "../harness/fixture.ts";
import { subjects } from "../../subjects/index.ts";
import { RECORD_DELETE, RECORD_OPERATION_HEADER, recordKey } from "../../subjects/search.ts";
import { followRecords } from "../../actors/search/replica.ts";
import type { SearchBackend } from "../../actors/search/backend.ts";
import { SqliteBackend } from "../../actors/search/sqlite.ts";
import { lookupFileOf } from "../../actors/search/lookup.ts";
import { ensureRecordsStream } from "../../actors/storage/store.ts";
import { parseQuery } from "../../actors/search/query/parser.ts";
import { NORTH_ACL, SOUTH_ACL, WELL } from "./helpers.ts";

/** Past BULK_BACKLOG (20,000): the replica loads it in bulk mode — decode worker, lookup writer worker, indexes at the end. */
const RECORDS = 24_000;
const UPDATED = 1_000;
const DELETED = 500;

const it = natsTest();

describe("search replica bulk load", () => {
  let lastSeq = 0;
  let notJsonSeq = 0;

  it.beforeAll(async ({ nc, jsm }) => {
    await ensureRecordsStream(jsm);
    const js = jetstream(nc);
    const subject = (i: number) => subjects.records("opendes", recordKey(`opendes:well:bulk-${i}`));
    const record = (i: number, word: string) =>
      JSON.stringify({
        id: `opendes:well:bulk-${i}`,
        kind: WELL,
        acl: i % 2 ? SOUTH_ACL : NORTH_ACL,
        data: { Name: `${word} n${i % 10}`, Depth: i, Location: { latitude: (i % 80) + 0.5, longitude: (i % 170) + 0.5 } },
      });
    const window: Array<Promise<{ seq: number }>> = [];
    const push = async (p: Promise<{ seq: number }>) => {
      window.push(p);
      if (window.length >= 1000) for (const ack of await Promise.all(window.splice(0))) lastSeq = Math.max(lastSeq, ack.seq);
    };
    for (let i = 0; i < RECORDS; i++) await push(js.publish(subject(i), record(i, "original")));
    // Later versions of the first records, deletes of the next ones, and a message that cannot be indexed.
    for (let i = 0; i < UPDATED; i++) await push(js.publish(subject(i), record(i, "updated")));
    const deleted = natsHeaders();
    deleted.set(RECORD_OPERATION_HEADER, RECORD_DELETE);
    for (let i = UPDATED; i < UPDATED + DELETED; i++) await push(js.publish(subject(i), "", { headers: deleted }));
    for (const ack of await Promise.all(window.splice(0))) lastSeq = Math.max(lastSeq, ack.seq);
    notJsonSeq = (await js.publish(subjects.records("opendes", recordKey("opendes:well:broken")), "{not json")).seq;
    lastSeq = notJsonSeq;
  }, 120_000);

  const count = (index: SqliteBackend, query: string, access: "all" | "north" = "all") =>
    index.search({
      partition: "opendes",
      kinds: ["*:*:*:*"],
      query: parseQuery(query),
      access: access === "all" ? { all: true } : { all: false, groups: ["data.north.viewers"], asOwner: false },
      sort: [],
      offset: 0,
      limit: 10,
      trackTotalCount: true,
    }).total;

  const expectLoaded = (index: SqliteBackend) => {
    expect(index.indexing).toBe(false);
    expect(index.loading).toBe(false);
    expect(index.appliedSeq()).toBe(lastSeq);
    expect(index.recordCount()).toBe(RECORDS - DELETED);
    expect(count(index, "original")).toBe(RECORDS - UPDATED - DELETED);
    expect(count(index, "updated")).toBe(UPDATED);
    // Values (typed ranges) and ACLs as written: even Depth values in [0, 99] are north's, the deleted ones start at 1000.
    expect(count(index, "data.Depth:[0 TO 99]", "north")).toBe(50);
    expect(count(index, "data.Depth:[1000 TO 1499]")).toBe(0);
    expect(count(index, "data.Name:n3 AND data.Depth:[20000 TO *]")).toBe((RECORDS - 20_000) / 10);
    const lookup = new Database(lookupFileOf(index.options.file), { readonly: true });
    expect(
      lookup
        .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'vals_%' ORDER BY name")
        .all()
        .map((r) => r.name),
    ).toEqual(["vals_num", "vals_str"]);
    lookup.close();
  };

  /**
   * Loads the stream into a fresh file under `dataDir/<name>` and checks it holds what was written;
   * `check` sees the load, then the replica stops and the index closes. Answers the file.
   */
  const load = async (
    { nc, dataDir }: { nc: NatsConnection; dataDir: string },
    name: string,
    options: { decoder?: URL; wrap?: (index: SqliteBackend) => SearchBackend },
    check: (loaded: { replica: Awaited<ReturnType<typeof followRecords>>; logged: Array<Record<string, unknown>> }) => void,
  ) => {
    const logged: Array<Record<string, unknown>> = [];
    const index = new SqliteBackend({ file: join(dataDir, name, "index.sqlite") });
    const log = pino({ level: "info" }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
    const backend = options.wrap ? options.wrap(index) : index;
    const replica = await followRecords(nc, backend, log, { decoder: options.decoder, backoff: { firstMs: 20, maxMs: 200 } });
    try {
      // Resolves once the load ended: everything applied is searchable and indexed.
      await replica.caughtUp(90_000);
      expectLoaded(index);
      check({ replica, logged });
    } finally {
      await replica.stop();
      index.close();
    }
    return index.options.file;
  };

  it("replica - a backlog past 20,000 messages is decoded in a worker and written to both files in parallel; updates, deletes and a broken message come out as one by one would", {
    timeout: 120_000,
  }, async ({ nc, dataDir }) => {
    const file = await load({ nc, dataDir }, "workers", {}, ({ replica, logged }) => {
      expect(replica.health()).toMatchObject({ following: true, skipped: 1, lastSkipped: { seq: notJsonSeq, reason: "not JSON" } });
      expect(logged.filter((l) => /did not start/.test(String(l.msg)))).toEqual([]);
      expect(logged).toContainEqual(expect.objectContaining({ msg: "search index value indexes built" }));
    });
    // The files alone give the same answers after a reopen: the bulk markers were cleared, nothing is rebuilt.
    const reopened = new SqliteBackend({ file });
    expectLoaded(reopened);
    reopened.close();
  });

  it("replica - a decode worker that dies mid-load loses nothing: the consumer restarts after what was applied and the load ends the same", {
    timeout: 120_000,
  }, async ({ nc, dataDir }) => {
    const decoder = new URL("./fixtures/crashing-decode-worker.ts", import.meta.url);
    await load({ nc, dataDir }, "crash", { decoder }, ({ replica, logged }) => {
      expect(replica.health().restarts).toBeGreaterThanOrEqual(1);
      expect(logged).toContainEqual(
        expect.objectContaining({
          level: 50,
          msg: expect.stringContaining("restarting after the last applied sequence"),
          err: expect.objectContaining({ message: expect.stringContaining("the decode worker failed") }),
        }),
      );
    });
  });

  it("replica - a failure that ends the consumer between two batches loses nothing: a flush timer left behind does not mark what the decode worker held as applied", {
    timeout: 120_000,
  }, async ({ nc, dataDir }) => {
    // The 3,001st message's wait check throws: the loop ends with messages still in the decode batch
    // being filled and in flight, and a flush timer armed for them.
    let calls = 0;
    const throwing = (index: SqliteBackend): SearchBackend =>
      new Proxy(index, {
        get(target, property) {
          if (property === "backpressure")
            return () => {
              if (++calls === 3_001) throw new Error("injected failure between batches (test)");
              return target.backpressure();
            };
          const value = Reflect.get(target, property) as unknown;
          return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    await load({ nc, dataDir }, "between", { wrap: throwing }, ({ replica }) => {
      expect(calls).toBeGreaterThan(3_001);
      expect(replica.health()).toMatchObject({ lastError: expect.stringContaining("injected failure between batches") });
    });
  });

  it("replica - when the decode worker cannot start, the bulk load decodes on the actor's thread, says so, and ends the same", {
    timeout: 120_000,
  }, async ({ nc, dataDir }) => {
    await load({ nc, dataDir }, "inline", { decoder: new URL("./no-such-decoder.ts", import.meta.url) }, ({ logged }) => {
      expect(logged).toContainEqual(
        expect.objectContaining({ level: 40, msg: "the decode worker did not start; decoding on the actor's thread" }),
      );
    });
  });
});
