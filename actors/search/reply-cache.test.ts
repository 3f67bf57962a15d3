import { describe, expect, it } from "vitest";
import type { EncodedJson } from "../../subjects/index.ts";
import { toIndexedDoc } from "./documents.ts";
import { query, type SearchDeps } from "./handlers.ts";
import { REPLY_CACHE_BYTES, ReplyCache, replyKey } from "./reply-cache.ts";
import { SqliteBackend } from "./sqlite.ts";
import { searchCaller, testRecord } from "./testing.ts";

const text = (reply: EncodedJson) => new TextDecoder().decode(reply.bytes);

/** A backend counting its searches, with its reply cache, as the actor wires them. */
function cachedSearch() {
  const backend = new SqliteBackend({ file: ":memory:" });
  let searches = 0;
  const counted = Object.assign(Object.create(backend) as SqliteBackend, {
    search: (request: Parameters<SqliteBackend["search"]>[0]) => (searches++, backend.search(request)),
  });
  const deps = { backend: counted, replies: new ReplyCache(() => backend.resultsVersion()) } as unknown as SearchDeps;
  let seq = 0;
  const put = (i: number, data: Record<string, unknown>, group = "a") => {
    const record = testRecord(i, data);
    record.acl.viewers = [`data.${group}.viewers@opendes.example.com`];
    backend.apply([{ op: "upsert", doc: toIndexedDoc("opendes", `k${i}`, record) }], ++seq);
  };
  return { backend, deps, put, searches: () => searches };
}

describe("search - replies of repeated queries", () => {
  it("query - the same query is answered from the cache until a change is applied, then computed again", () => {
    const { backend, deps, put, searches } = cachedSearch();
    put(1, { Name: "volve one" });
    const body = { kind: "*:*:*:*", query: "volve" };
    const first = text(query({ body }, searchCaller(), deps));
    expect(text(query({ body: { ...body } }, searchCaller(), deps))).toBe(first);
    expect(searches()).toBe(1);
    put(2, { Name: "volve two" });
    const after = JSON.parse(text(query({ body }, searchCaller(), deps))) as { totalCount: number };
    expect(after.totalCount).toBe(2);
    expect(searches()).toBe(2);
    backend.close();
  });

  it("query - a caller of other groups never gets another's kept reply", () => {
    const { backend, deps, put } = cachedSearch();
    put(1, { Name: "volve a" }, "a");
    put(2, { Name: "volve b" }, "b");
    const body = { kind: "*:*:*:*", query: "volve" };
    const ids = (group: string) =>
      (JSON.parse(text(query({ body }, searchCaller(group), deps))) as { results: Array<{ id: string }> }).results.map((r) => r.id);
    expect(ids("a")).toEqual(["opendes:well:1"]);
    expect(ids("b")).toEqual(["opendes:well:2"]);
    expect(ids("a")).toEqual(["opendes:well:1"]);
    backend.close();
  });

  it("query - a caller's rights come from its groups as they are: a principal object that may change is checked each time", () => {
    const { backend, deps, put } = cachedSearch();
    put(1, { Name: "volve a" }, "a");
    put(2, { Name: "volve b" }, "b");
    const body = { kind: "*:*:*:*", query: "volve" };
    const ctx = searchCaller("a");
    const ids = () => (JSON.parse(text(query({ body }, ctx, deps))) as { results: Array<{ id: string }> }).results.map((r) => r.id);
    expect(ids()).toEqual(["opendes:well:1"]);
    // Not frozen, so not one the actor shares between requests: what its groups say now decides, not what they said.
    (ctx.principal!.groups as string[])[1] = "data.b.viewers";
    expect(ids()).toEqual(["opendes:well:2"]);
    (ctx.principal!.groups as string[]).splice(0, 1);
    expect(() => query({ body }, ctx, deps)).toThrow(/searching needs one of the groups/);
    // A shared (frozen) principal, as the actor hands out: the same answers, its groups read for the first query only.
    let groupReads = 0;
    const groups = new Proxy(Object.freeze(["users.datalake.viewers", "data.a.viewers"]), {
      get: (target, key, receiver) => (groupReads++, Reflect.get(target, key, receiver)),
    });
    const shared = { ...searchCaller("a"), principal: Object.freeze({ clientId: "c", subject: "s", groups, kind: "service" }) };
    const sharedIds = () =>
      (JSON.parse(text(query({ body }, shared as never, deps))) as { results: Array<{ id: string }> }).results.map((r) => r.id);
    expect(sharedIds()).toEqual(["opendes:well:1"]);
    expect(groupReads).toBeGreaterThan(0);
    groupReads = 0;
    expect(sharedIds()).toEqual(["opendes:well:1"]);
    expect(groupReads).toBe(0);
    backend.close();
  });

  it("query - a range anchored at `now` (date math moves with the clock) is computed every time, however it is written", () => {
    const { backend, deps, put, searches } = cachedSearch();
    put(1, { Name: "volve snow", Spud: "2020-01-01" });
    const clocked = ["data.Spud:[* TO now]", "data.Spud:[n\\ow-1d TO *]", "data.Spud:<now", "nested(data.X, (data.Y:[now-1y TO *]))"];
    for (const text of clocked) {
      const before = searches();
      query({ body: { kind: "*:*:*:*", query: text } }, searchCaller(), deps);
      query({ body: { kind: "*:*:*:*", query: text } }, searchCaller(), deps);
      expect(searches() - before, text).toBe(2);
    }
    // The word alone is no date math: kept.
    const before = searches();
    query({ body: { kind: "*:*:*:*", query: "snow" } }, searchCaller(), deps);
    query({ body: { kind: "*:*:*:*", query: "snow" } }, searchCaller(), deps);
    expect(searches() - before).toBe(1);
    backend.close();
  });

  it("query - a reply is marked held only when the cache kept it; one refused still varies, one never kept does not", async () => {
    const { backend, deps, put } = cachedSearch();
    put(1, { Name: "volve snow", Spud: "2020-01-01" });
    const kept = query({ body: { kind: "*:*:*:*", query: "volve" } }, searchCaller(), deps);
    expect([kept.held, kept.varies]).toEqual([true, true]);
    // Refused while the version is unknown (a bulk load): compressing it would cost a gzip for one answer.
    await backend.bulkLoad(true);
    const refused = query({ body: { kind: "*:*:*:*", query: "snow" } }, searchCaller(), deps);
    expect([refused.held, refused.varies]).toEqual([false, true]);
    await backend.bulkLoad(false);
    const clocked = query({ body: { kind: "*:*:*:*", query: "data.Spud:<now" } }, searchCaller(), deps);
    expect([clocked.held, clocked.varies]).toEqual([false, false]);
    backend.close();
  });

  it("query - nothing is kept during a bulk load, whose worker writes behind the version", async () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    expect(backend.resultsVersion()).toBe(0);
    await backend.bulkLoad(true);
    expect(backend.resultsVersion()).toBeUndefined();
    await backend.bulkLoad(false);
    expect(backend.resultsVersion()).toBe(2);
    backend.close();
  });

  it("replyKey - groups in any order give one key; the partition, the groups and the body each make another", () => {
    const access = (groups: string[]) => ({ all: false as const, groups, asOwner: false });
    const key = replyKey("opendes", access(["data.a", "data.b"]), { query: "x" });
    expect(replyKey("opendes", access(["data.b", "data.a"]), { query: "x" })).toBe(key);
    expect(replyKey("other", access(["data.a", "data.b"]), { query: "x" })).not.toBe(key);
    expect(replyKey("opendes", access(["data.a"]), { query: "x" })).not.toBe(key);
    expect(replyKey("opendes", { all: true }, { query: "x" })).not.toBe(key);
    expect(replyKey("opendes", access(["data.a", "data.b"]), { query: "y" })).not.toBe(key);
    // A group name may hold a comma: two groups never make the key of one.
    expect(replyKey("opendes", access(["data.a,data.b"]), { query: "x" })).not.toBe(key);
  });

  it("ReplyCache - a reply over an eighth of the byte bound is not kept", () => {
    const cache = new ReplyCache<unknown>(() => 1);
    expect(cache.get("k")).toBeUndefined();
    expect(cache.set("big", { bytes: new Uint8Array(REPLY_CACHE_BYTES / 8 + 1) } as EncodedJson)).toBe(false);
    expect(cache.set("small", { bytes: new Uint8Array(10) } as EncodedJson)).toBe(true);
    expect(cache.get("big")).toBeUndefined();
    expect(cache.get("small")?.bytes.byteLength).toBe(10);
  });
});
