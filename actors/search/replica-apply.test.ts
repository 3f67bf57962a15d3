import { describe, expect, it } from "vitest";
import { createLogger } from "../../platform/logger.ts";
import { recordKey } from "../../subjects/search.ts";
import { subjects } from "../../subjects/index.ts";
import type { RecordChange, SearchBackend } from "./backend.ts";
import type { RawMessage } from "./decode.ts";
import { toIndexedDoc } from "./documents.ts";
import { applyBatch, applyPrepared, type Buffered } from "./replica-apply.ts";
import { SqliteBackend } from "./sqlite.ts";
import { testRecord, testRequest } from "./testing.ts";

const POISON = "k-poison";

/** A real in-memory index that refuses, as a record error, every batch holding the change keyed POISON (nothing of it written). */
function refusingIndex(error: (message: string) => Error = (m) => new TypeError(m)) {
  const real = new SqliteBackend({ file: ":memory:" });
  const calls: number[] = [];
  const backend: SearchBackend = Object.assign(Object.create(real) as SearchBackend, {
    apply(changes: RecordChange[], seq: number, parts?: unknown) {
      calls.push(changes.length);
      if (parts !== undefined) throw error("the prepared batch is refused");
      if (changes.some((c) => c.op === "upsert" && c.doc.key === POISON)) throw error("a pathological value");
      real.apply(changes, seq);
    },
  });
  const skipped: Array<{ subject: string; seq: number; reason: string }> = [];
  const target = {
    backend,
    log: createLogger("silent"),
    skip: (subject: string, seq: number, reason: string) => void skipped.push({ subject, seq, reason }),
  };
  const ids = () => real.search(testRequest({ limit: 100 })).hits.map((h) => h.doc.id);
  return { real, target, calls, skipped, ids };
}

const item = (i: number, key = `k${i}`): Buffered => ({
  change: { op: "upsert", doc: toIndexedDoc("opendes", key, testRecord(i, { N: i })) },
  seq: i,
  subject: `records.${key}`,
});

describe("replica batch writes", () => {
  it("replica - a batch is written in one apply and marks its last sequence applied", () => {
    const index = refusingIndex();
    expect(applyBatch(index.target, [item(1), item(2), item(3)], 3)).toBe(true);
    expect(index.calls).toEqual([3]);
    expect(index.real.appliedSeq()).toBe(3);
    expect(index.ids()).toEqual(["opendes:well:1", "opendes:well:2", "opendes:well:3"]);
    index.real.close();
  });

  it("replica - a batch up to the sequence applied already writes nothing", () => {
    const index = refusingIndex();
    applyBatch(index.target, [item(1)], 1);
    expect(applyBatch(index.target, [item(1)], 1)).toBe(false);
    expect(index.calls).toEqual([1]);
    index.real.close();
  });

  it("replica - a record the index refuses is skipped with its subject and sequence, and the rest of its batch applied", () => {
    const index = refusingIndex();
    expect(applyBatch(index.target, [item(1), item(2, POISON), item(3)], 3)).toBe(true);
    expect(index.skipped).toEqual([
      { subject: `records.${POISON}`, seq: 2, reason: "the index refused it: TypeError: a pathological value" },
    ]);
    expect(index.ids()).toEqual(["opendes:well:1", "opendes:well:3"]);
    expect(index.real.appliedSeq()).toBe(3);
    index.real.close();
  });

  it("replica - a failure that is not the record's throws and skips nothing: the batch stays unapplied", () => {
    const index = refusingIndex((m) => Object.assign(new Error(m), { code: "SQLITE_IOERR_WRITE" }));
    expect(() => applyBatch(index.target, [item(1), item(2, POISON)], 2)).toThrow("a pathological value");
    expect(index.skipped).toEqual([]);
    expect(index.real.appliedSeq()).toBe(0);
    expect(index.ids()).toEqual([]);
    index.real.close();
  });

  it("replica - a prepared batch the index refuses is decoded again from its messages and applied one by one", () => {
    const index = refusingIndex();
    const raw: RawMessage[] = [1, 2].map((i) => {
      const record = testRecord(i, { N: i });
      return {
        subject: subjects.records("opendes", recordKey(record.id)),
        data: new TextEncoder().encode(JSON.stringify(record)),
        deleted: false,
        seq: i,
      };
    });
    const items = raw.map((m) => ({
      change: { op: "delete", partition: "opendes", key: "unused" } as RecordChange,
      seq: m.seq,
      subject: m.subject,
    }));
    const batch = { changes: [], parts: { json: "[]", paths: [] }, raw, upTo: 2 };
    expect(applyPrepared(index.target, items, batch)).toBe(true);
    expect(index.calls).toEqual([2, 2]);
    expect(index.ids()).toEqual(["opendes:well:1", "opendes:well:2"]);
    expect(index.real.appliedSeq()).toBe(2);
    index.real.close();
  });
});
