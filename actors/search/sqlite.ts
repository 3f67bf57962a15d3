/**
 * The embedded search backend: one `bun:sqlite` index per search actor, a rebuildable replica of the
 * RECORDS stream in two files; its tables and why they are shaped so: docs/search.md#the-index-replica.
 */
import { Database, type SQLQueryBindings } from "bun:sqlite";
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Aggregation } from "../../subjects/search.ts";
import type { RecordChange, SearchBackend, SearchHit, SearchRequest, SearchResult, SortValue } from "./backend.ts";
import { LeafType, tokenize } from "./documents.ts";
import { matchesNested, typedBounds, typedTerm, type Bounds } from "./evaluate.ts";
import { compileGlob } from "./glob.ts";
import { bm25, idf, PointIndex, RowFacts } from "./rows.ts";
import { bestFirst, wordRows } from "./ranked-page.ts";
import { LoadingKeys } from "./loading-keys.ts";
import { fieldPrefix, leavesOf, PathTable, prepareRecord, SHAPE_SLOTS, type PreparedParts, type PreparedRecord } from "./prepared.ts";
import {
  DATES,
  FAIL,
  NUMBERS,
  orderedCandidates,
  PASS,
  SortColumns,
  UNDECIDED,
  rangeVerdict,
  sortedPage,
  type ColumnSource,
  type NumericColumn,
  type NumericRange,
  type SortedPage,
} from "./sort-columns.ts";
import { countTerms, matchWords, TermColumns, type TermColumn, type TermSource } from "./term-columns.ts";
import { areaBBox, intersectsPrepared, prepareArea, preparePolygon, withinPrepared, type BBox, type Shape } from "./geo.ts";
import { invalidParameters } from "./validate.ts";
import {
  bulkTextEnd,
  bulkTextOff,
  dropValueIndexes,
  emptyLookupBatch,
  LOOKUP,
  lookupFileOf,
  lookupSchema,
  LookupWriter,
  valueIndexes,
  type LookupBatch,
  type LookupPart,
} from "./lookup.ts";
import { LookupWorker } from "./lookup-worker.ts";
import { matchAll, positivePart, type NestedNode, type QueryNode, type RangeNode, type TermNode } from "./query/ast.ts";

/** A `records` row as the facts take it. */
type FactRow = { rid: number; partition: string; kind: string; authority: string; acl: string; tokens: number };
/** Fields ES maps as keyword in OSDU indexes: a term on them matches the whole value exactly (`version` is a long: numeric). */
const KEYWORD_FIELDS = new Set(["id", "kind", "authority", "source", "namespace", "type", "createUser", "modifyUser", "ancestry.parents"]);
const TOTAL_CAP = 10_000;
/** Bumped when the tables change: an index file of another version is rebuilt. */
const SCHEMA_VERSION = "8";
const AGGREGATION_SIZE = 1000;
/**
 * Most exact-geometry work one spatial filter may take, in vertex comparisons (a candidate costs 1 more):
 * beyond it a 400, as results, count and aggregations all come from the exact hits (docs/search.md#spatial-filters).
 */
export const SPATIAL_WORK_MAX = 20_000_000;
const spatialTooCostly = () =>
  invalidParameters([
    {
      pointer: "/body/spatialFilter",
      message: `the spatial filter needs more than ${SPATIAL_WORK_MAX} vertex comparisons with the records it may match: use a polygon with fewer points, a smaller area, or narrow the kind`,
    },
  ]);
/** The records' indexes whose inserts land at random: left out of a bulk load into an empty replica, built at its end (loading-keys.ts). */
const RECORD_KEY_INDEXES = `CREATE UNIQUE INDEX IF NOT EXISTS records_key ON records(partition, key);
CREATE INDEX IF NOT EXISTS records_id ON records(partition, id);`;
const DROP_RECORD_KEY_INDEXES = "DROP INDEX IF EXISTS records_key; DROP INDEX IF EXISTS records_id;";
const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records(
  rid INTEGER PRIMARY KEY,
  partition TEXT NOT NULL,
  key TEXT NOT NULL,
  id TEXT NOT NULL,
  kind TEXT NOT NULL,
  authority TEXT NOT NULL,
  shapes INTEGER NOT NULL DEFAULT 0,
  acl TEXT NOT NULL DEFAULT '',
  tokens INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS docs(rid INTEGER PRIMARY KEY, doc TEXT NOT NULL);
${RECORD_KEY_INDEXES}
CREATE INDEX IF NOT EXISTS records_kind ON records(partition, kind);
CREATE TABLE IF NOT EXISTS acl(rid INTEGER NOT NULL, grp TEXT NOT NULL, owner INTEGER NOT NULL, PRIMARY KEY(rid, grp)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS paths(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS points(gid INTEGER PRIMARY KEY, rid INTEGER NOT NULL, path TEXT NOT NULL, x REAL NOT NULL, y REAL NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS geo USING rtree(gid, minX, maxX, minY, maxY, +rid INTEGER, +path TEXT, +shape TEXT);
`;
/** The documents file's tables, and those of schema 7 and before (when `vals` and `fts` were here). */
const MAIN_TABLES = ["fts", "geo", "points", "records", "docs", "acl", "vals", "paths", "shapes", "meta"];
const LOOKUP_TABLES = ["fts", "vals", "meta"];
/** Batches posted to the lookup writer and not yet written, beyond which the replica waits (backpressure()). */
const LOOKUP_QUEUE_MAX = 4;

function escapeGlob(text: string): string {
  return text.replace(/[*?[]/g, (c) => `[${c}]`);
}

/** 16 KiB pages for both files: fewer pages to write, split and map in a bulk load (docs/search.md#page-size-and-memory-maps). */
const PAGE_SIZE = 16_384;

/** How long a statement waits for another connection's lock on a file before SQLITE_BUSY. */
const OPEN_BUSY_TIMEOUT_MS = 5_000;

/** A Lucene wildcard pattern (`*`, `?`, `\` escapes) as a GLOB pattern. */
function luceneToGlob(pattern: string, lower: boolean): string {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\" && i + 1 < pattern.length) out += escapeGlob(lower ? pattern[++i]!.toLowerCase() : pattern[++i]!);
    else if (c === "*" || c === "?") out += c;
    else out += escapeGlob(lower ? c.toLowerCase() : c);
  }
  return out;
}

export type SqliteOptions = {
  file: string;
  /** Told when something degrades without failing (e.g. the index builder worker could not run). */
  onWarning?: (message: string) => void;
  /** The index builder worker's module (tests point it elsewhere to exercise the fallback). */
  indexBuilder?: URL;
  /** true: text matches ranked and sorted in SQL only, not in memory (tests compare the two paths). */
  sqlOnly?: boolean;
  /**
   * true: opened to read only, beside the process that owns the files (a bench, a tool): nothing is migrated or
   * written, and files that are not a finished build are refused (a writer's open would empty such files). Beside a
   * replica applying batches a refusal may be a commit caught between the two files: open again. The in-memory facts
   * are read at open and do not follow later writes.
   */
  readOnly?: boolean;
  /** How much of each file is memory-mapped for reads (DERRICK_SEARCH_MMAP_BYTES; MMAP_BYTES by default). */
  mmapBytes?: number;
};

/** Maps of 512 MiB per file: mapped pages count in the process RSS (docs/search.md#page-size-and-memory-maps). */
export const MMAP_BYTES = 512 * 1024 * 1024;

export class SqliteBackend implements SearchBackend {
  readonly engine: { name: string; version: string };
  readonly takesPrepared = true;
  private readonly db: Database;
  /** Field paths the index has seen, with their ids in `vals` (the `paths` table). */
  private readonly pathIds = new Map<string, number>();
  private readonly nestedQueries = new Map<number, NestedNode>();
  private nextNested = 1;
  private bulk = false;
  private building = false;
  private closed = false;
  private readonly stmts;
  private readonly facts = new RowFacts();
  private readonly points = new PointIndex();
  private readonly sortColumns = new SortColumns();
  private readonly termColumns = new TermColumns();
  /** Writes the lookup file on this connection: out of a bulk load, and in one when no worker runs. */
  private readonly lookupWriter: LookupWriter;
  /** What the batch being applied does to the lookup file (see apply). */
  private lookupBatch: LookupBatch = emptyLookupBatch(0);
  /** The two files were found apart (see apply): the index asks to be rebuilt. */
  private diverged = false;
  /** Counts what may change answers (see resultsVersion). */
  private changes = 0;
  /** The lookup writer worker of a bulk load (index-builder.ts), while one runs. */
  private worker: LookupWorker | undefined;
  /** The records' rows by key in a bulk load into an empty replica, while RECORD_KEY_INDEXES are left out. */
  private loadingKeys: LoadingKeys | undefined;

  constructor(readonly options: SqliteOptions) {
    const readOnly = options.readOnly === true && options.file !== ":memory:";
    if (readOnly && !(existsSync(options.file) && existsSync(lookupFileOf(options.file))))
      throw new Error(`the search index ${options.file} or its lookup file does not exist: a read-only open cannot make them`);
    if (!readOnly && options.file !== ":memory:") mkdirSync(dirname(options.file), { recursive: true });
    this.db = new Database(options.file, readOnly ? { readonly: true, strict: true } : { create: true, strict: true });
    // Maps per file (mapped pages count in the RSS); a busy timeout, as a worker just terminated
    // may hold the lookup file's lock; the page size before WAL mode, which fixes it
    // (docs/search.md#page-size-and-memory-maps). A reader finds both already set in the files.
    const mmap = options.mmapBytes ?? MMAP_BYTES;
    const pragmas = (schema: string) =>
      `${readOnly ? "" : `PRAGMA ${schema}.page_size = ${PAGE_SIZE}; PRAGMA ${schema}.journal_mode = WAL; PRAGMA ${schema}.synchronous = NORMAL; `}PRAGMA ${schema}.cache_size = -65536; PRAGMA ${schema}.mmap_size = ${mmap};`;
    this.db.exec(`PRAGMA busy_timeout = ${OPEN_BUSY_TIMEOUT_MS}; ${pragmas("main")}`);
    this.db.query(`ATTACH DATABASE ? AS ${LOOKUP}`).run(options.file === ":memory:" ? ":memory:" : lookupFileOf(options.file));
    this.db.exec(pragmas(LOOKUP));
    const compile = this.db
      .query<{ compile_options: string }, []>("PRAGMA compile_options")
      .all()
      .map((r) => r.compile_options);
    for (const needed of ["ENABLE_FTS5", "ENABLE_RTREE"]) {
      if (!compile.includes(needed)) throw new Error(`this SQLite lacks ${needed}: search needs FTS5 and R*Tree (Bun on Linux ships both)`);
    }
    if (readOnly) this.refuseUnfinished();
    else this.migrate();
    // Per-term instances (row, column) of the text index: term frequencies for BM25 without FTS5's per-row lookups.
    this.db.exec(`CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_instances USING fts5vocab(${LOOKUP}, fts, instance)`);
    const version = this.db.query<{ v: string }, []>("SELECT sqlite_version() AS v").get()!.v;
    this.engine = { name: "sqlite", version };
    // The exact meaning of nested(): evaluated in JS on rows the SQL prefilter let through.
    this.db.function("derrick_nested", { deterministic: true }, (doc: string, token: number) => {
      const node = this.nestedQueries.get(token);
      return node && matchesNested(node, JSON.parse(doc)) ? 1 : 0;
    });
    this.lookupWriter = new LookupWriter(this.db, `${LOOKUP}.`, (path) => this.pathId(path, true));
    this.stmts = {
      ridOf: this.db.query<{ rid: number; shapes: number }, [string, string]>(
        "SELECT rid, shapes FROM records WHERE partition = ? AND key = ?",
      ),
      keyOfRid: this.db.query<{ partition: string; key: string; shapes: number }, [number]>(
        "SELECT partition, key, shapes FROM records WHERE rid = ?",
      ),
      // run()'s lastInsertRowid, not RETURNING: the returned row cost ~15% of a bulk build's writes.
      insertRecord: this.db.query<unknown, [string, string, string, string, string, number, string, number]>(
        "INSERT INTO records(partition, key, id, kind, authority, shapes, acl, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      ),
      updateRecord: this.db.query("UPDATE records SET id = ?, kind = ?, authority = ?, shapes = ?, acl = ?, tokens = ? WHERE rid = ?"),
      deleteRecord: this.db.query("DELETE FROM records WHERE rid = ?"),
      upsertDoc: this.db.query("INSERT OR REPLACE INTO docs(rid, doc) VALUES (?, ?)"),
      deleteDoc: this.db.query("DELETE FROM docs WHERE rid = ?"),
      insertAcl: this.db.query("INSERT OR REPLACE INTO acl(rid, grp, owner) VALUES (?, ?, ?)"),
      deleteAcl: this.db.query("DELETE FROM acl WHERE rid = ?"),
      insertPath: this.db.query<unknown, [string]>("INSERT INTO paths(path) VALUES (?)"),
      insertGeo: this.db.query("INSERT INTO geo(gid, minX, maxX, minY, maxY, rid, path, shape) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
      deleteGeo: this.db.query("DELETE FROM geo WHERE gid = ?"),
      insertPoint: this.db.query("INSERT INTO points(gid, rid, path, x, y) VALUES (?, ?, ?, ?, ?)"),
      deletePoint: this.db.query("DELETE FROM points WHERE gid = ?"),
      docsOf: this.db.query<[number, string], [string]>("SELECT rid, doc FROM docs WHERE rid IN (SELECT value FROM json_each(?))"),
      idsOf: this.db.query<[number, string], [string]>("SELECT rid, id FROM records WHERE rid IN (SELECT value FROM json_each(?))"),
      ftsRows: this.db.query<[number], [string]>("SELECT rowid FROM fts WHERE fts MATCH ?"),
      ftsRanked: this.db.query<[number, number], [string]>("SELECT rowid, rank FROM fts WHERE fts MATCH ?"),
      getMeta: this.db.query<{ v: string }, [string]>("SELECT v FROM main.meta WHERE k = ?"),
      setMeta: this.db.query("INSERT OR REPLACE INTO main.meta(k, v) VALUES (?, ?)"),
      setLookupMeta: this.db.query(`INSERT OR REPLACE INTO ${LOOKUP}.meta(k, v) VALUES (?, ?)`),
      getLookupMeta: this.db.query<{ v: string }, [string]>(`SELECT v FROM ${LOOKUP}.meta WHERE k = ?`),
      // One string for all of a word's instances: a row (a JS array) per instance was most of a one-word query's time.
      bodyInstances: this.db.query<{ list: string | null }, [string]>(
        "SELECT group_concat(doc) AS list FROM temp.fts_instances WHERE term = ? AND col = 'body'",
      ),
    };
    this.loadFacts();
  }

  /** The in-memory copies of what the file holds: facts, points, path ids (on open, and after a rolled-back batch). */
  private loadFacts(): void {
    this.pathIds.clear();
    for (const [id, path] of this.db.query<[number, string], []>("SELECT id, path FROM paths").values() as Array<[number, string]>)
      this.pathIds.set(path, id);
    this.facts.clear();
    this.sortColumns.clear();
    this.termColumns.clear();
    // The large tables a row at a time (`iterate`), never as one array: see termSource.
    const records = this.db.query<FactRow, []>("SELECT rid, partition, kind, authority, acl, tokens FROM records");
    for (const r of records.iterate()) this.facts.set(r.rid, r.partition, r.kind, r.authority, r.acl, r.tokens);
    this.points.clear();
    const points = this.db.query<{ rid: number; path: string; x: number; y: number }, []>("SELECT rid, path, x, y FROM points");
    for (const r of points.iterate()) this.points.set(r.path, r.rid, r.x, r.y);
  }

  /**
   * Files of another schema, of an unfinished bulk load, or whose halves do not belong together (another
   * build or applied sequence) are emptied and rebuilt from the stream (docs/search.md#the-index-replica).
   */
  private migrate(): void {
    if (!this.finishedBuild()) {
      for (const table of MAIN_TABLES) this.db.exec(`DROP TABLE IF EXISTS main.${table}`);
      for (const table of LOOKUP_TABLES) this.db.exec(`DROP TABLE IF EXISTS ${LOOKUP}.${table}`);
    }
    this.db.exec(SCHEMA + lookupSchema(`${LOOKUP}.`) + valueIndexes(`${LOOKUP}.`));
    if (this.db.query<{ v: string }, []>("SELECT v FROM main.meta WHERE k = 'build'").get() === null) this.writeIdentity(undefined);
  }

  private refuseUnfinished(): void {
    if (this.finishedBuild()) return;
    this.db.close();
    throw new Error(
      `the search index ${this.options.file} is not a finished build (of another schema, mid bulk load, or its two files apart): a read-only open cannot rebuild it`,
    );
  }

  /** Whether both files hold this schema's tables of one build, applied to the same sequence, no bulk load under way. */
  private finishedBuild(): boolean {
    const state = (schema: string) => {
      const has = this.db.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${schema}.sqlite_master WHERE name = 'meta'`).get()!.n > 0;
      const meta = new Map(
        has ? (this.db.query<[string, string], []>(`SELECT k, v FROM ${schema}.meta`).values() as Array<[string, string]>) : [],
      );
      return {
        has,
        schema: meta.get("schema"),
        bulk: meta.get("bulk") === "1",
        build: meta.get("build"),
        seq: meta.get("applied_seq") ?? "0",
      };
    };
    const main = state("main");
    const lookup = state(LOOKUP);
    const sound = (s: typeof main) => s.has && s.schema === SCHEMA_VERSION && !s.bulk && s.build !== undefined;
    return sound(main) && sound(lookup) && main.build === lookup.build && main.seq === lookup.seq;
  }

  /** A new build of both files: its id and schema in both, the stream it follows, nothing applied. */
  private writeIdentity(streamIdentity: string | undefined): void {
    this.db.transaction(() => {
      const build = crypto.randomUUID();
      for (const table of ["main.meta", `${LOOKUP}.meta`]) {
        const set = this.db.query(`INSERT OR REPLACE INTO ${table}(k, v) VALUES (?, ?)`);
        set.run("schema", SCHEMA_VERSION);
        set.run("build", build);
        set.run("applied_seq", "0");
        if (streamIdentity !== undefined) set.run("stream", streamIdentity);
        // A bulk load goes on over the emptied files: they stay marked until it ends.
        if (this.bulk) set.run("bulk", "1");
      }
    })();
  }

  resultsVersion(): number | undefined {
    return this.bulk || this.building || this.worker !== undefined ? undefined : this.changes;
  }

  appliedSeq(): number {
    return Number(this.stmts.getMeta.get("applied_seq")?.v ?? 0);
  }

  streamIdentity(): string | undefined {
    // A failed lookup writer, or a commit that reached one file only, left the files apart: a new identity rebuilds both.
    if (this.worker?.failure !== undefined || this.diverged) return undefined;
    return this.stmts.getMeta.get("stream")?.v;
  }

  async reset(streamIdentity: string): Promise<void> {
    // The worker writes the lookup file: it stops (after what it was given) before the file is emptied.
    const restart = this.worker !== undefined;
    await this.stopWorker();
    this.db.transaction(() => {
      for (const table of ["records", "docs", "acl", "paths", "geo", "points", "meta"]) this.db.exec(`DELETE FROM main.${table}`);
      this.db.exec(`DELETE FROM ${LOOKUP}.vals; DELETE FROM ${LOOKUP}.meta; INSERT INTO ${LOOKUP}.fts(fts) VALUES('delete-all')`);
      this.writeIdentity(streamIdentity);
    })();
    this.changes++;
    this.diverged = false;
    if (this.loadingKeys) this.loadingKeys = new LoadingKeys();
    this.pathIds.clear();
    this.facts.clear();
    this.sortColumns.clear();
    this.termColumns.clear();
    this.points.clear();
    if (restart && this.bulk) await this.startWorker();
  }

  /**
   * Bulk loading (a rebuild or a long backlog): value indexes built once at the end, no fsync, a worker
   * writing the lookup file (docs/search.md#the-index-replica). Nothing may be applied until it settles.
   */
  async bulkLoad(on: boolean): Promise<void> {
    if (on === this.bulk || this.building) return;
    if (on) {
      // The markers are made durable before any unsynced write, and cleared only once everything written
      // since is on disk: files whose bulk load was cut short are rebuilt from the stream on open.
      this.db.exec(`PRAGMA main.synchronous = FULL; PRAGMA ${LOOKUP}.synchronous = FULL`);
      this.db.transaction(() => {
        this.stmts.setMeta.run("bulk", "1");
        this.stmts.setLookupMeta.run("bulk", "1");
      })();
      this.db.exec(
        `PRAGMA main.synchronous = OFF; PRAGMA ${LOOKUP}.synchronous = OFF; ${dropValueIndexes(`${LOOKUP}.`)} ${bulkTextOff(`${LOOKUP}.`)}`,
      );
      if (this.db.query("SELECT 1 FROM records LIMIT 1").get() === null) {
        this.db.exec(DROP_RECORD_KEY_INDEXES);
        this.loadingKeys = new LoadingKeys();
      }
      this.sortColumns.clear();
      this.termColumns.clear();
      this.bulk = true;
      this.changes++;
      await this.startWorker();
      return;
    }
    this.building = true;
    try {
      const lookupBuilt = this.finishLookup();
      // Heard even if the line below throws first (Bun exits on an unheard rejection); awaited below otherwise.
      lookupBuilt.catch(() => undefined);
      // Built on this thread while the worker builds the lookup file's indexes.
      this.restoreRecordKeyIndexes();
      // The documents file is complete: it is made durable while the worker builds the lookup file's
      // indexes. (Its marker cleared first is safe: the pair is sound only with both cleared.)
      this.db.exec("PRAGMA main.synchronous = FULL; PRAGMA main.wal_checkpoint(FULL);");
      this.stmts.setMeta.run("bulk", "0");
      await lookupBuilt;
    } finally {
      this.building = false;
    }
    if (this.closed) return;
    this.db.exec(`PRAGMA ${LOOKUP}.synchronous = FULL; PRAGMA ${LOOKUP}.wal_checkpoint(FULL);`);
    this.stmts.setLookupMeta.run("bulk", "0");
    this.db.exec(`PRAGMA main.synchronous = NORMAL; PRAGMA ${LOOKUP}.synchronous = NORMAL; PRAGMA analysis_limit = 1000; ANALYZE;`);
    this.bulk = false;
    this.changes++;
  }

  /**
   * The lookup file's writer for a bulk load: a worker on its own connection. An in-memory database
   * has no second connection, and a worker that cannot start leaves the writing to this thread, with
   * a warning: slower, but the index is built either way.
   */
  private async startWorker(): Promise<void> {
    if (this.options.file === ":memory:") return;
    const worker = await LookupWorker.start(
      this.options.indexBuilder ?? new URL("./index-builder.ts", import.meta.url),
      lookupFileOf(this.options.file),
      [...this.pathIds],
    );
    if (typeof worker === "string") {
      this.options.onWarning?.(
        `the lookup writer worker did not start (${worker}); writing the lookup file and building its indexes on the query thread`,
      );
      return;
    }
    if (this.closed) return worker.terminate();
    this.worker = worker;
  }

  private async stopWorker(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.stop();
  }

  /** The record indexes a bulk load into an empty replica left out, built now (a failure makes the index a rebuild). */
  private restoreRecordKeyIndexes(): void {
    if (!this.loadingKeys) return;
    this.loadingKeys = undefined;
    try {
      this.db.exec(RECORD_KEY_INDEXES);
    } catch (error) {
      this.diverged = true;
      throw error;
    }
  }

  /** The end of a bulk load: the worker writes what it was given, then builds the indexes; without one, this thread builds them. */
  private async finishLookup(): Promise<void> {
    const worker = this.worker;
    if (worker) {
      const outcome = await worker.finish(valueIndexes("") + bulkTextEnd(""));
      if (this.closed) return;
      this.worker = undefined;
      if (outcome.ok) return;
      // Every batch written, the index build failed: this thread builds them. A batch lost: rebuild.
      if (outcome.phase !== "finish") {
        this.worker = worker; // keeps its failure: streamIdentity() asks for the rebuild
        throw new Error(`the lookup writer failed: ${outcome.message}; the index is rebuilt from the stream`);
      }
      this.options.onWarning?.(`building the value indexes in the worker failed (${outcome.message}); building them on the query thread`);
    }
    this.db.exec(valueIndexes(`${LOOKUP}.`) + bulkTextEnd(`${LOOKUP}.`));
  }

  /**
   * While the lookup writer is more than LOOKUP_QUEUE_MAX batches behind: a promise that settles
   * when it has caught up to half that (the replica waits before reading more of the stream).
   */
  backpressure(): Promise<void> | undefined {
    return this.worker?.backpressure(LOOKUP_QUEUE_MAX);
  }

  /** The fields sorted from in-memory columns now (sort-columns.ts). */
  columnarSortFields(): string[] {
    return this.sortColumns.held();
  }

  /** Whether the value indexes are being built (see bulkLoad). */
  get indexing(): boolean {
    return this.building;
  }

  /** Whether a bulk load is under way, its value index build included: the files are not a finished build meanwhile. */
  get loading(): boolean {
    return this.bulk;
  }

  recordCount(): number {
    return this.db.query<{ n: number }, []>("SELECT count(*) AS n FROM records").get()!.n;
  }

  close(): void {
    // A load cut short leaves the bulk markers set: the files are rebuilt from the stream on open.
    this.closed = true;
    this.worker?.terminate();
    this.worker = undefined;
    this.db.close();
  }

  apply(changes: RecordChange[], seq: number, prepared?: PreparedParts): void {
    if (this.building) throw new Error("the value indexes are being built: apply once bulkLoad(false) has settled");
    const worker = this.worker;
    if (worker?.failure !== undefined) throw new Error(`the lookup writer failed: ${worker.failure}; the index is rebuilt from the stream`);
    // Written together, the two files agree on what was applied. A commit that reached the documents file
    // and failed in the lookup file (WAL commits attached files one by one) would otherwise be masked by
    // the next batch: the pair is rebuilt instead. (A worker's lookup file trails by design.)
    if (!worker && this.stmts.getLookupMeta.get("applied_seq")?.v !== this.stmts.getMeta.get("applied_seq")?.v) {
      this.diverged = true;
      throw new Error("the index files are out of step (a commit reached one of them only); the index is rebuilt from the stream");
    }
    // The lookup rows: made here from indexed documents, or given with prepared ones (parsed only when this thread writes them).
    const parts: LookupPart[] = prepared && !worker ? (JSON.parse(prepared.json) as LookupPart[]) : [];
    const table = new PathTable();
    const batch = (this.lookupBatch = emptyLookupBatch(seq, parts, prepared ? prepared.paths : table.paths));
    const newPaths: Array<[string, number]> = [];
    try {
      this.db.transaction(() => {
        for (const change of changes) {
          if (change.op === "delete") this.remove(change.partition, change.key);
          else if (change.op === "prepared") {
            if (!prepared) throw new TypeError("prepared changes come with their parts");
            this.upsert(change.record, change.part);
          } else {
            const { record, part } = prepareRecord(change.doc, SHAPE_SLOTS, table);
            parts.push(part);
            this.upsert(record, parts.length - 1);
          }
        }
        // Ids for the paths the batch uses (`paths` is in this file): the worker learns the new ones with it.
        const known = this.pathIds.size;
        for (const path of batch.paths) this.pathId(path, true);
        if (this.pathIds.size > known) for (const entry of [...this.pathIds].slice(known)) newPaths.push(entry);
        if (!worker) this.lookupWriter.write(batch);
        this.stmts.setMeta.run("applied_seq", String(seq));
      })();
    } catch (error) {
      this.loadFacts(); // rolled back: the in-memory facts follow the file again
      // The keys held may name rows rolled back: the key index takes over from here.
      this.restoreRecordKeyIndexes();
      throw error;
    } finally {
      this.changes++;
    }
    // Committed here first: a batch the worker then fails to write makes the whole index a rebuild.
    worker?.write(batch, newPaths, prepared?.json ?? JSON.stringify(parts));
  }

  private clear(rid: number, shapes: number): void {
    this.stmts.deleteAcl.run(rid);
    this.lookupBatch.rids.push(-rid);
    for (let i = 0; i < shapes; i++) {
      this.stmts.deleteGeo.run(rid * SHAPE_SLOTS + i);
      this.stmts.deletePoint.run(rid * SHAPE_SLOTS + i);
    }
    this.points.remove(rid);
  }

  /** The row of (partition, key), if the index holds that record. */
  private existing(partition: string, key: string): { rid: number; shapes: number } | undefined {
    const keys = this.loadingKeys;
    if (!keys) return this.stmts.ridOf.get(partition, key) ?? undefined;
    let shapes = 0;
    const rid = keys.find(partition, key, (candidate) => {
      const row = this.stmts.keyOfRid.get(candidate);
      shapes = row?.shapes ?? 0;
      return row?.partition === partition && row.key === key;
    });
    return rid === undefined ? undefined : { rid, shapes };
  }

  private remove(partition: string, key: string): void {
    const existing = this.existing(partition, key);
    if (!existing) return;
    this.loadingKeys?.remove(partition, key, existing.rid);
    this.clear(existing.rid, existing.shapes);
    this.stmts.deleteRecord.run(existing.rid);
    this.stmts.deleteDoc.run(existing.rid);
    this.facts.remove(existing.rid);
    this.sortColumns.remove(existing.rid);
    this.termColumns.remove(existing.rid);
  }

  private upsert(p: PreparedRecord, part: number): void {
    const existing = this.existing(p.partition, p.key);
    const shapes = p.shapes.length;
    let rid: number;
    if (existing) {
      rid = existing.rid;
      this.clear(rid, existing.shapes);
      this.stmts.updateRecord.run(p.id, p.kind, p.authority, shapes, p.acl, p.tokens, rid);
    } else {
      rid = Number(this.stmts.insertRecord.run(p.partition, p.key, p.id, p.kind, p.authority, shapes, p.acl, p.tokens).lastInsertRowid);
      this.loadingKeys?.add(p.partition, p.key, rid);
    }
    this.facts.set(rid, p.partition, p.kind, p.authority, p.acl, p.tokens);
    if (this.sortColumns.held().length > 0 || this.termColumns.held().length > 0) {
      // Parts given with prepared changes are not read here: the columns go, and load again on their next query.
      const own = this.lookupBatch.parts[part];
      const leaves = own ? leavesOf(own, this.lookupBatch.paths) : undefined;
      if (leaves) this.sortColumns.upsert(rid, leaves);
      else this.sortColumns.clear();
      if (leaves) this.termColumns.upsert(rid, leaves);
      else this.termColumns.clear();
    }
    this.stmts.upsertDoc.run(rid, p.json);
    for (let i = 0; i < p.groups.length; i++) this.stmts.insertAcl.run(rid, p.groups[i]!, p.owners[i] ? 1 : 0);
    this.lookupBatch.rids.push(rid);
    this.lookupBatch.partOf.push(part);
    for (let i = 0; i < shapes; i++) {
      const s = p.shapes[i]!;
      if (s.point) {
        this.stmts.insertPoint.run(rid * SHAPE_SLOTS + i, rid, s.path, s.point[0], s.point[1]);
        this.points.set(s.path, rid, s.point[0], s.point[1]);
      } else this.stmts.insertGeo.run(rid * SHAPE_SLOTS + i, s.bbox.minX, s.bbox.maxX, s.bbox.minY, s.bbox.maxY, rid, s.path, s.shape);
    }
  }

  // ---- queries --------------------------------------------------------------------------------

  /** Concrete field paths for a field name that may hold `*`. */
  private expandField(field: string): string[] {
    if (!field.includes("*")) return [field];
    // Only `*` is a wildcard in a field name: `?` and `\` stand for themselves.
    return [...this.pathIds.keys()].filter(compileGlob(field.replace(/[\\?]/g, "\\$&")));
  }

  /** The id of a field path in `vals`; -1 (matches no row) for a path the index has not seen, unless `add` gives it one. */
  pathId(path: string, add = false): number {
    let id = this.pathIds.get(path);
    if (id === undefined && add) this.pathIds.set(path, (id = Number(this.stmts.insertPath.run(path).lastInsertRowid)));
    return id ?? -1;
  }

  /** Ids of the seen paths that pass `keep`. */
  pathIdsWhere(keep: (path: string) => boolean): number[] {
    const out: number[] = [];
    for (const [path, id] of this.pathIds) if (keep(path)) out.push(id);
    return out;
  }

  search(request: SearchRequest): SearchResult {
    const tokens: number[] = [];
    try {
      return this.run(request, tokens);
    } finally {
      for (const t of tokens) this.nestedQueries.delete(t);
    }
  }

  private run(request: SearchRequest, nestedTokens: number[]): SearchResult {
    const params: SQLQueryBindings[] = [];
    // Numbered parameters: a value may appear more than once and in any order in the text.
    const p = (value: SQLQueryBindings) => (params.push(value), `?${params.length}`);
    const where: string[] = [`r.partition = ${p(request.partition)}`];

    const kindParts: string[] = [];
    for (const kind of request.kinds) {
      if (!kind.includes("*")) kindParts.push(`r.kind = ${p(kind)}`);
      else if (kind.split(":")[0] === "*")
        kindParts.push(`(r.kind GLOB ${p(escapeGlob(kind).replace(/\[\*\]/g, "*"))} AND r.authority <> 'system-meta-data')`);
      else kindParts.push(`r.kind GLOB ${p(escapeGlob(kind).replace(/\[\*\]/g, "*"))}`);
    }
    where.push(kindParts.length === 1 ? kindParts[0]! : `(${kindParts.join(" OR ")})`);

    if (!request.access.all) {
      if (request.access.groups.length === 0) return { hits: [], total: 0, aggregations: [] };
      where.push(
        `EXISTS (SELECT 1 FROM acl a WHERE a.rid = r.rid AND a.grp IN (${request.access.groups.map((g) => p(g)).join(", ")})${request.access.asOwner ? " AND a.owner = 1" : ""})`,
      );
    }

    const registerNested = (node: NestedNode) => {
      const token = this.nextNested++;
      this.nestedQueries.set(token, node);
      nestedTokens.push(token);
      return token;
    };
    // The driving set: the text matches when the query requires text, else the spatial hits. The
    // join order is forced (CROSS JOIN): the planner has no statistics to prefer it by itself.
    const probe = new Compiler(
      this,
      () => "?",
      () => 0,
    );
    const { driverText, rest } = splitDriver(request.query, (node) => probe.ftsOf(node));
    if (driverText === "") return { hits: [], total: 0, aggregations: [] };
    const single = driverText === undefined ? undefined : /^body : \("([^"*]+)"\)$/.exec(driverText)?.[1];
    // An aggregation counted in memory (term-columns.ts) leaves the relevance paths open to the query.
    const terms = request.aggregateBy ? this.termColumn(request) : undefined;
    const relevance = !request.spatial && request.sort.length === 0 && !request.keyset && (!request.aggregateBy || terms !== undefined);
    if (single !== undefined && relevance) return this.rankedTerm(request, single, rest, registerNested, terms);
    if (driverText !== undefined && relevance && !this.options.sqlOnly)
      return this.rankedText(request, driverText, rest, registerNested, terms);
    let from = "records r";
    if (driverText !== undefined)
      from = `(SELECT rowid AS rid, rank AS score FROM fts WHERE fts MATCH ${p(driverText)}) d CROSS JOIN records r ON r.rid = d.rid`;
    // The exact spatial hits, once: both the SQL path and the in-memory one below start from them.
    const spatialHits = request.spatial ? this.spatialRids(request) : [];
    if (request.spatial) {
      const rids = spatialHits;
      if (rids.length === 0) return { hits: [], total: 0, aggregations: [] };
      const list = `(SELECT value AS rid FROM json_each(${p(JSON.stringify(rids))}))`;
      if (driverText === undefined) from = `${list} d CROSS JOIN records r ON r.rid = d.rid`;
      else where.push(`r.rid IN ${list}`);
    }
    const compiler = new Compiler(this, p, registerNested, from !== "records r");
    const condition = compiler.compile(rest);
    if (condition !== "1") where.push(condition);

    const whereSql = where.join(" AND ");
    const baseParams = [...params];
    const aggregationsOf = (rids: () => ArrayLike<number>): Aggregation[] =>
      terms
        ? countTerms(terms, rids(), AGGREGATION_SIZE)
        : request.aggregateBy
          ? this.aggregate(request.aggregateBy, request.aggregateElements ?? false, from, whereSql, baseParams)
          : [];
    // No predicate beyond partition, kind and ACL: the matches are the visible records, listed from the facts in row order.
    const everyVisible = driverText === undefined && !request.spatial && condition === "1" && !this.options.sqlOnly;
    const sqlRows = () =>
      (
        this.db.query<[number], SQLQueryBindings[]>(`SELECT r.rid FROM ${from} WHERE ${whereSql}`).values(...baseParams) as Array<[number]>
      ).map((row) => row[0]);

    // Spatial hits in index order: one pass gives the count and the page. Without other predicates
    // the partition, kind and ACL checks are the in-memory facts (no SQL per hit).
    if (request.spatial && driverText === undefined && request.sort.length === 0 && !request.keyset) {
      // spatialRids kept the visible records only: with no other predicate they are the matches. Sorted as a typed
      // array (no comparator call per pair): ~3,300 hits of a 1° box at 1M records.
      const rids = Int32Array.from(condition === "1" ? spatialHits : sqlRows()).sort();
      return {
        hits: this.page(Array.from(rids.subarray(request.offset, request.offset + request.limit))),
        total: request.skipCount ? 0 : request.trackTotalCount ? rids.length : Math.min(rids.length, TOTAL_CAP),
        aggregations: aggregationsOf(() => rids),
      };
    }

    // Sorted by numbers or dates: the matches' values come from memory (sort-columns.ts).
    const columns = request.sort.length > 0 ? this.numericColumns(request) : undefined;
    if (columns) {
      const visible = this.facts.visibility(request.partition, request.kinds, request.access);
      // Matches known by a test per record, without listing them: every visible record, or a field's words read from its term column.
      const words = driverText !== undefined && !request.spatial && rest.type === "matchAll" ? this.fieldWords(request.query) : undefined;
      const member = everyVisible ? visible : words ? (rid: number) => words(rid) && visible(rid) : undefined;
      const idsOf = (list: number[]) => {
        const ids = new Map<number, string>();
        for (const [rid, id] of this.stmts.idsOf.values(JSON.stringify(list)) as Array<[number, string]>) ids.set(rid, id);
        return ids;
      };
      const window = { offset: request.offset, limit: request.limit, after: request.keyset?.after };
      const k = request.offset + request.limit;
      const walkable = request.sort.length === 1 && !request.keyset?.after && k > 0;
      if (member && walkable && !request.aggregateBy) {
        // The page from the sort order's first matches; the count stops where the answer does (TOTAL_CAP).
        const candidates = orderedCandidates(columns[0]!, request.sort[0]!, member, k);
        if (candidates) {
          const cap = request.trackTotalCount ? Number.POSITIVE_INFINITY : TOTAL_CAP;
          const total = request.skipCount ? 0 : this.facts.visibleRows(member, cap).length;
          return this.sortedHits(sortedPage(candidates, request.sort, columns, window, idsOf), total, []);
        }
      }
      // Text-driven without a spatial filter: the text's rows, partition, kind and ACL checked in
      // memory (as one-word relevance queries do), any other predicate in SQL on the survivors.
      const rids = member
        ? this.facts.visibleRows(member)
        : driverText !== undefined && !request.spatial
          ? this.visibleOf(
              request,
              (this.stmts.ftsRows.values(driverText) as Array<[number]>).map((row) => row[0]),
              rest,
              registerNested,
            )
          : sqlRows();
      const total = request.skipCount ? 0 : request.trackTotalCount ? rids.length : Math.min(rids.length, TOTAL_CAP);
      const aggregations = aggregationsOf(() => rids);
      if (request.limit === 0) return { hits: [], total, aggregations };
      // Many matches: the sort order's walk meets k of them long before a heap would have seen them all.
      let candidates: number[] | undefined;
      if (walkable && rids.length * rids.length > 4 * k * this.facts.rows) {
        let top = 0;
        for (const rid of rids) top = Math.max(top, rid);
        const mark = new Uint8Array(top + 1);
        for (const rid of rids) mark[rid] = 1;
        candidates = orderedCandidates(columns[0]!, request.sort[0]!, (rid) => mark[rid] === 1, k);
      }
      return this.sortedHits(sortedPage(candidates ?? rids, request.sort, columns, window, idsOf), total, aggregations);
    }

    // In row order, as the SQL below orders them; without an aggregation counted here, the scan stops once count and page are known.
    if (everyVisible && request.sort.length === 0 && !request.keyset) {
      const stopAt = terms || request.trackTotalCount ? Number.POSITIVE_INFINITY : Math.max(TOTAL_CAP, request.offset + request.limit);
      const rids = this.facts.visibleAll(request.partition, request.kinds, request.access, stopAt);
      return {
        hits: this.page(Array.from(rids.subarray(request.offset, request.offset + request.limit))),
        total: request.skipCount ? 0 : request.trackTotalCount ? rids.length : Math.min(rids.length, TOTAL_CAP),
        aggregations: aggregationsOf(() => rids),
      };
    }

    // Count and aggregation see exactly the rows the results come from.
    let total = 0;
    if (!request.skipCount) {
      const cap = request.trackTotalCount ? -1 : TOTAL_CAP;
      total = this.db
        .query<{ n: number }, SQLQueryBindings[]>(`SELECT count(*) AS n FROM (SELECT 1 FROM ${from} WHERE ${whereSql} LIMIT ${cap})`)
        .get(...baseParams)!.n;
    }
    const aggregations = aggregationsOf(sqlRows);
    if (request.limit === 0) return { hits: [], total, aggregations };

    // Ordering: explicit sort keys, then the id (cursors) or insertion order.
    const selectKeys: string[] = [];
    const orderBy: string[] = [];
    request.sort.forEach((key, i) => {
      const agg = (key.mode ?? (key.order === "asc" ? "min" : "max")) === "min" ? "min" : "max";
      const path = key.field.replace(/\.keyword$/, "");
      selectKeys.push(
        `(SELECT ${agg}(coalesce(v.num, v.str)) FROM vals v WHERE v.rid = r.rid AND v.path = ${p(this.pathId(path))} AND v.t NOT IN (${LeafType.null}, ${LeafType.geometry})) AS s${i}`,
      );
      orderBy.push(`s${i} IS NULL`, `s${i} ${key.order === "asc" ? "ASC" : "DESC"}`);
    });
    const stable = request.keyset !== undefined || request.sort.length > 0;
    // OSDU's default order is relevance: FTS5's BM25 rank of the text the query requires.
    const ranked = !stable && driverText !== undefined;
    if (ranked) orderBy.push("score ASC");
    orderBy.push(stable ? "id ASC" : "rid ASC");

    const outer: string[] = [];
    if (request.keyset?.after) outer.push(this.keysetCondition(request, request.keyset.after, p));
    const sql =
      `SELECT rid, id${request.sort.map((_, i) => `, s${i}`).join("")} FROM (SELECT r.rid AS rid, r.id AS id${ranked ? ", d.score AS score" : ""}${selectKeys.length ? `, ${selectKeys.join(", ")}` : ""} FROM ${from} WHERE ${whereSql})` +
      `${outer.length ? ` WHERE ${outer.join(" AND ")}` : ""} ORDER BY ${orderBy.join(", ")} LIMIT ${p(request.limit)} OFFSET ${p(request.offset)}`;
    const rows = this.db.query<Record<string, SortValue> & { rid: number; id: string }, SQLQueryBindings[]>(sql).all(...params);
    // Documents are read for the page only: carrying them through the sort would read every match's JSON.
    const docs = this.documents(rows.map((r) => r.rid));
    const hits = rows.map((row) =>
      storedHit(docs.get(row.rid)!, [...request.sort.map((_, i) => (row[`s${i}`] ?? null) as SortValue), row.id]),
    );
    return { hits, total, aggregations };
  }

  /** A sorted page's documents with their positions. */
  private sortedHits(page: SortedPage, total: number, aggregations: Aggregation[]): SearchResult {
    const docs = this.documents(page.rids);
    return { hits: page.rids.map((rid, i) => storedHit(docs.get(rid)!, page.positions[i]!)), total, aggregations };
  }

  /** A field's words (`data.Basin:"North Sea"`) tested per record on its term column where that equals FTS5 (matchWords): a sort then walks its order without FTS5. */
  private fieldWords(node: QueryNode): ((rid: number) => boolean) | undefined {
    if (this.bulk || this.options.sqlOnly || node.type !== "term" || !node.field) return undefined;
    if (node.kind !== "word" && !(node.kind === "phrase" && node.slop === undefined)) return undefined;
    if (Compiler.keywordOf(node.field) || Object.keys(typedTerm(node)).length > 0) return undefined;
    const path = node.field;
    const paths = this.fieldsMatching(path);
    if (paths.length !== 1 || paths[0] !== path) return undefined;
    // FTS5 tells fields apart by their prefix only: another path with the same one shares the field's words there.
    const prefix = fieldPrefix(path);
    for (const other of this.pathIds.keys()) if (other !== path && fieldPrefix(other) === prefix) return undefined;
    const column = this.termColumns.columnFor(path, (p) => this.termSource(p));
    return column ? matchWords(column, tokenize(node.value)) : undefined;
  }

  /** The documents of a page of rows (unsorted queries: the position is the id). */
  private page(rids: number[]): SearchResult["hits"] {
    const docs = this.documents(rids);
    return rids.map((rid) => storedHit(docs.get(rid)!));
  }

  /** The stored documents (JSON) of a page's rows, in one read. */
  private documents(rids: number[]): Map<number, string> {
    const docs = new Map<number, string>();
    if (rids.length)
      for (const [rid, json] of this.stmts.docsOf.values(JSON.stringify(rids)) as Array<[number, string]>) docs.set(rid, json);
    return docs;
  }

  /**
   * A query whose required text is one word, ranked by relevance: BM25 computed here from the word's
   * instances (one fts5vocab read), not FTS5's rank, which looks up every match's length (docs/search.md#the-index-replica).
   */
  private rankedTerm(
    request: SearchRequest,
    term: string,
    rest: QueryNode,
    registerNested: (node: NestedNode) => number,
    terms: TermColumn | undefined,
  ): SearchResult {
    const word = wordRows(this.stmts.bodyInstances.get(term)?.list ?? null);
    const { rids, frequencies } = word;
    // Partition, kind and ACL from the in-memory facts; any other clause in one SQL statement on the rows left.
    let allowed = this.facts.visibility(request.partition, request.kinds, request.access);
    if (rest.type !== "matchAll") {
      const satisfied = new Set(this.visibleOf(request, Array.from(rids.subarray(0, word.count)), rest, registerNested));
      allowed = (rid) => satisfied.has(rid);
    }
    const weight = idf(this.facts.rows, word.count);
    const average = this.facts.totalTokens / this.facts.rows;
    const kept = new Int32Array(word.count);
    const scores = new Float64Array(word.count);
    let visible = 0;
    for (let i = 0; i < word.count; i++) {
      const rid = rids[i]!;
      if (!allowed(rid)) continue;
      kept[visible] = rid;
      scores[visible++] = bm25(frequencies[i]!, weight, this.facts.tokens(rid), average);
    }
    const total = request.skipCount ? 0 : request.trackTotalCount ? visible : Math.min(visible, TOTAL_CAP);
    const aggregations = terms ? countTerms(terms, kept.subarray(0, visible), AGGREGATION_SIZE) : [];
    if (request.limit === 0) return { hits: [], total, aggregations };
    const best = bestFirst(scores, kept, visible, request.offset + request.limit);
    return { hits: this.page(best.slice(request.offset).map((position) => kept[position]!)), total, aggregations };
  }

  /**
   * A relevance query whose required text is more than one word: FTS5 ranks its rows, partition, kind and
   * ACL are checked in memory, the rest in SQL on the survivors (docs/search.md#the-index-replica).
   */
  private rankedText(
    request: SearchRequest,
    driverText: string,
    rest: QueryNode,
    registerNested: (node: NestedNode) => number,
    terms: TermColumn | undefined,
  ): SearchResult {
    const ranked = this.stmts.ftsRanked.values(driverText) as Array<[number, number]>;
    const score = new Map<number, number>();
    for (const [rid, rank] of ranked) score.set(rid, rank);
    const rids = this.visibleOf(request, [...score.keys()], rest, registerNested);
    const total = request.skipCount ? 0 : request.trackTotalCount ? rids.length : Math.min(rids.length, TOTAL_CAP);
    const aggregations = terms ? countTerms(terms, rids, AGGREGATION_SIZE) : [];
    if (request.limit === 0) return { hits: [], total, aggregations };
    rids.sort((x, y) => score.get(x)! - score.get(y)! || x - y);
    return { hits: this.page(rids.slice(request.offset, request.offset + request.limit)), total, aggregations };
  }

  /**
   * The rows of `rids` the caller may see — partition, kind and ACL from the in-memory
   * facts — that also satisfy `rest`, checked in one SQL statement on the survivors.
   */
  private visibleOf(request: SearchRequest, rids: number[], rest: QueryNode, registerNested: (node: NestedNode) => number): number[] {
    const visible = this.facts.visibility(request.partition, request.kinds, request.access);
    const keep = rids.filter(visible);
    if (rest.type === "matchAll" || keep.length === 0) return keep;
    const split = this.rangesInMemory(rest);
    if (!split) return this.satisfying(keep, rest, registerNested);
    // Ranges from the columns first; a record whose extremes straddle a range keeps the full check in SQL.
    const passed: number[] = [];
    const undecided: number[] = [];
    for (const rid of keep) {
      let verdict = PASS;
      for (const { column, range } of split.ranges) {
        const v = range ? rangeVerdict(column, rid, range) : FAIL;
        if (v === FAIL) {
          verdict = FAIL;
          break;
        }
        if (v === UNDECIDED) verdict = UNDECIDED;
      }
      if (verdict === PASS) passed.push(rid);
      else if (verdict === UNDECIDED) undecided.push(rid);
    }
    const survivors = this.satisfying(passed, split.rest, registerNested);
    if (undecided.length === 0) return survivors;
    const out = new Set([...survivors, ...this.satisfying(undecided, rest, registerNested)]);
    return keep.filter((rid) => out.has(rid));
  }

  /** The rows of `rids` that satisfy `node`, in one SQL statement. */
  private satisfying(rids: number[], node: QueryNode, registerNested: (node: NestedNode) => number): number[] {
    if (node.type === "matchAll" || rids.length === 0) return rids;
    const params: SQLQueryBindings[] = [];
    const p = (value: SQLQueryBindings) => (params.push(value), `?${params.length}`);
    const list = p(JSON.stringify(rids));
    const condition = new Compiler(this, p, registerNested, true).compile(node);
    // The compiled predicates only need r.rid: the candidate list stands in for records (no lookup per row).
    const sql = `SELECT r.rid FROM (SELECT value AS rid FROM json_each(${list})) r WHERE ${condition}`;
    return (this.db.query<[number], SQLQueryBindings[]>(sql).values(...params) as Array<[number]>).map((row) => row[0]);
  }

  /**
   * Terms of one field over exactly the rows a query sees: count desc, key asc, at most 1000; keys by value (15 before
   * 120) when every term is a number or a date, else by bytes, as ES orders a field's terms by its type. A bucket counts
   * records, or with `elements` (`nested(…)`) values, one per array element, as ES counts nested documents.
   */
  private aggregate(field: string, elements: boolean, from: string, whereSql: string, baseParams: SQLQueryBindings[]): Aggregation[] {
    const path = field.replace(/\.keyword$/, "");
    return this.db
      .query<{ key: string; count: number }, SQLQueryBindings[]>(
        `WITH terms AS MATERIALIZED (SELECT v.str AS key, ${elements ? "count(*)" : "count(DISTINCT v.rid)"} AS count, min(v.num) AS num FROM vals v WHERE v.path = ?${baseParams.length + 1} AND v.str IS NOT NULL AND v.t NOT IN (${LeafType.null}, ${LeafType.geometry}) AND v.rid IN (SELECT r.rid FROM ${from} WHERE ${whereSql}) GROUP BY v.str)` +
          ` SELECT key, count FROM terms ORDER BY count DESC, CASE WHEN NOT EXISTS (SELECT 1 FROM terms WHERE num IS NULL) THEN num END ASC, key ASC LIMIT ${AGGREGATION_SIZE}`,
      )
      .all(...baseParams, this.pathId(path));
  }

  /** The in-memory column of the aggregation's field, when its buckets can be counted here (records, not nested elements). */
  private termColumn(request: SearchRequest): TermColumn | undefined {
    if (!request.aggregateBy || request.aggregateElements || this.bulk || this.options.sqlOnly) return undefined;
    return this.termColumns.columnFor(request.aggregateBy.replace(/\.keyword$/, ""), (path) => this.termSource(path));
  }

  /** A path's exact values with their numbers, for its term column: the rows SQL's aggregation counts. */
  private termSource(path: string): TermSource {
    const id = this.pathId(path);
    // A row at a time: an array of the whole result outlives the load into the old generation, and is
    // collected in the tails of later queries (docs/search.md#in-memory-facts-and-sort-columns).
    const rows = this.db
      .query<{ rid: number; str: string; num: number | null; t: number }, [number]>(
        `SELECT rid, str, num, t FROM vals INDEXED BY vals_str WHERE path = ? AND str IS NOT NULL AND t NOT IN (${LeafType.null}, ${LeafType.geometry})`,
      )
      .iterate(id);
    const values = (function* () {
      for (const r of rows) yield [r.rid, r.str, r.num, r.t] as [number, string, number | null, number];
    })();
    const long = this.db
      .query<[number], [number]>(
        `SELECT 1 FROM vals INDEXED BY vals_str WHERE path = ? AND str IS NULL AND t NOT IN (${LeafType.null}, ${LeafType.geometry}) LIMIT 1`,
      )
      .values(id);
    return { values, incomplete: long.length > 0 };
  }

  /**
   * The in-memory columns of the request's sort fields, when every one holds only numbers and dates;
   * undefined sends the query down the SQL path (strings, mixed values, or during a bulk load, when
   * the value index a column loads from is not there).
   */
  private numericColumns(request: SearchRequest): NumericColumn[] | undefined {
    if (this.bulk || this.options.sqlOnly) return undefined;
    return this.sortColumns.columnsFor(
      request.sort.map((key) => key.field.replace(/\.keyword$/, "")),
      (path) => this.columnSource(path),
    );
  }

  /** A path's numbers and dates for its in-memory column, or that it holds other values too. */
  private columnSource(path: string): ColumnSource {
    // Numbers and dates are the values with a `num` (their `str` is set too); any other value with a `str` is a string or a boolean.
    const id = this.pathId(path);
    const count = (sql: string) => this.db.query<{ n: number }, [number]>(sql).get(id)!.n;
    const numbers = count("SELECT count(*) AS n FROM vals INDEXED BY vals_num WHERE path = ? AND num IS NOT NULL");
    const withText = count("SELECT count(*) AS n FROM vals INDEXED BY vals_str WHERE path = ? AND str IS NOT NULL");
    if (withText > numbers) return { numbers: [], hasOtherValues: true };
    // A row at a time, as termSource reads.
    const rows = this.db
      .query<{ rid: number; num: number; t: number }, [number]>(
        "SELECT rid, num, t FROM vals INDEXED BY vals_num WHERE path = ? AND num IS NOT NULL",
      )
      .iterate(id);
    const values = (function* () {
      for (const r of rows) yield [r.rid, r.num, r.t === LeafType.date] as [number, number, boolean];
    })();
    return { numbers: values, hasOtherValues: false };
  }

  /**
   * The number and date ranges among `rest`'s required clauses that the in-memory columns can check
   * (a field of numbers only or of dates only), and what is left of `rest` without them.
   */
  private rangesInMemory(
    rest: QueryNode,
  ): { ranges: Array<{ column: NumericColumn; range: NumericRange | null }>; rest: QueryNode } | undefined {
    if (this.bulk || this.options.sqlOnly) return undefined;
    const clauses = rest.type === "range" ? [rest] : rest.type === "bool" ? rest.must : [];
    const ranges: Array<{ column: NumericColumn; range: NumericRange | null }> = [];
    const others: QueryNode[] = [];
    for (const clause of clauses) {
      const onColumn = clause.type === "range" ? this.rangeOnColumn(clause) : undefined;
      if (onColumn) ranges.push(onColumn);
      else others.push(clause);
    }
    if (ranges.length === 0) return undefined;
    if (rest.type !== "bool") return { ranges, rest: matchAll };
    if (others.length === 0 && rest.should.length === 0 && rest.mustNot.length === 0) return { ranges, rest: matchAll };
    // With a `must` left, `should` stays optional as it was (Lucene: with no must, one should is required).
    return { ranges, rest: { ...rest, must: others.length ? others : [matchAll] } };
  }

  /** A range checked on the field's column: its bounds read as the column's kind (null: nothing can match). */
  private rangeOnColumn(node: RangeNode): { column: NumericColumn; range: NumericRange | null } | undefined {
    if (!node.field || node.field.includes("*") || Compiler.keywordOf(node.field)) return undefined;
    if (node.lower === undefined && node.upper === undefined) return undefined;
    const paths = this.fieldsMatching(node.field);
    if (paths.length !== 1 || paths[0] !== node.field) return undefined;
    const { numbers, dates } = typedBounds(node);
    if (!numbers && !dates) return undefined; // a string range
    const column = this.sortColumns.columnForRange(node.field, (path) => this.columnSource(path));
    const kinds = column?.kinds ?? NUMBERS | DATES;
    // Numbers and dates in one field: SQL reads each value with its type.
    if (!column || kinds === (NUMBERS | DATES)) return undefined;
    const bounds = kinds === NUMBERS ? numbers : kinds === DATES ? dates : undefined;
    return { column, range: bounds ? { ...bounds, includeLower: node.includeLower, includeUpper: node.includeUpper } : null };
  }

  /** Rows strictly after `after` in (sort keys with missing last, id) order. */
  private keysetCondition(request: SearchRequest, after: SortValue[], p: (v: SQLQueryBindings) => string): string {
    const ors: string[] = [];
    const equal: string[] = [];
    request.sort.forEach((key, i) => {
      const last = after[i] ?? null;
      const col = `s${i}`;
      if (last === null) {
        // Among missing values nothing sorts after another: only the next key decides.
        equal.push(`${col} IS NULL`);
        return;
      }
      const greater = key.order === "asc" ? ">" : "<";
      ors.push(`(${[...equal, `(${col} IS NULL OR ${col} ${greater} ${p(last)})`].join(" AND ")})`);
      equal.push(`${col} = ${p(last)}`);
    });
    ors.push(`(${[...equal, `id > ${p(after[after.length - 1] as string)}`].join(" AND ")})`);
    return `(${ors.join(" OR ")})`;
  }

  /**
   * Records whose geometry at the filter's field passes the exact test. Only candidates in the
   * request's partition and kinds that the caller may see are tested (the facts in memory), the
   * query geometry is prepared once, and the work is bounded by SPATIAL_WORK_MAX.
   */
  private spatialRids(request: SearchRequest): number[] {
    const filter = request.spatial!;
    const box: BBox =
      filter.relation === "within"
        ? areaBBox(filter.area)
        : filter.polygons.flat(2).reduce<BBox>(
            (b, [x, y]) => ({
              minX: Math.min(b.minX, x),
              maxX: Math.max(b.maxX, x),
              minY: Math.min(b.minY, y),
              maxY: Math.max(b.maxY, y),
            }),
            { minX: Infinity, maxX: -Infinity, minY: Infinity, maxY: -Infinity },
          );
    const visible = this.facts.visibility(request.partition, request.kinds, request.access);
    const prepared = filter.relation === "within" ? prepareArea(filter.area) : undefined;
    const polygons = filter.relation === "intersects" ? filter.polygons.map(preparePolygon) : [];
    let work = 0;
    const spend = (units: number) => {
      work += units;
      if (work > SPATIAL_WORK_MAX) throw spatialTooCostly();
    };
    const test = (shape: Shape) => (prepared ? withinPrepared(shape, prepared, spend) : intersectsPrepared(shape, polygons, spend));
    // WITHIN: the shape's box must lie inside the area's box; INTERSECTS: the boxes must overlap.
    // The R*Tree keeps 32-bit floats rounded outward: the prefilter box is widened, the exact test decides.
    const rtree =
      filter.relation === "within"
        ? "g.minX >= ? AND g.maxX <= ? AND g.minY >= ? AND g.maxY <= ?"
        : "g.maxX >= ? AND g.minX <= ? AND g.maxY >= ? AND g.minY <= ?";
    const slack = 1e-3;
    const rows = this.db
      .query<{ rid: number; shape: string }, SQLQueryBindings[]>(
        `SELECT g.rid AS rid, g.shape AS shape FROM geo g WHERE ${rtree} AND g.path = ?`,
      )
      .all(box.minX - slack, box.maxX + slack, box.minY - slack, box.maxY + slack, filter.field);
    const out: number[] = [];
    const lone: Shape = { points: [[0, 0]], lines: [], polygons: [] };
    const area = filter.relation === "within" && filter.area.type === "box" ? filter.area.box : undefined;
    this.points.inBox(filter.field, box.minX - slack, box.maxX + slack, box.minY - slack, box.maxY + slack, (rid, x, y) => {
      if (!visible(rid)) return;
      // A point is within a box exactly when it lies inside it, edges included (what within() checks).
      if (area) {
        if (x >= area.minX && x <= area.maxX && y >= area.minY && y <= area.maxY) out.push(rid);
        return;
      }
      spend(1);
      lone.points[0] = [x, y];
      if (test(lone)) out.push(rid);
    });
    for (const row of rows) {
      if (!visible(row.rid)) continue;
      spend(1);
      if (test(JSON.parse(row.shape) as Shape)) out.push(row.rid);
    }
    return out;
  }

  /** Paths the index has seen (wildcard field names expand against them). */
  fieldsMatching(field: string): string[] {
    return this.expandField(field);
  }
}

/**
 * A hit whose document is parsed only when read: a reply of whole documents writes the stored JSON as it is. Without a
 * position, it is the document's id (an unsorted page's), read from the document when asked for.
 */
function storedHit(json: string, position?: SortValue[]): SearchHit {
  let doc: Record<string, unknown> | undefined;
  return {
    json,
    get doc() {
      return (doc ??= JSON.parse(json) as Record<string, unknown>);
    },
    get position() {
      return (position ??= [this.doc.id as string]);
    },
  };
}

/**
 * Splits off the part of the query that FTS5 answers alone and every match must satisfy: the whole
 * query, or one required clause of a top-level boolean. The rest keeps the query's meaning: once a
 * required clause existed, optional clauses never decided a match, so they are dropped with it.
 */
export function splitDriver(query: QueryNode, ftsOf: (node: QueryNode) => string | undefined): { driverText?: string; rest: QueryNode } {
  const whole = ftsOf(query);
  if (whole !== undefined) return { driverText: whole, rest: { type: "matchAll" } };
  if (query.type !== "bool" || query.must.length === 0) return { rest: query };
  const index = query.must.findIndex((m) => ftsOf(m) !== undefined);
  if (index < 0) return { rest: query };
  const must = query.must.filter((_, i) => i !== index);
  return {
    driverText: ftsOf(query.must[index]!),
    rest: { type: "bool", must, should: must.length ? query.should : [], mustNot: query.mustNot },
  };
}

/** AST → SQL boolean expression over `r` (records), with FTS5 MATCH where text allows it. */
class Compiler {
  constructor(
    private readonly backend: SqliteBackend,
    private readonly p: (value: SQLQueryBindings) => string,
    private readonly registerNested: (node: NestedNode) => number,
    /**
     * True when another set drives the query (FTS matches, spatial hits): leaf predicates are then
     * checked per candidate row through the primary key instead of building their whole row set.
     */
    private readonly correlated = false,
  ) {}

  /** The FTS5 expression of a node when it is pure analyzed text (see fts()). */
  ftsOf(node: QueryNode): string | undefined {
    return this.fts(node);
  }

  compile(node: QueryNode): string {
    const fts = this.fts(node);
    if (fts !== undefined) return fts === "" ? "0" : `r.rid IN (SELECT rowid FROM fts WHERE fts MATCH ${this.p(fts)})`;
    switch (node.type) {
      case "matchAll":
        return "1";
      case "bool": {
        const parts: string[] = [];
        for (const m of node.must) parts.push(this.compile(m));
        if (node.must.length === 0 && node.should.length > 0) parts.push(`(${node.should.map((s) => this.compile(s)).join(" OR ")})`);
        for (const n of node.mustNot) parts.push(`NOT (${this.compile(n)})`);
        return parts.length ? `(${parts.join(" AND ")})` : "1";
      }
      case "term":
        // Plain word terms were answered by FTS above: a field term here is typed, keyword or wildcard.
        return node.field && !Compiler.keywordOf(node.field) && node.kind !== "wildcard" ? this.fieldTerm(node) : this.exactTerm(node);
      case "range":
        return this.range(node);
      case "exists":
        return this.exists(node.field);
      case "nested":
        // The record-level prefilter must let through every record with a matching element: only the
        // inner query's positive clauses can (a NOT speaks of one element, not of the record).
        return `(${this.compile(positivePart(node.query))} AND derrick_nested((SELECT doc FROM docs WHERE rid = r.rid), ${this.p(this.registerNested(node))}))`;
    }
  }

  static keywordOf(field: string): { path: string; exact: "case" | "lower" } | undefined {
    if (field.endsWith(".keywordLower")) return { path: field.slice(0, -".keywordLower".length), exact: "lower" };
    if (field.endsWith(".keyword")) return { path: field.slice(0, -".keyword".length), exact: "case" };
    if (KEYWORD_FIELDS.has(field) || field.startsWith("legal.") || field.startsWith("acl.")) return { path: field, exact: "case" };
    return undefined;
  }

  /**
   * An FTS5 expression for the node, when it is pure analyzed text: undefined when not, "" when it
   * can never match (a term without tokens, a field name that matches no field).
   */
  private fts(node: QueryNode): string | undefined {
    switch (node.type) {
      case "term": {
        if (node.kind === "wildcard") return undefined;
        if (node.field && Compiler.keywordOf(node.field)) return undefined;
        // A field term that reads as a number or a date also matches typed values (typedTerm()).
        if (node.field && Object.keys(typedTerm(node)).length > 0) return undefined;
        return this.words(node);
      }
      case "bool": {
        const must = node.must.map((n) => this.fts(n));
        const should = node.must.length === 0 ? node.should.map((n) => this.fts(n)) : [];
        const mustNot = node.mustNot.map((n) => this.fts(n));
        if ([...must, ...should, ...mustNot].some((x) => x === undefined)) return undefined;
        let positive: string | undefined;
        if (must.length) {
          if (must.includes("")) return "";
          positive = must.map((m) => `(${m})`).join(" AND ");
        } else if (should.length) {
          const live = should.filter((s) => s !== "");
          if (live.length === 0) return "";
          positive = live.map((s) => `(${s})`).join(" OR ");
        }
        if (positive === undefined) return undefined; // only negations: SQL handles "everything except"
        const negative = (mustNot as string[]).filter((n) => n !== "");
        return negative.length ? `(${positive}) NOT (${negative.map((n) => `(${n})`).join(" OR ")})` : positive;
      }
      default:
        return undefined;
    }
  }

  /** The FTS5 expression of a term's words: free text, or the field's words ("" when nothing can match). */
  private words(node: TermNode): string {
    const words = tokenize(node.value);
    if (words.length === 0) return "";
    const phrase = (prefix: string) => {
      const quoted = words.map((w) => `"${prefix}${w}"`);
      if (node.kind === "phrase" && node.slop !== undefined && words.length > 1)
        return `NEAR(${quoted.join(" ")}, ${Math.floor(node.slop)})`;
      return `${quoted.join(" + ")}${node.kind === "prefix" ? " *" : ""}`;
    };
    if (!node.field) return `body : (${phrase("")})`;
    const paths = this.backend.fieldsMatching(node.field);
    if (paths.length === 0) return "";
    const alternatives = paths.map((path) => `fielded : (${phrase(fieldPrefix(path))})`);
    return alternatives.length === 1 ? alternatives[0]! : `(${alternatives.join(" OR ")})`;
  }

  /** A field term on an analyzed field: the words of its string values, or (typedTerm) an equal number or a date within it. */
  private fieldTerm(node: TermNode): string {
    const typed = typedTerm(node);
    const paths = this.backend.fieldsMatching(node.field!);
    const typedValues = () => {
      const branches: string[] = [];
      if (typed.number !== undefined) branches.push(`t = ${LeafType.number} AND num = ${this.p(typed.number)}`);
      if (typed.dates) branches.push(this.within(LeafType.date, typed.dates, true, true));
      return branches.length === 1 ? branches[0]! : `((${branches.join(") OR (")}))`;
    };
    const parts = typed.number !== undefined || typed.dates ? [this.inVals(paths, typedValues)] : [];
    const text = this.words(node);
    if (text) parts.push(`r.rid IN (SELECT rowid FROM fts WHERE fts MATCH ${this.p(text)})`);
    return parts.length === 0 ? "0" : parts.length === 1 ? parts[0]! : `(${parts.join(" OR ")})`;
  }

  /** Values of one type within bounds. */
  private within(t: LeafType, bounds: Bounds, includeLower: boolean, includeUpper: boolean): string {
    const out = [`t = ${t}`];
    if (bounds.lower !== undefined) out.push(`num ${includeLower ? ">=" : ">"} ${this.p(bounds.lower)}`);
    if (bounds.upper !== undefined) out.push(`num ${includeUpper ? "<=" : "<"} ${this.p(bounds.upper)}`);
    return out.join(" AND ");
  }

  private inVals(paths: string[], condition: () => string): string {
    return this.inValsOf(
      paths.map((path) => this.backend.pathId(path)).filter((id) => id >= 0),
      condition,
    );
  }

  /**
   * Rows with a value at one of these path ids (none: nothing matches) satisfying `condition`. The
   * condition is built only when there is a path: its parameters are numbered, and one bound for
   * SQL that is never emitted makes the statement refuse its values (a field no record holds was a 500).
   */
  private inValsOf(ids: number[], condition: () => string): string {
    if (ids.length === 0) return "0";
    const pathSql = ids.length === 1 ? `path = ${this.p(ids[0]!)}` : `path IN (${ids.map((x) => this.p(x)).join(", ")})`;
    const where = condition();
    return this.correlated
      ? `EXISTS (SELECT 1 FROM vals WHERE rid = r.rid AND ${pathSql} AND ${where})`
      : `r.rid IN (SELECT rid FROM vals WHERE ${pathSql} AND ${where})`;
  }

  private exactTerm(node: TermNode): string {
    const keyword = node.field ? Compiler.keywordOf(node.field) : undefined;
    if (keyword) {
      const paths = this.backend.fieldsMatching(keyword.path);
      if (node.kind === "word" && node.value === "null") return this.inVals(paths, () => `t = ${LeafType.null}`);
      if (node.kind === "prefix" || node.kind === "wildcard") {
        const pattern =
          node.kind === "prefix"
            ? `${escapeGlob(keyword.exact === "lower" ? node.value.toLowerCase() : node.value)}*`
            : luceneToGlob(node.value, keyword.exact === "lower");
        return this.inVals(paths, () => (keyword.exact === "lower" ? `lower(str) GLOB ${this.p(pattern)}` : `str GLOB ${this.p(pattern)}`));
      }
      return this.inVals(paths, () =>
        keyword.exact === "lower" ? `lower(str) = ${this.p(node.value.toLowerCase())}` : `str = ${this.p(node.value)}`,
      );
    }
    // An analyzed field with an infix wildcard: match the pattern against the lowercased words.
    const glob = luceneToGlob(node.value, true);
    const condition = () => `t IN (${LeafType.string}, ${LeafType.date}) AND (' ' || lower(str) || ' ') GLOB ${this.p(`* ${glob} *`)}`;
    if (!node.field)
      return this.inValsOf(
        this.backend.pathIdsWhere((path) => path.startsWith("data.") || path.startsWith("tags.")),
        condition,
      );
    return this.inVals(this.backend.fieldsMatching(node.field), condition);
  }

  private range(node: RangeNode): string {
    const keyword = Compiler.keywordOf(node.field!);
    const paths = this.backend.fieldsMatching(keyword?.path ?? node.field!);
    const bounds = [node.lower, node.upper].filter((b): b is string => b !== undefined);
    if (bounds.length === 0) return this.exists(node.field!);
    const lowerOp = node.includeLower ? ">=" : ">";
    const upperOp = node.includeUpper ? "<=" : "<";
    // The index has no mapping: `[2017 TO 2018]` is a number range on numbers and a year range on dates.
    const { numbers, dates } = keyword ? {} : typedBounds(node);
    return this.inVals(paths, () => {
      const parts: string[] = [];
      if (numbers || dates) {
        const branches: string[] = [];
        if (numbers) branches.push(this.within(LeafType.number, numbers, node.includeLower, node.includeUpper));
        if (dates) branches.push(this.within(LeafType.date, dates, node.includeLower, node.includeUpper));
        parts.push(branches.length === 1 ? branches[0]! : `((${branches.join(") OR (")}))`);
      } else {
        const column = keyword?.exact === "case" ? "str" : "lower(str)";
        const norm = (b: string) => (keyword?.exact === "case" ? b : b.toLowerCase());
        parts.push("str IS NOT NULL");
        if (node.lower !== undefined) parts.push(`${column} ${lowerOp} ${this.p(norm(node.lower))}`);
        if (node.upper !== undefined) parts.push(`${column} ${upperOp} ${this.p(norm(node.upper))}`);
      }
      return parts.join(" AND ");
    });
  }

  private exists(field: string): string {
    const base = field.replace(/\.keyword(Lower)?$/, "");
    if (base.includes("*")) return this.inVals(this.backend.fieldsMatching(base), () => `t <> ${LeafType.null}`);
    // The field and everything under it: the path, or one between `base.` and `base/` (as SQLite compared the path text).
    const below = `${base}.`;
    const after = `${base}/`;
    return this.inValsOf(
      this.backend.pathIdsWhere((path) => path === base || (path > below && path < after)),
      () => `t <> ${LeafType.null}`,
    );
  }
}
