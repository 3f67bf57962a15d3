import { describe, expect, it } from "vitest";
import { ResultTable, type CachedRead } from "./result-memory.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const found = (text: string, revision: number): CachedRead => ({ value: bytes(text), revision });
/** The same read as the memory answers it once it keeps it. */
const kept = (text: string, revision: number): CachedRead => ({ ...found(text, revision), held: true });

/** A read whose answer the test gives later, so changes can be delivered while it runs. */
function pending() {
  let answer!: (read: CachedRead) => void;
  const read = new Promise<CachedRead>((resolve) => (answer = resolve));
  return { read: () => read, answer };
}

describe("ResultTable", () => {
  it("holds a live value read, and answers it until a newer change of its key", async () => {
    const table = new ResultTable();
    expect(await table.load("r2.p.prospect.a", async () => found('{"a":1}', 5))).toEqual(kept('{"a":1}', 5));
    expect(table.get("r2.p.prospect.a")).toEqual(kept('{"a":1}', 5));
    // The watch delivering the very put that was read (or an older one) changes nothing.
    table.changed("r2.p.prospect.a", 5);
    table.changed("r2.p.prospect.a", 3);
    expect(table.get("r2.p.prospect.a")).toEqual(kept('{"a":1}', 5));
    table.changed("r2.p.prospect.a", 6);
    expect(table.get("r2.p.prospect.a")).toBeUndefined();
  });

  it("does not hold an absent value", async () => {
    const table = new ResultTable();
    expect(await table.load("k", async () => ({ value: undefined, revision: 7 }))).toEqual({ value: undefined, revision: 7 });
    expect(table.get("k")).toBeUndefined();
    expect(table.size).toBe(0);
  });

  it("answers but does not hold a read overtaken by a newer change of its key while it ran", async () => {
    const table = new ResultTable();
    const read = pending();
    const loading = table.load("k", read.read);
    table.changed("k", 9);
    read.answer(found("old", 8));
    expect(await loading).toEqual(found("old", 8));
    expect(table.get("k")).toBeUndefined();
  });

  it("holds a read when what was delivered meanwhile is what it read, or of another key", async () => {
    const table = new ResultTable();
    const read = pending();
    const loading = table.load("k", read.read);
    table.changed("k", 8);
    table.changed("other", 12);
    read.answer(found("current", 8));
    await loading;
    expect(table.get("k")).toEqual(kept("current", 8));
  });

  it("holds nothing read across a reset (the bucket made again)", async () => {
    const table = new ResultTable();
    await table.load("a", async () => found("a", 1));
    const read = pending();
    const loading = table.load("b", read.read);
    table.reset();
    read.answer(found("b", 2));
    await loading;
    expect(table.get("a")).toBeUndefined();
    expect(table.get("b")).toBeUndefined();
  });

  it("drops what lies below the bucket's first revision (a purge), and holds no read from below it", async () => {
    const table = new ResultTable();
    await table.load("a", async () => found("a", 3));
    await table.load("b", async () => found("b", 8));
    table.firstRevision(5);
    expect(table.get("a")).toBeUndefined();
    expect(table.get("b")).toEqual(kept("b", 8));
    // A lower first revision (an older look answered late) changes nothing.
    table.firstRevision(2);
    expect(await table.load("c", async () => found("c", 4))).toEqual(found("c", 4));
    expect(table.get("c")).toBeUndefined();
    table.firstRevision(9);
    expect(table.size).toBe(0);
  });

  it("starts over at another stream's first revision (the bucket made again), even a lower one", async () => {
    const table = new ResultTable();
    table.firstRevision(50, "stream-1");
    await table.load("a", async () => found("a", 60));
    table.firstRevision(1, "stream-2");
    expect(table.get("a")).toBeUndefined();
    await table.load("b", async () => found("b", 3));
    expect(table.get("b")).toEqual(kept("b", 3));
  });

  it("keeps within its bounds, the least recently read going first", async () => {
    const table = new ResultTable({ entries: 2, bytes: 10 });
    await table.load("a", async () => found("aaaa", 1));
    await table.load("b", async () => found("bbbb", 2));
    table.get("a");
    await table.load("c", async () => found("cccc", 3));
    expect([table.get("a"), table.get("b"), table.get("c")].map((r) => r && new TextDecoder().decode(r.value))).toEqual([
      "aaaa",
      undefined,
      "cccc",
    ]);
    // By bytes: 4 + 8 > 10, so only the newest stays.
    await table.load("d", async () => found("dddddddd", 4));
    expect(table.size).toBe(1);
    expect(table.bytes).toBe(8);
    expect(table.get("d")).toBeDefined();
    // A result over the byte bound on its own is answered, not held: its bytes are not answered again.
    expect(await table.load("e", async () => found("eeeeeeeeeee", 5))).toEqual({ ...found("eeeeeeeeeee", 5), held: false });
    expect(table.get("e")).toBeUndefined();
    // ...and takes nothing else with it.
    expect(table.get("d")).toBeDefined();
  });

  it("forgets a failed read", async () => {
    const table = new ResultTable();
    await expect(table.load("k", () => Promise.reject(new Error("kv down")))).rejects.toThrow("kv down");
    expect(table.get("k")).toBeUndefined();
    expect(await table.load("k", async () => found("v", 2))).toEqual(kept("v", 2));
    expect(table.get("k")).toEqual(kept("v", 2));
  });
});
