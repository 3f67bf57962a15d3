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
      // threads = 1: SQLite's sorter sorts a full run on a helper thread while this one fills the next.
      // Each run in memory is up to cache_size (64 MB): one helper adds one run (2 = three runs, +128 MB
      // RSS at 1M records, and no faster on two cores).
      db.exec("PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA busy_timeout = 30000; PRAGMA threads = 1;");
      db.exec(sql);
    } finally {
      db.close();
    }
    postMessage({ ok: true });
  } catch (error) {
    postMessage({ ok: false, message: error instanceof Error ? error.message : String(error) });
  }
};
