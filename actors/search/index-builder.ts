/**
 * Worker: during a bulk load, writes a search replica's lookup file (values and text, lookup.ts) on
 * its own SQLite connection while the actor's thread writes the documents file — two writers, one
 * per file — and at the end builds the value indexes and merges the text index, so the actor keeps
 * answering queries meanwhile (WAL: readers are not blocked by the one writer of each file).
 *
 * Messages in, handled in order: `{type: "open", file, paths}`, a batch, `{type: "finish",
 * sql}` (after the batches before it; closes the connection), `{type: "stop"}` (closes it).
 * Messages out: `{type: "opened"}`, `{type: "applied", seq}` per batch, `{type: "finished"}`,
 * `{type: "stopped"}`, or `{type: "failed", phase, message}` — after which nothing more is written.
 */
import { Database } from "bun:sqlite";
import { LookupWriter, type LookupBatch, type LookupPart } from "./lookup.ts";

declare const self: Worker;

/**
 * Field path ids (the documents file's `paths`) come as [path, id]: all at open, new ones with each
 * batch; a batch's parts as the JSON of its LookupParts, naming their paths by index in `paths`.
 */
export type BuilderRequest =
  | { type: "open"; file: string; paths: Array<[string, number]> }
  | { type: "batch"; seq: number; rids: number[]; partOf: number[]; newPaths: Array<[string, number]>; paths: string[]; parts: string }
  | { type: "finish"; sql: string }
  | { type: "stop" };
export type BuilderReply =
  | { type: "opened" }
  | { type: "applied"; seq: number }
  | { type: "finished" }
  | { type: "stopped" }
  | { type: "failed"; phase: "open" | "batch" | "finish"; message: string };

let db: Database | undefined;
let writer: LookupWriter | undefined;
const pathIds = new Map<string, number>();
const pathId = (path: string) => {
  const id = pathIds.get(path);
  if (id === undefined) throw new Error(`no id for the field path ${JSON.stringify(path)}`);
  return id;
};
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
        // One sorter helper thread with half the page cache: faster, in the memory one cache took before
        // (docs/search.md#work-across-threads-in-a-bulk-load).
        db.exec("PRAGMA synchronous = OFF; PRAGMA cache_size = -32768; PRAGMA threads = 1; PRAGMA busy_timeout = 30000;");
        for (const [path, id] of request.paths) pathIds.set(path, id);
        writer = new LookupWriter(db, "", pathId);
        reply({ type: "opened" });
        return;
      case "batch": {
        for (const [path, id] of request.newPaths) pathIds.set(path, id);
        const batch: LookupBatch = {
          seq: request.seq,
          rids: request.rids,
          partOf: request.partOf,
          parts: JSON.parse(request.parts) as LookupPart[],
          paths: request.paths,
        };
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
