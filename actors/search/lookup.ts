/**
 * The lookup half of a search replica: the typed values (`vals`) and the text index (`fts`), in a second
 * SQLite file so that a bulk load writes with two threads (docs/search.md#work-across-threads-in-a-bulk-load).
 * A batch's rows are described as a LookupBatch and written by LookupWriter, the same code on either connection.
 */
import type { Database, SQLQueryBindings, Statement } from "bun:sqlite";

/** The schema name of the lookup file on the actor's connection. */
export const LOOKUP = "lookup";

/** `…/index.sqlite` → `…/index.lookup.sqlite` (any other name gets `.lookup.sqlite` appended). */
export function lookupFileOf(file: string): string {
  return file.endsWith(".sqlite") ? `${file.slice(0, -".sqlite".length)}.lookup.sqlite` : `${file}.lookup.sqlite`;
}

/** `q`: the schema qualifier — `lookup.` on the actor's connection, "" on the worker's own. */
export const lookupSchema = (q: string) => `
CREATE TABLE IF NOT EXISTS ${q}meta(k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ${q}vals(rid INTEGER NOT NULL, path INTEGER NOT NULL, seq INTEGER NOT NULL, t INTEGER NOT NULL, str TEXT, num REAL, PRIMARY KEY(rid, path, seq)) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS ${q}fts USING fts5(body, fielded, content='', contentless_delete=1, tokenize="unicode61 remove_diacritics 2 tokenchars '_'");
`;

/** Indexes on the typed values: dropped during a bulk load and built once at its end. */
export const valueIndexes = (q: string) => `
CREATE INDEX IF NOT EXISTS ${q}vals_str ON vals(path, str);
CREATE INDEX IF NOT EXISTS ${q}vals_num ON vals(path, num) WHERE num IS NOT NULL;
`;

export const dropValueIndexes = (q: string) => `DROP INDEX IF EXISTS ${q}vals_str; DROP INDEX IF EXISTS ${q}vals_num;`;

/**
 * During a bulk load FTS5 does not merge its segments, which are merged into one at its end: fewer passes
 * over the text index than the incremental merges (docs/search.md#work-across-threads-in-a-bulk-load).
 */
export const bulkTextOff = (q: string) => `INSERT INTO ${q}fts(fts, rank) VALUES('automerge', 0);`;
export const bulkTextEnd = (q: string) =>
  `INSERT INTO ${q}fts(fts) VALUES('optimize'); INSERT INTO ${q}fts(fts, rank) VALUES('automerge', 4);`;

/**
 * One record's rows in the lookup file: its free text, its field-prefixed text, and its leaves as
 * parallel arrays (path, as an index in its batch's `paths`; type; exact string; finite number or
 * null). Made by prepareRecord.
 */
export type LookupPart = [
  body: string,
  fielded: string,
  paths: number[],
  types: number[],
  strs: Array<string | null>,
  nums: Array<number | null>,
];

/** What one batch of record changes does to the lookup file, in order. */
export type LookupBatch = {
  /** The stream sequence the batch ends at (the lookup file's `applied_seq`). */
  seq: number;
  /** Per change: the record's row id, negative to clear it (upsert of an existing record, delete). */
  rids: number[];
  /** Per upsert (rid > 0), in order: the index of its rows in `parts`. */
  partOf: number[];
  parts: LookupPart[];
  /** The field paths the parts' leaves name by index. */
  paths: string[];
};

export function emptyLookupBatch(seq: number, parts: LookupPart[] = [], paths: string[] = []): LookupBatch {
  return { seq, rids: [], partOf: [], parts, paths };
}

/** Rows per multi-row INSERT into vals (6 parameters each, far below SQLite's limit). */
const LEAF_ROWS = 32;

/** Writes LookupBatches; the caller holds the transaction. */
export class LookupWriter {
  private readonly deleteVals: Statement;
  private readonly deleteFts: Statement;
  private readonly insertFts: Statement;
  private readonly setMeta: Statement;
  /** Multi-row INSERTs into vals, by row count. */
  private readonly leafInserts: Array<Statement | undefined> = [];
  /**
   * The text rows of the batch, written after its other rows: interleaved with the `vals` inserts, each
   * record became an FTS5 segment of its own (docs/search.md#the-index-replica).
   */
  private readonly pendingText = new Map<number, [body: string, fielded: string]>();
  /** The ids of the batch's paths, by their index. */
  private ids: number[] = [];

  /** `pathId`: the id of a field path in `vals` (the `paths` table of the documents file). */
  constructor(
    private readonly db: Database,
    private readonly q: string,
    private readonly pathId: (path: string) => number,
  ) {
    this.deleteVals = db.query(`DELETE FROM ${q}vals WHERE rid = ?`);
    this.deleteFts = db.query(`DELETE FROM ${q}fts WHERE rowid = ?`);
    this.insertFts = db.query(`INSERT INTO ${q}fts(rowid, body, fielded) VALUES (?, ?, ?)`);
    this.setMeta = db.query(`INSERT OR REPLACE INTO ${q}meta(k, v) VALUES (?, ?)`);
  }

  write(batch: LookupBatch): void {
    this.ids = batch.paths.map((path) => this.pathId(path));
    try {
      let upsert = 0;
      for (const signed of batch.rids) {
        if (signed < 0) {
          const rid = -signed;
          this.deleteVals.run(rid);
          // A row written earlier in this batch is still pending: it never reached FTS5.
          if (!this.pendingText.delete(rid)) this.deleteFts.run(rid);
          continue;
        }
        const part = batch.parts[batch.partOf[upsert++]!]!;
        this.insertLeaves(signed, part);
        this.pendingText.set(signed, [part[0], part[1]]);
      }
      for (const [rid, [body, fielded]] of this.pendingText) this.insertFts.run(rid, body, fielded);
      this.setMeta.run("applied_seq", String(batch.seq));
    } finally {
      this.pendingText.clear();
    }
  }

  /**
   * A record's leaves in one or a few multi-row INSERTs (statements cached per row count): per-row
   * statement calls were the largest cost of building an index, and binding the values directly is
   * ~2× cheaper than unpacking them from JSON in SQLite (json_each + ->>).
   */
  private insertLeaves(rid: number, [, , paths, types, strs, nums]: LookupPart): void {
    const count = paths.length;
    for (let start = 0; start < count; start += LEAF_ROWS) {
      const n = Math.min(LEAF_ROWS, count - start);
      let stmt = this.leafInserts[n];
      if (!stmt) {
        stmt = this.db.query(
          `INSERT INTO ${this.q}vals(rid, path, seq, t, str, num) VALUES ${Array.from({ length: n }, () => "(?, ?, ?, ?, ?, ?)").join(", ")}`,
        );
        this.leafInserts[n] = stmt;
      }
      const params: SQLQueryBindings[] = new Array(n * 6);
      for (let i = 0; i < n; i++) {
        const at = start + i;
        params[i * 6] = rid;
        params[i * 6 + 1] = this.ids[paths[at]!]!;
        params[i * 6 + 2] = at;
        params[i * 6 + 3] = types[at]!;
        params[i * 6 + 4] = strs[at]!;
        params[i * 6 + 5] = nums[at]!;
      }
      stmt.run(...params);
    }
  }
}
