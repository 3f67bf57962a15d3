import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { describe, expect, it } from "vitest";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { recordKey } from "../../subjects/search.ts";
import { parseDate, toIndexedDoc, tokenize } from "./documents.ts";
import { intersects, within, type Shape } from "./geo.ts";
import { parseQuery } from "./query/parser.ts";
import { changeOf, decodeChange } from "./replica.ts";
import { lookupFileOf } from "./lookup.ts";
import { MMAP_BYTES, SqliteBackend } from "./sqlite.ts";
import { testRecord as record, testRequest } from "./testing.ts";

const request = testRequest;

/** An upsert of test record `i` (key `k<i>`) with these data fields ({N: i} by default). */
const upsert = (i: number, data: Record<string, unknown> = { N: i }) => ({
  op: "upsert" as const,
  doc: toIndexedDoc("opendes", `k${i}`, record(i, data)),
});
/** Upserts of records from, from + 1, …, each with `data(i)` ({N: i} by default). */
const upserts = (from: number, n: number, data?: (i: number) => Record<string, unknown>) =>
  Array.from({ length: n }, (_, j) => upsert(from + j, data?.(from + j)));

/** An index file in a directory of its own, and the removal of both. */
function tempIndex(prefix: string): { file: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  return { file: join(dir, "index.sqlite"), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A backend following stream-1 from empty, in a bulk load when `bulk`. */
async function following(options: ConstructorParameters<typeof SqliteBackend>[0], bulk: boolean) {
  const backend = new SqliteBackend(options);
  await backend.reset("stream-1");
  if (bulk) await backend.bulkLoad(true);
  return backend;
}

/** What a backend holds: the stream it follows, the last sequence applied, its record count. */
const held = (backend: SqliteBackend) => [backend.streamIdentity(), backend.appliedSeq(), backend.recordCount()];

/** What `file` holds when opened again (an open empties files left unsound). */
function heldOnReopen(file: string) {
  const backend = new SqliteBackend({ file });
  try {
    return held(backend);
  } finally {
    backend.close();
  }
}

describe("search engine pieces", () => {
  it("engine - nested field paths are the same strings past the interning bound: 12,000 distinct keys, each leaf under its own path", () => {
    // Interned paths are shared per thread: past the bound (10,000) new ones are made per record.
    const keys = Array.from({ length: 12_000 }, (_, i) => `Key${i}`);
    const first = toIndexedDoc(
      "opendes",
      "k1",
      record(1, { Nested: Object.fromEntries(keys.map((k, i) => [k, i])), Other: { Key0: "x" } }),
    );
    const again = toIndexedDoc("opendes", "k2", record(2, { Nested: Object.fromEntries(keys.map((k, i) => [k, i + 1])) }));
    for (const doc of [first, again]) {
      const numbers = doc.leaves.filter((l) => l.path.startsWith("data.Nested."));
      expect(numbers.map((l) => l.path)).toEqual(keys.map((k) => `data.Nested.${k}`));
    }
    expect(again.leaves.find((l) => l.path === "data.Nested.Key11999")?.num).toBe(12_000);
    expect(first.leaves.find((l) => l.str === "x")?.path).toBe("data.Other.Key0");
    expect(first.leaves.filter((l) => l.path.startsWith("acl.")).map((l) => l.path)).toEqual(["acl.viewers", "acl.owners"]);
  });

  it("engine - each file is mapped as configured (DERRICK_SEARCH_MMAP_BYTES), 512 MiB unless told", () => {
    const dir = mkdtempSync(join(tmpdir(), "derrick-mmap-"));
    try {
      const mapped = (options: { mmapBytes?: number }) => {
        const backend = new SqliteBackend({ file: join(dir, "index.sqlite"), ...options });
        try {
          const db = (backend as unknown as { db: Database }).db;
          return ["main", "lookup"].map((schema) => (db.query(`PRAGMA ${schema}.mmap_size`).get() as { mmap_size: number }).mmap_size);
        } finally {
          backend.close();
        }
      };
      expect(mapped({})).toEqual([MMAP_BYTES, MMAP_BYTES]);
      expect(mapped({ mmapBytes: 0 })).toEqual([0, 0]);
      expect(mapped({ mmapBytes: 64 * 1024 * 1024 })).toEqual([64 * 1024 * 1024, 64 * 1024 * 1024]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("engine - totalCount stops at 10000 unless trackTotalCount asks for the exact count", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    const changes = upserts(0, 10_050);
    backend.apply(changes, changes.length);
    expect(backend.search(request()).total).toBe(10_000);
    expect(backend.search(request({ trackTotalCount: true })).total).toBe(10_050);
    expect(backend.search(request({ trackTotalCount: true, query: parseQuery("data.N:>=10000") })).total).toBe(50);
    backend.close();
  });

  it("engine - every typed value of a record with more leaves than one multi-row insert holds is indexed, and replaced on update", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    const data = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`F${i}`, i % 2 ? `v${i}` : i]));
    backend.apply([{ op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, data)) }], 1);
    const total = (q: string) => backend.search(request({ query: parseQuery(q) })).total;
    expect(total("data.F0:0")).toBe(1);
    expect(total("data.F33.keyword:v33")).toBe(1);
    expect(total("data.F68:[68 TO 68]")).toBe(1);
    expect(total("data.F69.keyword:v69")).toBe(1);
    expect(total("data.F69.keyword:v68")).toBe(0);
    backend.apply([{ op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, { F69: "w" })) }], 2);
    expect(total("data.F69.keyword:v69")).toBe(0);
    expect(total("data.F68:[68 TO 68]")).toBe(0);
    expect(total("data.F69.keyword:w")).toBe(1);
    backend.close();
  });

  it("engine - text written at the end of a batch: a record updated or deleted again within the batch keeps only its last text", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    const up = (i: number, words: string) => ({ op: "upsert" as const, doc: toIndexedDoc("opendes", `k${i}`, record(i, { Name: words })) });
    backend.apply([up(1, "alpha one"), up(2, "beta two")], 1);
    // In one batch: 1 (indexed before) updated twice, 3 new and updated, 4 new and deleted, 2 deleted and written again.
    backend.apply(
      [
        up(1, "gamma"),
        up(1, "delta"),
        up(3, "epsilon"),
        up(3, "zeta"),
        up(4, "eta"),
        { op: "delete", partition: "opendes", key: "k4" },
        { op: "delete", partition: "opendes", key: "k2" },
        up(2, "theta"),
      ],
      2,
    );
    const ids = (q: string) =>
      backend
        .search(request({ query: parseQuery(q), access: { all: true } }))
        .hits.map((h) => h.doc.id)
        .sort();
    expect(ids("alpha")).toEqual([]);
    expect(ids("gamma")).toEqual([]);
    expect(ids("delta")).toEqual(["opendes:well:1"]);
    expect(ids("data.Name:delta")).toEqual(["opendes:well:1"]);
    expect(ids("epsilon")).toEqual([]);
    expect(ids("zeta")).toEqual(["opendes:well:3"]);
    expect(ids("eta")).toEqual([]);
    expect(ids("beta")).toEqual([]);
    expect(ids("theta")).toEqual(["opendes:well:2"]);
    expect(ids("delta OR zeta OR theta")).toEqual(["opendes:well:1", "opendes:well:2", "opendes:well:3"]);
    expect(backend.recordCount()).toBe(3);
    backend.close();
  });

  it("engine - field paths by id: _exists_ of an object, unknown fields, wildcard fields, free infix wildcards, sorts and aggregations", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    backend.apply(
      [
        { op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, { Loc: { x: 1, y: "north" }, Name: "alpha", N: 3 })) },
        { op: "upsert", doc: toIndexedDoc("opendes", "k2", record(2, { Locx: 2, Name: "alphabet", N: 1, tags: "q" })) },
        { op: "upsert", doc: toIndexedDoc("opendes", "k3", record(3, { "Loc.": 5, Other: null, N: 2 })) },
      ],
      3,
    );
    const all = { access: { all: true } } as const;
    const ids = (q: string) =>
      backend
        .search(request({ query: parseQuery(q), ...all }))
        .hits.map((h) => h.doc.id)
        .sort();
    expect(ids("_exists_:data.Loc")).toEqual(["opendes:well:1"]); // not data.Locx; data.Loc. is the child "" of nothing here
    expect(ids("_exists_:data.Loc.y")).toEqual(["opendes:well:1"]);
    expect(ids("_exists_:data.Other")).toEqual([]);
    expect(ids("_exists_:data.Nope")).toEqual([]);
    expect(ids("data.Nope:alpha")).toEqual([]);
    expect(ids("data.N*:[2 TO 3]")).toEqual(["opendes:well:1", "opendes:well:3"]);
    expect(ids("data.Loc*:north")).toEqual(["opendes:well:1"]);
    expect(ids("al*h*")).toEqual(["opendes:well:1", "opendes:well:2"]);
    expect(ids("w*ll")).toEqual([]); // the id and kind are not free text
    expect(ids("q*")).toEqual(["opendes:well:2"]);
    expect(backend.search(request({ ...all, sort: [{ field: "data.N", order: "asc" }] })).hits.map((h) => h.doc.id)).toEqual([
      "opendes:well:2",
      "opendes:well:3",
      "opendes:well:1",
    ]);
    expect(backend.search(request({ ...all, sort: [{ field: "data.Nope", order: "asc" }] })).hits).toHaveLength(3);
    expect(backend.search(request({ ...all, aggregateBy: "data.Name" })).aggregations).toEqual([
      { key: "alpha", count: 1 },
      { key: "alphabet", count: 1 },
    ]);
    expect(backend.search(request({ ...all, aggregateBy: "data.Nope" })).aggregations).toEqual([]);
    backend.close();
  });

  it("engine - a caller without a matching group sees nothing, users.data.root everything", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    backend.apply([{ op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, {})) }], 1);
    expect(backend.search(request({ access: { all: false, groups: ["data.b.viewers"], asOwner: false } })).total).toBe(0);
    expect(backend.search(request({ access: { all: false, groups: [], asOwner: false } })).total).toBe(0);
    expect(backend.search(request({ access: { all: true } })).total).toBe(1);
    expect(backend.search(request({ access: { all: false, groups: ["data.a.owners"], asOwner: true } })).total).toBe(1);
    expect(backend.search(request({ access: { all: false, groups: ["data.a.viewers"], asOwner: true } })).total).toBe(0);
    backend.close();
  });

  it("engine - the value indexes of a bulk load are built off the query thread: queries are answered meanwhile, nothing is applied, the indexes exist after", async () => {
    const { file, remove } = tempIndex("derrick-engine-indexing");
    const indexes = () => {
      const db = new Database(lookupFileOf(file), { readonly: true });
      const names = db
        .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'vals_%'")
        .all()
        .map((r) => r.name);
      db.close();
      return names.sort();
    };
    const backend = await following({ file }, true);
    const n = 30_000;
    const changes = upserts(0, n, (i) => ({ N: i, S: `s${i % 7}` }));
    backend.apply(changes, n);
    expect(indexes()).toEqual([]);
    const range = request({ query: parseQuery("data.N:[100 TO 199] AND data.S:s3"), trackTotalCount: true });
    // The values and text are written by the worker (the lookup file): the same load in memory, on one connection, says what to expect.
    const reference = new SqliteBackend({ file: ":memory:" });
    reference.apply(changes, n);
    const expected = reference.search(range).total;
    reference.close();
    expect(expected).toBeGreaterThan(10);

    // The worker cannot finish while another connection holds the lookup file's write lock (it waits, busy_timeout):
    // the build is under way for as long as the test says, however fast or busy the machine.
    const holder = new Database(lookupFileOf(file));
    holder.exec("PRAGMA busy_timeout = 30000; BEGIN IMMEDIATE");
    const building = backend.bulkLoad(false);
    // The event loop turns while the worker builds: a timer fires mid-build, and this thread queries.
    expect(await new Promise<boolean>((resolve) => setTimeout(() => resolve(backend.indexing), 20))).toBe(true);
    expect(backend.loading).toBe(true); // the load is not over while its indexes are built
    expect(backend.search(range).total).toBeLessThanOrEqual(expected);
    expect(() => backend.apply([], n + 1)).toThrow(/being built/);
    holder.exec("COMMIT");
    holder.close();
    await building;
    expect(backend.indexing).toBe(false);
    expect(backend.loading).toBe(false);
    // FTS5 merged nothing during the load; merging is back on after it (its segments were merged into one).
    const config = new Database(lookupFileOf(file), { readonly: true });
    expect(config.query<{ v: number }, []>("SELECT v FROM fts_config WHERE k = 'automerge'").get()?.v).toBe(4);
    config.close();
    expect(indexes()).toEqual(["vals_num", "vals_str"]);
    expect(backend.search(range).total).toBe(expected);
    backend.close();
    expect(heldOnReopen(file)).toEqual(["stream-1", n, n]); // the bulk marker was cleared: the file is kept
    remove();
  });

  it("engine - a bulk load into an empty replica leaves the record key indexes out and builds them at its end; updates and deletes within the load find their rows", async () => {
    const { file, remove } = tempIndex("derrick-engine-loading-keys");
    const recordIndexes = (db: Database) =>
      db
        .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ('records_key', 'records_id')")
        .all()
        .map((r) => r.name)
        .sort();
    const backend = await following({ file }, true);
    // Keys as the stream has them (SHA-1 of the id), two sharing their first 52 bits.
    const key = (i: number) => recordKey(`opendes:test:${i}`);
    const twin = `${key(1).slice(0, 13)}${"f".repeat(27)}`;
    const doc = (k: string, i: number, data: Record<string, unknown>) => toIndexedDoc("opendes", k, record(i, data));
    backend.apply(
      [
        ...Array.from({ length: 50 }, (_, i) => ({ op: "upsert" as const, doc: doc(key(i), i, { N: i }) })),
        { op: "upsert", doc: doc(twin, 1000, { N: 1000 }) },
        { op: "upsert", doc: doc(key(1), 1, { N: 101 }) }, // an update of a record written earlier in the load
        { op: "delete", partition: "opendes", key: key(2) },
        { op: "delete", partition: "opendes", key: key(999) }, // never written
      ],
      53,
    );
    backend.apply(
      [
        { op: "upsert", doc: doc(key(2), 2, { N: 102 }) },
        { op: "delete", partition: "opendes", key: twin },
      ],
      55,
    );
    const live = new Database(file, { readonly: true });
    expect(recordIndexes(live)).toEqual([]);
    live.close();
    await backend.bulkLoad(false);
    const done = new Database(file, { readonly: true });
    expect(recordIndexes(done)).toEqual(["records_id", "records_key"]);
    done.close();
    expect(backend.recordCount()).toBe(50);
    const numbers = backend
      .search(request({ query: parseQuery("data.N:[100 TO 199]"), trackTotalCount: true }))
      .hits.map((h) => (h.doc.data as { N: number }).N)
      .sort();
    expect(numbers).toEqual([101, 102]);
    // Out of the bulk load the unique index itself refuses a second row for a key.
    backend.apply([{ op: "upsert", doc: doc(key(3), 3, { N: 103 }) }], 56);
    expect(backend.recordCount()).toBe(50);
    backend.close();
    remove();
  });

  it("engine - when the index builder worker cannot run, the indexes are built on this thread and a warning says so", async () => {
    const { file, remove } = tempIndex("derrick-engine-indexing-fallback");
    const warnings: string[] = [];
    const indexBuilder = new URL("./no-such-builder.ts", import.meta.url);
    const backend = await following({ file, onWarning: (m) => warnings.push(m), indexBuilder }, true);
    backend.apply(upserts(0, 100), 100);
    await backend.bulkLoad(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/writing the lookup file and building its indexes on the query thread/);
    const db = new Database(lookupFileOf(file), { readonly: true });
    expect(
      db
        .query<{ n: number }, []>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND name IN ('vals_str', 'vals_num')")
        .get()!.n,
    ).toBe(2);
    db.close();
    backend.close();
    remove();
  });

  it("engine - closing during the index build stops the worker; the file is rebuilt from the stream on open", async () => {
    const { file, remove } = tempIndex("derrick-engine-indexing-close");
    const backend = await following({ file }, true);
    backend.apply(upserts(0, 20_000), 20_000);
    const building = backend.bulkLoad(false);
    backend.close();
    await building; // settles: a close does not leave the build hanging
    expect(heldOnReopen(file)).toEqual([undefined, 0, 0]);
    remove();
  });

  it("engine - a read-only open beside a bulk load refuses the files and leaves them whole; after the load it reads them and writes nothing", async () => {
    const { file, remove } = tempIndex("derrick-engine-read-only");
    const backend = await following({ file }, true);
    backend.apply(upserts(0, 40), 40);
    expect(backend.loading).toBe(true);
    // Every record is applied, but the load has not ended: a writer's open here would empty both files.
    expect(() => new SqliteBackend({ file, readOnly: true })).toThrow(/not a finished build .* read-only open cannot rebuild it/);
    expect(() => new SqliteBackend({ file: `${file}.missing`, readOnly: true })).toThrow(
      /does not exist: a read-only open cannot make them/,
    );
    await backend.bulkLoad(false);
    expect(backend.loading).toBe(false);
    expect(held(backend)).toEqual(["stream-1", 40, 40]);
    const reader = new SqliteBackend({ file, readOnly: true });
    expect(held(reader)).toEqual(["stream-1", 40, 40]);
    expect(reader.search(request({ query: parseQuery("data.N:[10 TO 19]"), trackTotalCount: true })).total).toBe(10);
    expect(() => reader.apply(upserts(40, 1), 41)).toThrow(/readonly/);
    reader.close();
    backend.apply(upserts(40, 1), 41);
    expect(held(backend)).toEqual(["stream-1", 41, 41]);
    backend.close();
    remove();
  });

  it("engine - a file whose bulk load never finished is emptied on open (rebuilt from the stream); a finished one is kept", async () => {
    const { file, remove } = tempIndex("derrick-engine-bulk");
    let backend = await following({ file }, false);
    backend.apply(upserts(0, 20), 20);
    await backend.bulkLoad(true);
    backend.apply(upserts(20, 20), 40);
    backend.close(); // the process dies before the bulk load ends
    expect(heldOnReopen(file)).toEqual([undefined, 0, 0]);
    backend = await following({ file }, true);
    backend.apply(upserts(0, 40), 40);
    await backend.bulkLoad(false);
    backend.close();
    expect(heldOnReopen(file)).toEqual(["stream-1", 40, 40]);
    remove();
  });

  it("engine - the two files are emptied together when the lookup file is lost, or when one is behind the other (a crash between their commits)", async () => {
    const { file, remove } = tempIndex("derrick-engine-pair");
    const changes = (n: number) => upserts(0, n, (i) => ({ N: i, Text: `word${i % 3}` }));
    const fill = async () => {
      const backend = await following({ file }, false);
      backend.apply(changes(10), 10);
      expect(backend.search(request({ query: parseQuery("word1") })).total).toBe(3);
      backend.close();
    };
    await fill();
    expect(heldOnReopen(file)).toEqual(["stream-1", 10, 10]); // a sound pair is kept

    rmSync(lookupFileOf(file));
    rmSync(`${lookupFileOf(file)}-wal`, { force: true });
    rmSync(`${lookupFileOf(file)}-shm`, { force: true });
    expect(heldOnReopen(file)).toEqual([undefined, 0, 0]);

    await fill();
    const lookup = new Database(lookupFileOf(file));
    lookup.query("UPDATE meta SET v = '9' WHERE k = 'applied_seq'").run();
    lookup.close();
    expect(heldOnReopen(file)).toEqual([undefined, 0, 0]);
    remove();
  });

  it("engine - a commit that reached the documents file only (the lookup file behind) is caught at the next apply: it throws and the index asks to be rebuilt", async () => {
    const { file, remove } = tempIndex("derrick-engine-apart");
    const backend = await following({ file }, false);
    backend.apply([upsert(1)], 1);
    backend.apply([upsert(2)], 2);
    // What a lookup commit failing after the documents commit leaves: the lookup file one batch behind.
    const lookup = new Database(lookupFileOf(file));
    lookup.query("UPDATE meta SET v = '1' WHERE k = 'applied_seq'").run();
    lookup.close();
    expect(() => backend.apply([upsert(3)], 3)).toThrow(/out of step/);
    expect(backend.streamIdentity()).toBeUndefined();
    await backend.reset("stream-1");
    expect(held(backend)).toEqual(["stream-1", 0, 0]);
    backend.apply([upsert(1)], 1); // written together again
    expect(backend.appliedSeq()).toBe(1);
    backend.close();
    remove();
  });

  it("engine - a lookup writer that fails a batch stops the load: the next apply throws and the index asks to be rebuilt; reset empties both files", async () => {
    const { file, remove } = tempIndex("derrick-engine-writer-fails");
    const indexBuilder = new URL("../../test/search/fixtures/failing-index-builder.ts", import.meta.url);
    const backend = await following({ file, indexBuilder }, true);
    const batch = (from: number) => upserts(from, 10, (i) => ({ N: i - from }));
    backend.apply(batch(0), 10);
    await new Promise((resolve) => setTimeout(resolve, 200)); // the worker's failure arrives
    expect(() => backend.apply(batch(10), 20)).toThrow(/lookup writer failed: disk I\/O error \(test\)/);
    expect(backend.streamIdentity()).toBeUndefined(); // the replica resets and rebuilds from the stream
    await expect(backend.bulkLoad(false)).rejects.toThrow(/lookup writer failed/);
    await backend.reset("stream-1");
    expect(held(backend)).toEqual(["stream-1", 0, 0]);
    backend.close();
    remove();
  });

  it("engine - a one-word query ranks exactly as FTS5's bm25 rank, with the same ACL, kinds and counts, after updates, deletes and a reopen", () => {
    const { file, remove } = tempIndex("derrick-engine");
    let backend = new SqliteBackend({ file });
    const words = ["alpha", "beta", "gamma", "delta"];
    const doc = (i: number, v: number) => {
      const r = record(i, {
        Text: Array.from({ length: 1 + ((i * 7 + v) % 9) }, (_, j) => words[(i + j * v) % words.length]).join(" "),
        Name: `n${i % 5}`,
        N: i,
      });
      if (i % 3 === 0) r.acl = { viewers: ["data.b.viewers@opendes.example.com"], owners: ["data.b.owners@opendes.example.com"] };
      if (i % 4 === 0) r.kind = "osdu:wks:master-data--Other:1.0.0";
      return toIndexedDoc("opendes", `k${i}`, r);
    };
    backend.apply(
      Array.from({ length: 60 }, (_, i) => ({ op: "upsert" as const, doc: doc(i, 1) })),
      60,
    );
    backend.apply(
      [
        ...Array.from({ length: 10 }, (_, i) => ({ op: "upsert" as const, doc: doc(i * 3, 2) })),
        { op: "delete", partition: "opendes", key: "k7" },
      ],
      71,
    );
    const compare = (b: SqliteBackend) => {
      for (const query of ["alpha", "gamma", "delta AND data.N:[5 TO 40]", "beta AND NOT data.Name:n1"]) {
        for (const access of [
          { all: true } as const,
          { all: false, groups: ["data.a.viewers"], asOwner: false },
          { all: false, groups: ["data.b.owners"], asOwner: true },
        ]) {
          for (const kinds of [["*:*:*:*"], ["osdu:wks:master-data--well:1.0.0"]]) {
            const fast = b.search(request({ query: parseQuery(query), access, kinds, limit: 100 }));
            // An aggregation takes the SQL path, ranked by FTS5's own bm25().
            const sql = b.search(request({ query: parseQuery(query), access, kinds, limit: 100, aggregateBy: "data.Name" }));
            expect(fast.total).toBeGreaterThan(0);
            expect(fast.total).toBe(sql.total);
            expect(fast.hits.map((h) => h.doc.id)).toEqual(sql.hits.map((h) => h.doc.id));
            const page = b.search(request({ query: parseQuery(query), access, kinds, offset: 2, limit: 3 }));
            expect(page.hits.map((h) => h.doc.id)).toEqual(sql.hits.slice(2, 5).map((h) => h.doc.id));
          }
        }
      }
    };
    compare(backend);
    backend.close();
    backend = new SqliteBackend({ file });
    compare(backend);
    backend.close();
    remove();
  });

  it("engine - points found by spatial filters follow updates and deletes, and survive a reopen", () => {
    const { file, remove } = tempIndex("derrick-engine");
    const at = (i: number, lon: number, lat: number) => ({
      op: "upsert" as const,
      doc: toIndexedDoc("opendes", `k${i}`, record(i, { Location: { latitude: lat, longitude: lon } })),
    });
    const box = (west: number, south: number) => ({
      field: "data.Location",
      relation: "within" as const,
      area: { type: "box" as const, box: { minX: west, maxX: west + 1, minY: south, maxY: south + 1 } },
    });
    const ids = (b: SqliteBackend, west: number, south: number) =>
      b.search(request({ spatial: box(west, south), limit: 100 })).hits.map((h) => h.doc.id);
    let backend = new SqliteBackend({ file });
    backend.apply([at(1, 0.5, 0.5), at(2, 0.2, 0.8), at(3, 5.5, 5.5)], 3);
    expect(ids(backend, 0, 0)).toEqual(["opendes:well:1", "opendes:well:2"]);
    backend.apply([at(2, 5.2, 5.2), { op: "delete", partition: "opendes", key: "k1" }], 5);
    expect(ids(backend, 0, 0)).toEqual([]);
    expect(ids(backend, 5, 5)).toEqual(["opendes:well:2", "opendes:well:3"]);
    backend.close();
    backend = new SqliteBackend({ file });
    expect(ids(backend, 5, 5)).toEqual(["opendes:well:2", "opendes:well:3"]);
    expect(backend.search(request({ spatial: box(5, 5), access: { all: false, groups: ["data.b.viewers"], asOwner: false } })).total).toBe(
      0,
    );
    // Back and forth between cells: listed once, found where it is now.
    backend.apply([at(2, 0.3, 0.3)], 6);
    backend.apply([at(2, 5.3, 5.3)], 7);
    backend.apply([at(2, 0.6, 0.6)], 8);
    expect(backend.search(request({ spatial: box(0, 0), limit: 100 })).total).toBe(1);
    expect(ids(backend, 5, 5)).toEqual(["opendes:well:3"]);
    backend.close();
    remove();
  });

  it("engine - keyword ranges inside nested() compare text as the index does (case-sensitive for .keyword, numbers as their text)", () => {
    const b = new SqliteBackend({ file: ":memory:" });
    b.apply(
      [
        {
          op: "upsert",
          doc: toIndexedDoc(
            "opendes",
            "k1",
            record(1, {
              Items: [
                { code: "b", flag: 1 },
                { code: "B", flag: 2 },
              ],
            }),
          ),
        },
        { op: "upsert", doc: toIndexedDoc("opendes", "k2", record(2, { Items: [{ code: "x", n: 10 }] })) },
      ],
      1,
    );
    const ids = (q: string) => b.search(request({ query: parseQuery(q) })).hits.map((h) => h.doc.id);
    // The element with flag 1 has "b", outside the case-sensitive [A TO C]; "B" is in it but has flag 2.
    expect(ids("nested(data.Items, (code.keyword:[A TO C] AND flag:1))")).toEqual([]);
    expect(ids("nested(data.Items, (code.keyword:[A TO C] AND flag:2))")).toEqual(["opendes:well:1"]);
    expect(ids("nested(data.Items, (code.keywordLower:[a TO c] AND flag:1))")).toEqual(["opendes:well:1"]);
    // 10 as text sorts between "1" and "5", as the non-nested keyword range finds it.
    expect(ids("data.Items.n.keyword:[1 TO 5]")).toEqual(["opendes:well:2"]);
    expect(ids("nested(data.Items, (n.keyword:[1 TO 5]))")).toEqual(["opendes:well:2"]);
    b.close();
  });

  it("engine - dates are ES date_optional_time, rounded up for inclusive upper bounds", () => {
    expect(parseDate("2020")).toBe(Date.UTC(2020, 0, 1));
    expect(parseDate("2020", { roundUp: true })).toBe(Date.UTC(2020, 11, 31, 23, 59, 59, 999));
    expect(parseDate("2020-02", { roundUp: true })).toBe(Date.UTC(2020, 1, 29, 23, 59, 59, 999));
    expect(parseDate("2020-01-01T10:00:00+02:00")).toBe(Date.UTC(2020, 0, 1, 8));
    expect(parseDate("2020-13-01")).toBeUndefined();
    expect(parseDate("2020", { minimal: "day" })).toBeUndefined();
  });

  it("engine - text is analyzed like ES's standard analyzer (lowercase, no diacritics, split on punctuation)", () => {
    expect(tokenize("Ærø-Ström IN_PROGRESS no.109")).toEqual(["ærø", "strom", "in_progress", "no", "109"]);
  });

  it("engine - WITHIN a concave polygon fails when an edge leaves it although every vertex is inside", () => {
    const u = [
      [
        [0, 0],
        [3, 0],
        [3, 3],
        [2, 3],
        [2, 1],
        [1, 1],
        [1, 3],
        [0, 3],
        [0, 0],
      ],
    ] as Array<Array<[number, number]>>;
    const line: Shape = {
      points: [],
      lines: [
        [
          [0.5, 2],
          [2.5, 2],
        ],
      ],
      polygons: [],
    };
    expect(within(line, { type: "polygon", polygon: u })).toBe(false);
    const inside: Shape = {
      points: [],
      lines: [
        [
          [0.5, 0.5],
          [2.5, 0.5],
        ],
      ],
      polygons: [],
    };
    expect(within(inside, { type: "polygon", polygon: u })).toBe(true);
    const square = [
      [
        [0, 0],
        [1, 0],
        [1, 1],
        [0, 1],
        [0, 0],
      ],
    ] as Array<Array<[number, number]>>;
    expect(
      intersects(
        {
          points: [],
          lines: [],
          polygons: [
            [
              [
                [0.5, 0.5],
                [2, 0.5],
                [2, 2],
                [0.5, 2],
                [0.5, 0.5],
              ],
            ],
          ],
        },
        [square],
      ),
    ).toBe(true);
    expect(intersects({ points: [[5, 5]], lines: [], polygons: [] }, [square])).toBe(false);
  });

  it("engine - stream messages: a tombstone deletes; a key that is not the id's SHA-1 is skipped", () => {
    const id = "opendes:well:1";
    const data = new TextEncoder().encode(
      JSON.stringify({ id, kind: "osdu:wks:w:1.0.0", acl: { viewers: ["a"], owners: ["a"] }, data: {} }),
    );
    const good = changeOf({ subject: `derrick.records.opendes.${recordKey(id)}`, data, headers: undefined, seq: 7 });
    expect(good).toMatchObject({ op: "upsert", doc: { id, key: recordKey(id), doc: { version: 7 } } });
    expect(changeOf({ subject: "derrick.records.opendes.abc", data, headers: undefined, seq: 8 })).toBeUndefined();
    expect(changeOf({ subject: `derrick.records.other.${recordKey(id)}`, data, headers: undefined, seq: 9 })).toBeUndefined();
    const h = natsHeaders();
    h.set("Derrick-Record-Operation", "delete");
    expect(changeOf({ subject: "derrick.records.opendes.abc", data: new Uint8Array(0), headers: h, seq: 10 })).toEqual({
      op: "delete",
      partition: "opendes",
      key: "abc",
    });
  });

  it("engine - stream messages that cannot be indexed are skipped with their reason, never thrown", () => {
    const id = "opendes:well:1";
    const subject = `derrick.records.opendes.${recordKey(id)}`;
    const raw = (text: string) => ({ subject, data: new TextEncoder().encode(text), headers: undefined, seq: 11 });
    const acl = JSON.stringify({ viewers: ["a"], owners: ["a"] });
    const nested = (levels: number) =>
      raw(`{"id":"${id}","kind":"osdu:wks:w:1.0.0","acl":${acl},"data":{"x":${"[".repeat(levels)}${"]".repeat(levels)}}}`);
    expect(decodeChange(raw(`{"id":"${id}","kind":"osdu:wks:w:1.0.0","acl":{"viewers":[1],"owners":["a"]},"data":{}}`))).toEqual({
      op: "skip",
      reason: "acl.viewers and acl.owners are required, as arrays of strings",
    });
    expect(decodeChange(nested(30_000))).toEqual({
      op: "skip",
      reason: expect.stringMatching(/^nests objects and arrays more than 64 levels deep \(at \/data\/x(\/0)+\)$/),
    });
    expect(decodeChange(nested(62))).toMatchObject({ op: "upsert" }); // 64 levels: the record, data, 62 arrays
    expect(decodeChange(nested(63))).toMatchObject({ op: "skip" });
    expect(decodeChange(raw("[1]"))).toEqual({ op: "skip", reason: "not an object" });
    expect(decodeChange(raw("{nope"))).toEqual({ op: "skip", reason: "not JSON" });
  });
});
