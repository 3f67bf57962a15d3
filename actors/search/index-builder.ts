/**
 * Worker: builds a search replica's value indexes on its own SQLite connection, so the actor's thread
 * keeps answering queries meanwhile (WAL: readers are not blocked by the one writer). At 1M records
 * the build takes about a minute; on the actor's thread that was a minute without answers.
 * Message in: `{file, sql}`; message out: `{ok: true}` or `{ok: false, message}`.
 */
import { Database } from "bun:sqlite";

declare const self: Worker;

self.onmessage = (event: MessageEvent<{ file: string; sql: string }>) => {
  const { file, sql } = event.data;
  try {
    const db = new Database(file, { strict: true });
    try {
      // The caller's bulk-load marker makes an interrupted build a rebuild from the stream: no fsync here.
      // threads: SQLite's sorter sorts and merges its runs on helper threads (~25% off the step at 100k).
      db.exec("PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA busy_timeout = 30000; PRAGMA threads = 2;");
      db.exec(sql);
    } finally {
      db.close();
    }
    postMessage({ ok: true });
  } catch (error) {
    postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
  }
};
