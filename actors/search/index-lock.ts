/**
 * One search process per index file: two sharing one would each skip what the other applied, and queries would miss
 * records silently. The lock, `<file>.lock`, is a SQLite database held in exclusive locking mode for the process's life;
 * the kernel releases it however the process ends, so no stale lock is left (docs/search.md#the-index-replica).
 */
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";

export class IndexFileInUse extends Error {
  constructor(readonly file: string) {
    super(
      `the search index file ${file} is in use by another search process; give each search process its own DERRICK_DATA_DIR or DERRICK_SEARCH_INDEX_FILE`,
    );
    this.name = "IndexFileInUse";
  }
}

export type IndexLock = { release(): void };

/** Takes the index file's lock, or throws IndexFileInUse at once. An in-memory index needs none. */
export function lockIndexFile(file: string): IndexLock {
  if (file === ":memory:") return { release() {} };
  mkdirSync(dirname(file), { recursive: true });
  const db = new Database(`${file}.lock`, { create: true });
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    // The first write takes the exclusive lock; in this mode it is kept until the connection closes.
    db.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)");
    db.exec("DELETE FROM holder");
    db.query("INSERT INTO holder (pid) VALUES (?)").run(process.pid);
  } catch (error) {
    db.close();
    if ((error as { code?: string }).code?.startsWith("SQLITE_BUSY")) throw new IndexFileInUse(file);
    throw error;
  }
  return { release: () => db.close() };
}
