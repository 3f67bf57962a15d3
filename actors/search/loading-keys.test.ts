import { describe, expect, it } from "vitest";
import { LoadingKeys } from "./loading-keys.ts";

/** Rows as a table would hold them: rid → (partition, key). */
function table() {
  const rows = new Map<number, [string, string]>();
  const keys = new LoadingKeys();
  let next = 1;
  const holds = (partition: string, key: string) => (rid: number) => rows.get(rid)?.[0] === partition && rows.get(rid)?.[1] === key;
  return {
    keys,
    find: (partition: string, key: string) => keys.find(partition, key, holds(partition, key)),
    insert(partition: string, key: string): number {
      const rid = next++;
      rows.set(rid, [partition, key]);
      keys.add(partition, key, rid);
      return rid;
    },
    delete(partition: string, key: string, rid: number): void {
      rows.delete(rid);
      keys.remove(partition, key, rid);
    },
  };
}

const sha = (prefix: string, tail: string) => (prefix + tail).padEnd(40, "0");

describe("loading keys", () => {
  it("loading keys - finds each key's row; keys sharing their first 52 bits are told apart by the row", () => {
    const t = table();
    const a = t.insert("opendes", sha("0123456789abc", "1"));
    expect(t.find("opendes", sha("0123456789abc", "1"))).toBe(a);
    // Same first 13 hex digits (52 bits), another key: not the same record.
    expect(t.find("opendes", sha("0123456789abc", "2"))).toBeUndefined();
    const b = t.insert("opendes", sha("0123456789abc", "2"));
    expect(t.find("opendes", sha("0123456789abc", "1"))).toBe(a);
    expect(t.find("opendes", sha("0123456789abc", "2"))).toBe(b);
    expect(t.keys.size).toBe(2);
  });

  it("loading keys - a deleted row is no longer found, and its key or a colliding one can be added again", () => {
    const t = table();
    const first = sha("fedcba9876543", "1");
    const second = sha("fedcba9876543", "2");
    const a = t.insert("opendes", first);
    const b = t.insert("opendes", second);
    t.delete("opendes", first, a);
    expect(t.find("opendes", first)).toBeUndefined();
    expect(t.find("opendes", second)).toBe(b);
    const c = t.insert("opendes", first);
    expect(t.find("opendes", first)).toBe(c);
    t.delete("opendes", second, b);
    expect(t.find("opendes", second)).toBeUndefined();
    expect(t.find("opendes", first)).toBe(c);
  });

  it("loading keys - keys that are not SHA-1 hex are held whole, per partition", () => {
    const t = table();
    const a = t.insert("opendes", "k1");
    const b = t.insert("other", "k1");
    expect(t.find("opendes", "k1")).toBe(a);
    expect(t.find("other", "k1")).toBe(b);
    expect(t.find("opendes", "k2")).toBeUndefined();
  });
});
