import { describe, expect, it } from "vitest";
import {
  BATCH,
  BULK_BACKLOG,
  CatchUpWaiters,
  HEALTHY_RUN_MS,
  RestartSchedule,
  flushNow,
  isRecordError,
  needsRebuild,
  startsBulkLoad,
  streamReplaced,
} from "./replica-policy.ts";

describe("replica decisions", () => {
  it("replica - a batch is written when full or when the consumer has nothing more pending, else it waits for the timer", () => {
    expect(flushNow(1, 0)).toBe(true);
    expect(flushNow(BATCH, 10)).toBe(true);
    expect(flushNow(BATCH + 1, 10)).toBe(true);
    expect(flushNow(BATCH - 1, 10)).toBe(false);
    expect(flushNow(0, 3)).toBe(false);
    expect(flushNow(3, 9, 3)).toBe(true);
    expect(flushNow(2, 9, 3)).toBe(false);
  });

  it("replica - the index is rebuilt for another stream, or for a stream behind it, and kept when it is at or behind the stream", () => {
    const stream = { identity: "2026-01-01T00:00:00Z", lastSeq: 100 };
    expect(needsRebuild({ identity: stream.identity, appliedSeq: 100 }, stream)).toBe(false);
    expect(needsRebuild({ identity: stream.identity, appliedSeq: 0 }, stream)).toBe(false);
    expect(needsRebuild({ identity: stream.identity, appliedSeq: 101 }, stream)).toBe(true);
    expect(needsRebuild({ identity: "2025-12-31T00:00:00Z", appliedSeq: 5 }, stream)).toBe(true);
    // A new index file knows no stream yet.
    expect(needsRebuild({ identity: undefined, appliedSeq: 0 }, stream)).toBe(true);
  });

  it("replica - a backlog of BULK_BACKLOG messages or more starts a bulk load, unless one runs already", () => {
    expect(startsBulkLoad(0, BULK_BACKLOG, false)).toBe(true);
    expect(startsBulkLoad(0, BULK_BACKLOG - 1, false)).toBe(false);
    expect(startsBulkLoad(10, BULK_BACKLOG + 9, false)).toBe(false);
    expect(startsBulkLoad(10, BULK_BACKLOG + 10, false)).toBe(true);
    expect(startsBulkLoad(0, BULK_BACKLOG * 10, true)).toBe(false);
    expect(startsBulkLoad(0, 5, false, 5)).toBe(true);
  });

  it("replica - a stream gone or made again is another stream; one that could not be checked is not", () => {
    expect(streamReplaced({ created: "a" }, "a")).toBe(false);
    expect(streamReplaced({ created: "b" }, "a")).toBe(true);
    expect(streamReplaced(undefined, "a")).toBe(true);
    expect(streamReplaced(null, "a")).toBe(false);
  });

  it("replica - restart pauses double up to the maximum, and start over after a consumer that ran HEALTHY_RUN_MS", () => {
    let now = 1_000_000;
    const schedule = new RestartSchedule({ firstMs: 200, maxMs: 1_000 }, { now: () => now });
    expect([now, now, now, now, now].map((started) => schedule.next(started))).toEqual([200, 400, 800, 1_000, 1_000]);
    // A consumer that failed just short of a healthy run keeps the backoff where it was.
    now += HEALTHY_RUN_MS - 1;
    expect(schedule.next(now - (HEALTHY_RUN_MS - 1))).toBe(1_000);
    // One that ran long enough starts over, and the doubling resumes from there.
    const started = now;
    now += HEALTHY_RUN_MS;
    expect(schedule.next(started)).toBe(200);
    expect(schedule.next(now)).toBe(400);
  });

  it("replica - caughtUp callers are told once their target is applied, each exactly once", () => {
    const waiters = new CatchUpWaiters();
    const told: number[] = [];
    for (const seq of [5, 10, 10, 20]) waiters.add(seq, () => told.push(seq));
    waiters.appliedUpTo(4);
    expect(told).toEqual([]);
    waiters.appliedUpTo(10);
    expect(told.sort((a, b) => a - b)).toEqual([5, 10, 10]);
    expect(waiters.size).toBe(1);
    waiters.appliedUpTo(10);
    expect(told).toHaveLength(3);
    waiters.appliedUpTo(25);
    expect(told).toHaveLength(4);
    expect(waiters.size).toBe(0);
  });

  it("replica - an index error is the record's only when SQLite says so, or when it is a TypeError or RangeError", () => {
    const sqlite = (code: string) => Object.assign(new Error(code), { code });
    for (const code of ["SQLITE_CONSTRAINT_UNIQUE", "SQLITE_TOOBIG", "SQLITE_MISMATCH", "SQLITE_RANGE"])
      expect(isRecordError(sqlite(code)), code).toBe(true);
    for (const code of ["SQLITE_IOERR_WRITE", "SQLITE_FULL", "SQLITE_BUSY", "SQLITE_READONLY", "SQLITE_CORRUPT"])
      expect(isRecordError(sqlite(code)), code).toBe(false);
    expect(isRecordError(new TypeError("x"))).toBe(true);
    expect(isRecordError(new RangeError("x"))).toBe(true);
    // A TypeError carrying an environment's SQLite code is the environment's.
    expect(isRecordError(Object.assign(new TypeError("x"), { code: "SQLITE_IOERR" }))).toBe(false);
    expect(isRecordError(new Error("disk"))).toBe(false);
    expect(isRecordError(null)).toBe(false);
    expect(isRecordError("text")).toBe(false);
  });
});
