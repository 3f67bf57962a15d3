import { describe, expect, it } from "vitest";
import { EncodedJson } from "../../subjects/index.ts";
import { toIndexedDoc } from "./documents.ts";
import { query, type SearchDeps } from "./handlers.ts";
import { SqliteBackend } from "./sqlite.ts";
import { searchCaller, testRecord } from "./testing.ts";
import { planSearch } from "./validate.ts";

const ctx = searchCaller();

describe("search - replies of whole documents", () => {
  it("query - the stored JSON written as it is gives the bytes of the documents parsed and serialized again", () => {
    const backend = new SqliteBackend({ file: ":memory:" });
    const odd: Array<Record<string, unknown>> = [
      { Name: "plain", Depth: 1200.5, Tiny: 1e-7, Big: 1e21, Zero: -0 },
      { Name: "ünïcode ✓ \u{1F600}", Lone: "\uD800x", Quote: 'a "q" \\ b\n' },
      { Name: "keys", 10: "ten", 2: "two", b: 1, a: [1, { z: null, y: true }] },
      JSON.parse('{"Name": "proto", "__proto__": {"x": 1}}') as Record<string, unknown>,
    ];
    const changes = odd.map((data, i) => ({ op: "upsert" as const, doc: toIndexedDoc("opendes", `k${i}`, testRecord(i, data)) }));
    backend.apply(changes, changes.length);
    const deps = { backend } as unknown as SearchDeps;
    for (const body of [
      { kind: "*:*:*:*" },
      { kind: "*:*:*:*", aggregateBy: "data.Name", limit: 2, offset: 1 },
      { kind: "*:*:*:*", query: "keys OR proto", sort: { field: ["id"], order: ["DESC"] } },
      { kind: "*:*:*:*", query: "nothing" },
    ]) {
      const reply = query({ body }, ctx, deps);
      expect(reply).toBeInstanceOf(EncodedJson);
      const text = new TextDecoder().decode((reply as EncodedJson).bytes);
      // What the reply was before: the documents parsed, then the whole answer serialized.
      const { plan, ast } = planSearch(body as never, false);
      const found = backend.search({
        partition: "opendes",
        kinds: plan.kinds,
        query: ast,
        access: { all: false, groups: ["users.datalake.viewers", "data.a.viewers"], asOwner: false },
        sort: plan.sort,
        offset: plan.offset,
        limit: plan.limit,
        trackTotalCount: plan.trackTotalCount,
        ...(plan.aggregateBy ? { aggregateBy: plan.aggregateBy } : {}),
      });
      const before = JSON.stringify({
        results: found.hits.map((hit) => hit.doc),
        aggregations: found.aggregations,
        phraseSuggestions: [],
        totalCount: found.total,
      });
      expect(text).toBe(before);
    }
    // Projected or highlighted results are built from the parsed documents, as before.
    const projected = query({ body: { kind: "*:*:*:*", returnedFields: ["data.Name"], limit: 1 } }, ctx, deps);
    expect(JSON.parse(new TextDecoder().decode(projected.bytes)).results).toEqual([{ data: { Name: "plain" } }]);
    backend.close();
  });
});
