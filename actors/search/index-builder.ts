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
      // No sorter helper threads (PRAGMA threads): each holds another run of up to cache_size (64 MB) in
      // memory — at 1M records two raised the build's peak RSS 1,277 → 1,459 MB, one to 1,391 MB — and
      // on a loaded two-core machine they were not reliably faster.
      db.exec("PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA busy_timeout = 30000;");
      db.exec(sql);
    } finally {
      db.close();
    }
    postMessage({ ok: true });
  } catch (error) {
    postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
  }
};
