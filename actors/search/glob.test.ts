import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { toIndexedDoc } from "./documents.ts";
import { compileGlob } from "./glob.ts";
import { parseQuery } from "./query/parser.ts";
import { highlight, project } from "./results.ts";
import { SqliteBackend } from "./sqlite.ts";
import { testRecord as record, testRequest } from "./testing.ts";

/**
 * The anchored RegExp the matcher replaced (actors/search/evaluate.ts `globToRegExp`): the reference
 * for what a pattern means. Only ever run here on short inputs, where its backtracking is harmless.
 */
function formerRegExp(pattern: string, flags: string): RegExp {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\" && i + 1 < pattern.length) out += pattern[++i]!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    else if (c === "*") out += ".*";
    else if (c === "?") out += ".";
    else out += c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${out}$`, flags);
}

// Letters whose case folds unevenly (ß, ſ, the Kelvin sign, µ, dotless ı), line terminators, a
// surrogate pair's halves, and the pattern's own metacharacters.
const TEXT_UNITS = [
  "a",
  "A",
  "b",
  "s",
  "S",
  "ß",
  "ſ",
  "k",
  "K",
  "\u212a",
  "µ",
  "μ",
  "Μ",
  "i",
  "I",
  "ı",
  "é",
  "É",
  ".",
  "\n",
  "\r",
  "\u2028",
  "\ud83d",
  "\ude00",
];
const PATTERN_UNITS = [...TEXT_UNITS, "*", "*", "?", "?", "\\"];
const stringOf = (units: string[], maxLength: number) => fc.array(fc.constantFrom(...units), { maxLength }).map((u) => u.join(""));

/** Patterns the RegExp took seconds to hours on: `*?` pairs, then a character the text lacks. */
const PATHOLOGICAL = `${"*?".repeat(12)}!`;
const LONG_PATH = "data.SpatialLocation.Wgs84Coordinates.features"; // 46 characters

const request = testRequest;

describe("glob patterns from callers", () => {
  it("glob - every pattern matches exactly what the anchored RegExp matched: case, line terminators, escapes, surrogates", () => {
    fc.assert(
      fc.property(stringOf(PATTERN_UNITS, 8), stringOf(TEXT_UNITS, 10), fc.boolean(), fc.boolean(), (pattern, text, ignoreCase, dotAll) => {
        const flags = `${ignoreCase ? "i" : ""}${dotAll ? "s" : ""}`;
        expect(compileGlob(pattern, { ignoreCase, dotAll })(text), JSON.stringify({ pattern, text, flags })).toBe(
          formerRegExp(pattern, flags).test(text),
        );
      }),
      { numRuns: 20_000 },
    );
  });

  it("glob - texts built to match a pattern match it, however the stars and question marks fall", () => {
    // Random texts rarely match a random pattern; these do by construction (each `*` gets a random run).
    const pieces = fc.array(
      fc.oneof(
        fc.constant({ p: "*" }),
        fc.constant({ p: "?" }),
        fc.constantFrom(...TEXT_UNITS.filter((u) => !/[\n\r\u2028\u2029]/.test(u))).map((c) => ({ p: c })),
      ),
      { maxLength: 10 },
    );
    fc.assert(
      fc.property(pieces, fc.array(stringOf(["a", "b", "*", "?", "."], 4), { minLength: 10, maxLength: 10 }), (parts, fills) => {
        const pattern = parts.map((x) => x.p).join("");
        const text = parts.map((x, i) => (x.p === "*" ? fills[i]! : x.p === "?" ? "x" : x.p)).join("");
        expect(compileGlob(pattern)(text), JSON.stringify({ pattern, text })).toBe(true);
        expect(formerRegExp(pattern, "").test(text)).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it("glob - the whole text must match; `*` takes any run, `?` one character, `\\` escapes", () => {
    const cases: Array<[string, string, boolean]> = [
      ["data.*", "data.Name", true],
      ["data.*", "data.", true],
      ["data.*", "dat", false],
      ["*.Name", "data.Items.Name", true], // across dots, as ES simple match
      ["data.?ame", "data.Name", true],
      ["data.?ame", "data.ame", false],
      ["data.Name", "data.Name.x", false],
      ["a\\*b", "a*b", true],
      ["a\\*b", "axb", false],
      ["a\\?", "a?", true],
      ["a\\?", "ab", false],
      ["a\\", "a\\", true], // a trailing backslash is itself
      ["*b*b*", "abba", true],
      ["**", "", true],
      ["?", "", false],
      ["a*", "a\nb", false], // as `.` in a RegExp: no line terminator
      ["a*", "A", false],
    ];
    for (const [pattern, text, expected] of cases)
      expect(compileGlob(pattern)(text), `${pattern} ~ ${JSON.stringify(text)}`).toBe(expected);
    expect(compileGlob("a*", { dotAll: true })("a\nb")).toBe(true);
    expect(compileGlob("a\nb")("a\nb")).toBe(true);
    expect(compileGlob("DATA.*", { ignoreCase: true })("data.Name")).toBe(true);
    expect(compileGlob("straße", { ignoreCase: true })("STRASSE")).toBe(false); // one code unit for one, as the `i` flag
  });

  it("glob - patterns that made the RegExp backtrack for minutes are answered, correctly", () => {
    expect(compileGlob(PATHOLOGICAL)(LONG_PATH)).toBe(false);
    expect(compileGlob(`${"*?".repeat(12)}s`)(LONG_PATH)).toBe(true);
    expect(compileGlob(`${"*a".repeat(1000)}b`)("a".repeat(100_000))).toBe(false);
    expect(compileGlob(`${"*a".repeat(1000)}`)("a".repeat(100_000))).toBe(true);
    expect(compileGlob(`${"*?".repeat(128)}!`, { ignoreCase: true })("x".repeat(10_000))).toBe(false);
  });

  it("glob - highlightedFields and returnedFields patterns are matched without backtracking", () => {
    const doc = { id: "opendes:well:1", data: { SpatialLocation: { Wgs84Coordinates: { features: "Ocean drilling" } } } };
    expect(highlight(doc, [PATHOLOGICAL], parseQuery("drilling"))).toBeUndefined();
    expect(highlight(doc, [`${"*?".repeat(12)}s`], parseQuery("drilling"))).toEqual({ [LONG_PATH]: ["Ocean <em>drilling</em>"] });
    expect(project(doc, [PATHOLOGICAL])).toEqual({});
    expect(project(doc, ["id", `${"*?".repeat(12)}s`])).toEqual(doc);
  });

  it("glob - wildcard terms inside nested(), wildcard field names and kind patterns are matched without backtracking", () => {
    const b = new SqliteBackend({ file: ":memory:" });
    const many = "a".repeat(40);
    b.apply(
      [
        { op: "upsert", doc: toIndexedDoc("opendes", "k1", record(1, { Items: [{ code: many, flag: 1 }], [many]: "x" })) },
        { op: "upsert", doc: toIndexedDoc("opendes", "k2", { ...record(2, { Name: "y" }), kind: `${many}:src:type:1.0.0` }) },
      ],
      2,
    );
    const ids = (q: string, kinds = ["*:*:*:*"]) => b.search(request({ query: parseQuery(q), kinds })).hits.map((h) => h.doc.id);
    // A NOT inside nested() is checked on each element in JS (the index cannot prefilter it).
    const stars = `${"\\*a".repeat(12)}b`;
    expect(ids(`nested(data.Items, (flag:1 AND NOT code.keyword:a${"*?".repeat(12)}z))`)).toEqual(["opendes:well:1"]);
    expect(ids(`nested(data.Items, (flag:1 AND NOT code.keywordLower:a${"*?".repeat(12)}z))`)).toEqual(["opendes:well:1"]);
    expect(ids(`nested(data.Items, (flag:1 AND NOT code:a${"*?".repeat(12)}z))`)).toEqual(["opendes:well:1"]);
    expect(ids(`nested(data.Items, (flag:1 AND code:a${"*?".repeat(12)}a))`)).toEqual(["opendes:well:1"]);
    expect(ids(`data.${stars}:x`)).toEqual([]);
    expect(ids(`data.${"\\*a".repeat(12)}:x`)).toEqual(["opendes:well:1"]);
    expect(ids("y", [`${"*a".repeat(12)}b:*:*:*`])).toEqual([]);
    expect(ids("y", [`${"*a".repeat(12)}:*:*:*`])).toEqual(["opendes:well:2"]);
    b.close();
  });
});
