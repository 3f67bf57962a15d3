/**
 * Worker: decodes and prepares the RECORDS messages of a bulk load (decode.ts, prepared.ts) off the
 * actor's thread, which then only writes them (docs/search.md#work-across-threads-in-a-bulk-load).
 *
 * In: `{type: "ping"}` → `{type: "ready"}`; a DecodeRequest (the messages' payloads in one transferred
 * buffer) → a DecodeReply with one change per message, in order. Never fails on a message: one that
 * cannot be indexed comes back as `{op: "skip", reason}`.
 */
import type { RecordChange } from "./backend.ts";
import { decodeRaw, errorText } from "./decode.ts";
import { PathTable, prepareRecord, SHAPE_SLOTS, type PreparedParts } from "./prepared.ts";
import type { LookupPart } from "./lookup.ts";

declare const self: Worker;

export type DecodeRequest = {
  type: "decode";
  subjects: string[];
  seqs: number[];
  deleted: boolean[];
  timestamps: number[];
  ends: number[];
  bytes: Uint8Array;
};
export type DecodedChange = RecordChange | { op: "skip"; reason: string };
/**
 * The changes as JSON, their documents' JSON apart as `docs` (one per prepared change, in order) and their
 * lookup rows apart, unread by the actor's thread: the cheapest transport measured (docs/search.md#work-across-threads-in-a-bulk-load).
 */
export type DecodeReply = { type: "ready" } | { type: "decoded"; changes: string; docs: string[]; parts: PreparedParts };

self.onmessage = (event: MessageEvent<{ type: "ping" } | DecodeRequest>) => {
  const request = event.data;
  if (request.type === "ping") return postMessage({ type: "ready" } satisfies DecodeReply);
  const changes: DecodedChange[] = new Array(request.seqs.length);
  const parts: LookupPart[] = [];
  const docs: string[] = [];
  const table = new PathTable();
  let start = 0;
  for (let i = 0; i < request.seqs.length; i++) {
    const end = request.ends[i]!;
    const change = decodeRaw({
      subject: request.subjects[i]!,
      data: request.bytes.subarray(start, end),
      deleted: request.deleted[i]!,
      seq: request.seqs[i]!,
      timestampMs: request.timestamps[i]!,
    });
    start = end;
    if (change.op !== "upsert") {
      changes[i] = change;
      continue;
    }
    try {
      const { record, part } = prepareRecord(change.doc, SHAPE_SLOTS, table);
      docs.push(record.json);
      record.json = "";
      changes[i] = { op: "prepared", record, part: parts.push(part) - 1 };
    } catch (error) {
      changes[i] = { op: "skip", reason: `cannot be indexed: ${errorText(error)}` };
    }
  }
  postMessage({
    type: "decoded",
    changes: JSON.stringify(changes),
    docs,
    parts: { json: JSON.stringify(parts), paths: table.paths },
  } satisfies DecodeReply);
};
