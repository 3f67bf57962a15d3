/**
 * Worker: during a bulk load, writes a search replica's lookup file (values and text, lookup.ts) on
 * its own SQLite connection while the actor's thread writes the documents file — two writers, one
 * per file — and at the end builds the value indexes and merges the text index, so the actor keeps
 * answering queries meanwhile (WAL: readers are not blocked by the one writer of each file).
 *
 * Messages in, handled in order: `{type: "open", file}`, `{type: "batch", batch}`, `{type: "finish",
 * sql}` (after the batches before it; closes the connection), `{type: "stop"}` (closes it).
 * Messages out: `{type: "opened"}`, `{type: "applied", seq}` per batch, `{type: "finished"}`,
 * `{type: "stopped"}`, or `{type: "failed", phase, message}` — after which nothing more is written.
 */
import { Database } from "bun:sqlite";
import { LookupWriter, type LookupBatch } from "./lookup.ts";

declare const self: Worker;

export type BuilderRequest = { type: "open"; file: string } | { type: "batch"; batch: LookupBatch } | { type: "finish"; sql: string } | { type: "stop" };
export type BuilderReply =
  | { type: "opened" }
  | { type: "applied"; seq: number }
  | { type: "finished" }
  | { type: "stopped" }
  | { type: "failed"; phase: "open" | "batch" | "finish"; message: string };

let db: Database | undefined;
let writer: LookupWriter | undefined;
let failed = false;

const reply = (message: BuilderReply) => postMessage(message);
const close = () => {
  db?.close();
  db = undefined;
};

self.onmessage = (event: MessageEvent<BuilderRequest>) => {
  const request = event.data;
  if (failed) return;
  const phase = request.type === "stop" ? "finish" : request.type;
  try {
    switch (request.type) {
      case "open":
        db = new Database(request.file, { strict: true });
        // The caller's bulk-load marker makes an interrupted load a rebuild from the stream: no fsync here.
        // One sorter helper thread for the index build at the end (the actor's thread is idle by then) with
        // half the page cache: the memory of one 64 MB cache as before, vals_str built 3.4 → 2.6 s at 300k
        // records. (Two helpers with a 64 MB cache had raised the peak RSS at 1M records 1,277 → 1,459 MB.)
        db.exec("PRAGMA synchronous = OFF; PRAGMA cache_size = -32768; PRAGMA threads = 1; PRAGMA busy_timeout = 30000;");
        writer = new LookupWriter(db, "");
        reply({ type: "opened" });
        return;
      case "batch": {
        const { batch } = request;
        db!.transaction(() => writer!.write(batch))();
        reply({ type: "applied", seq: batch.seq });
        return;
      }
      case "finish":
        db!.exec(request.sql);
        close();
        reply({ type: "finished" });
        return;
      case "stop":
        close();
        reply({ type: "stopped" });
        return;
    }
  } catch (error) {
    failed = true;
    try {
      close();
    } catch {
      // the failure reported is the first one
    }
    reply({ type: "failed", phase, message: error instanceof Error ? error.message : String(error) });
  }
};
