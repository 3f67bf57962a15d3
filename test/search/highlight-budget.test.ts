/**
 * Highlighting work is bounded (review: a 19 KB request — 1000 `data.fN:hello` OR terms,
 * `highlightedFields: ["*" ×100]` — compiled a glob per document × path × term × entry and held the
 * search actor's thread for minutes). Asserted on work, never on time: repeated entries are looked
 * at once, each glob is compiled once per request, and past HIGHLIGHT_WORK_MAX the remaining results
 * come without `highlight`.
 */
import { describe, expect, it, vi } from "vitest";

const compiled = vi.hoisted(() => ({ count: 0 }));
vi.mock("../../actors/search/glob.ts", async (original) => {
  const glob = await original<typeof import("../../actors/search/glob.ts")>();
  return { ...glob, compileGlob: (...args: Parameters<typeof glob.compileGlob>) => (compiled.count++, glob.compileGlob(...args)) };
});

import type { SearchBackend, SearchRequest } from "../../actors/search/backend.ts";
import { query, type SearchDeps } from "../../actors/search/handlers.ts";
import { HIGHLIGHT_WORK_MAX } from "../../actors/search/results.ts";
import { planSearch } from "../../actors/search/validate.ts";
import { searchCaller } from "../../actors/search/testing.ts";
import type { QueryResponse } from "../../subjects/search.ts";

/** The query handler over a backend that returns these documents for any request. */
function run(docs: Array<Record<string, unknown>>, body: Record<string, unknown>): { response: QueryResponse; requests: SearchRequest[] } {
  const requests: SearchRequest[] = [];
  const backend = {
    search: (request: SearchRequest) => (
      requests.push(request),
      { hits: docs.slice(0, request.limit).map((doc) => ({ doc, position: [] })), total: docs.length, aggregations: [] }
    ),
  } as unknown as SearchBackend;
  const response = query({ body: { kind: "*:*:*:*", ...body } }, searchCaller("north"), { backend } as unknown as SearchDeps);
  // Hits without their stored JSON: the reply is built from the documents.
  return { response: JSON.parse(new TextDecoder().decode(response.bytes)) as QueryResponse, requests };
}

const doc = (i: number, data: Record<string, unknown>) => ({ id: `opendes:well:${i}`, kind: "osdu:wks:master-data--Well:1.0.0", data });

describe("search - highlighting work is bounded", () => {
  it("search - many fielded terms × repeated highlightedFields: each glob compiled once per request, repeated entries once", () => {
    const FIELDS = 40;
    const TERMS = 100;
    const data = Object.fromEntries(Array.from({ length: FIELDS }, (_, f) => [`f${f}`, `hello value ${f}`]));
    const docs = Array.from({ length: 5 }, (_, i) => doc(i, data));
    const terms = Array.from({ length: TERMS }, (_, i) => `data.f${i % FIELDS}:hello`).join(" OR ");
    // And terms on wildcard fields: their globs are compiled once too.
    const query = `${terms} OR data.f1*:value`;

    compiled.count = 0;
    const once = run(docs, { limit: 5, query, highlightedFields: ["*"] }).response;
    const single = compiled.count;
    compiled.count = 0;
    const repeated = run(docs, { limit: 5, query, highlightedFields: Array(10).fill("*") }).response;
    // Before: a glob per document × path × fielded term, and again per repeated entry (≈ 5 × 40 × 101 × 10).
    expect(compiled.count).toBe(single);
    expect(single).toBeLessThanOrEqual(2 + 2); // "*", "data.f1*" (and the kind pattern's)
    expect(repeated.results).toEqual(once.results);
    const first = once.results[0]!.highlight as Record<string, string[]>;
    expect(Object.keys(first)).toHaveLength(FIELDS);
    expect(first["data.f3"]).toEqual(["<em>hello</em> value 3"]);
    expect(first["data.f12"]).toEqual(["<em>hello</em> <em>value</em> 12"]);
  });

  it("search - repeated highlightedFields entries are kept once in the plan (and in a cursor's plan)", () => {
    expect(planSearch({ kind: "*:*:*:*", highlightedFields: ["data.a", "*", " data.a", "*"] }, true).plan.highlightedFields).toEqual([
      "data.a",
      "*",
    ]);
    expect(planSearch({ kind: "*:*:*:*", highlightedFields: Array(100).fill("*") }, false).plan.highlightedFields).toEqual(["*"]);
    const { response } = run([doc(1, { a: "x y" })], { query: "x", highlightedFields: ["data.a", "*", "data.a"] });
    expect(response.results[0]!.highlight).toEqual({ "data.a": ["<em>x</em> y"] });
  });

  it("search - past HIGHLIGHT_WORK_MAX the remaining results come without highlight; the results themselves are all there", () => {
    // 1000 results with one 4,000-character value each: about 4,000 units a document, so the budget
    // runs out about half-way.
    const text = `hello ${"lorem ipsum ".repeat(333)}`;
    const docs = Array.from({ length: 1000 }, (_, i) => doc(i, { Text: text }));
    const { response } = run(docs, { limit: 1000, query: "hello", highlightedFields: ["*"], returnedFields: ["id"] });
    expect(response.results).toHaveLength(1000);
    const highlighted = response.results.filter((r) => r.highlight).length;
    expect(highlighted).toBeLessThan(1000);
    // A document costs its text's length and a little for its paths.
    expect(highlighted).toBeGreaterThan(HIGHLIGHT_WORK_MAX / (text.length + 200));
    expect(highlighted).toBeLessThanOrEqual(HIGHLIGHT_WORK_MAX / text.length);
    // The highlighted ones come first, then none: the budget is spent in result order.
    expect(response.results.slice(0, highlighted).every((r) => r.highlight)).toBe(true);
    expect(response.results.slice(highlighted).some((r) => r.highlight)).toBe(false);
    expect(response.results[0]!.highlight).toEqual({ "data.Text": [expect.stringMatching(/^<em>hello<\/em> lorem/)] });
  });

  it("search - prefix terms cost their number per character: 1000 prefixes on a long value hit the budget on the first documents", () => {
    const text = "zzz ".repeat(1000);
    const docs = Array.from({ length: 100 }, (_, i) => doc(i, { Text: text }));
    const prefixes = Array.from({ length: 1000 }, (_, i) => `p${i}*`).join(" OR ");
    const { response } = run(docs, { limit: 100, query: `${prefixes} OR zzz`, highlightedFields: ["data.Text"] });
    // 4,001 characters × 1,001 ≈ 4M units: not even the first document is highlighted.
    expect(response.results.filter((r) => r.highlight)).toHaveLength(0);
    // With one prefix, every document is.
    expect(
      run(docs, { limit: 100, query: "p1* OR zzz", highlightedFields: ["data.Text"] }).response.results.filter((r) => r.highlight),
    ).toHaveLength(100);
  });
});
