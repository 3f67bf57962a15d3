import { describe, expect, it } from "vitest";
import { parseDateMath } from "./date-math.ts";
import { parseQuery, QuerySyntaxError } from "./parser.ts";

const term = (value: string, field?: string, kind = "word") =>
  expect.objectContaining({ type: "term", value, kind, ...(field ? { field } : {}) });

/** A bool node with the clauses given and the other lists empty. */
const bool = (clauses: { must?: unknown[]; should?: unknown[]; mustNot?: unknown[] }) => ({
  type: "bool",
  must: [],
  should: [],
  mustNot: [],
  ...clauses,
});

describe("search query parser", () => {
  it("parser - a blank query matches everything", () => {
    expect(parseQuery("")).toEqual({ type: "matchAll" });
    expect(parseQuery("   ")).toEqual({ type: "matchAll" });
    expect(parseQuery("*")).toEqual({ type: "matchAll" });
  });

  it("parser - free text and field search (OSDU docs: well, data.Basin:Permian)", () => {
    expect(parseQuery("well")).toEqual(term("well"));
    expect(parseQuery("data.Basin:Permian")).toEqual(term("Permian", "data.Basin"));
  });

  it("parser - adjacent clauses default to OR", () => {
    expect(parseQuery("well bore")).toEqual(bool({ should: [term("well"), term("bore")] }));
  });

  it("parser - field groups apply the field to every clause (data.Rig_Contractor:(Ocean OR Drilling))", () => {
    expect(parseQuery("data.Rig_Contractor:(Ocean OR Drilling)")).toEqual(
      bool({ should: [term("Ocean", "data.Rig_Contractor"), term("Drilling", "data.Rig_Contractor")] }),
    );
  });

  it("parser - phrases, with slop", () => {
    expect(parseQuery('"Ocean Drilling"')).toEqual(term("Ocean Drilling", undefined, "phrase"));
    expect(parseQuery('data.Name:"Ocean Drilling"~2')).toEqual(expect.objectContaining({ kind: "phrase", slop: 2, field: "data.Name" }));
  });

  it("parser - AND makes both neighbours required, as Lucene's classic parser does", () => {
    expect(parseQuery("a AND b OR c")).toEqual(bool({ must: [term("a"), term("b")], should: [term("c")] }));
    expect(parseQuery("a && b")).toEqual(bool({ must: [term("a"), term("b")] }));
  });

  it("parser - NOT, -, + and ! are clause modifiers", () => {
    expect(parseQuery("a NOT b")).toEqual(bool({ should: [term("a")], mustNot: [term("b")] }));
    expect(parseQuery("+a -b c")).toEqual(bool({ must: [term("a")], should: [term("c")], mustNot: [term("b")] }));
    expect(parseQuery("NOT b")).toEqual(bool({ mustNot: [term("b")] }));
    expect(parseQuery("a AND NOT b")).toEqual(bool({ must: [term("a")], mustNot: [term("b")] }));
    expect(parseQuery("!b")).toEqual(bool({ mustNot: [term("b")] }));
  });

  it("parser - grouping nests boolean queries", () => {
    expect(parseQuery("(data.A:x OR data.B:y) AND NOT data.C:z")).toEqual(
      bool({ must: [bool({ should: [term("x", "data.A"), term("y", "data.B")] })], mustNot: [term("z", "data.C")] }),
    );
  });

  it("parser - wildcards: trailing * is a prefix, others are patterns, leading ones are rejected", () => {
    expect(parseQuery("Wel*")).toEqual(term("Wel", undefined, "prefix"));
    expect(parseQuery("W?ll")).toEqual(term("W?ll", undefined, "wildcard"));
    expect(parseQuery("data.Name:Sp*ath*")).toEqual(term("Sp*ath*", "data.Name", "wildcard"));
    expect(() => parseQuery("*ell")).toThrow(/leading wildcard/);
    expect(() => parseQuery("data.Name:?ell")).toThrow(/leading wildcard/);
  });

  it('parser - wildcards in field names (data.ValueList.\\*:(A B), data.Well\\*:"…")', () => {
    expect(parseQuery("data.ValueList.\\*:(A B)")).toEqual(
      bool({ should: [term("A", "data.ValueList.*"), term("B", "data.ValueList.*")] }),
    );
    expect(parseQuery('data.Well\\*:"Ocean"')).toEqual(term("Ocean", "data.Well*", "phrase"));
  });

  it("parser - _exists_ and field:* test that a field is present", () => {
    expect(parseQuery("_exists_:data.Status")).toEqual({ type: "exists", field: "data.Status", pos: 0 });
    expect(parseQuery("data.Status:*")).toEqual(expect.objectContaining({ type: "exists", field: "data.Status" }));
  });

  it('parser - keyword subfields and explicit null (data.name.keyword:"Spillpath DA no.109", data.X.keyword:null)', () => {
    expect(parseQuery('data.name.keyword:"Spillpath DA no.109"')).toEqual(term("Spillpath DA no.109", "data.name.keyword", "phrase"));
    expect(parseQuery("data.X.keyword:null")).toEqual(term("null", "data.X.keyword"));
    expect(parseQuery('data.X.keyword:""')).toEqual(term("", "data.X.keyword", "phrase"));
  });

  it("parser - ranges on numbers, dates and strings, inclusive, exclusive, mixed and open", () => {
    expect(parseQuery("data.Depth:[100 TO 200]")).toEqual(
      expect.objectContaining({ type: "range", field: "data.Depth", lower: "100", upper: "200", includeLower: true, includeUpper: true }),
    );
    expect(parseQuery("data.Depth:{100 TO 200}")).toEqual(expect.objectContaining({ includeLower: false, includeUpper: false }));
    expect(parseQuery("data.Depth:[100 TO 200}")).toEqual(expect.objectContaining({ includeLower: true, includeUpper: false }));
    const open = parseQuery("data.Depth:[100 TO *]");
    expect(open).toEqual(expect.objectContaining({ lower: "100" }));
    expect(open).not.toHaveProperty("upper");
    expect(parseQuery("data.Spud:[2017-01-01T00:00:00 TO 2018-12-31]")).toEqual(
      expect.objectContaining({ lower: "2017-01-01T00:00:00", upper: "2018-12-31" }),
    );
    expect(parseQuery("tags.jobStatus:{IN_PROGRESS TO SUCCESS}")).toEqual(
      expect.objectContaining({ lower: "IN_PROGRESS", upper: "SUCCESS" }),
    );
  });

  it("parser - >10-style comparisons become ranges (field:>10, field:(>=10 AND <20))", () => {
    expect(parseQuery("data.Depth:>10")).toEqual(expect.objectContaining({ type: "range", lower: "10", includeLower: false }));
    expect(parseQuery("data.Depth:(>=10 AND <20)")).toEqual(
      bool({
        must: [expect.objectContaining({ lower: "10", includeLower: true }), expect.objectContaining({ upper: "20", includeUpper: false })],
      }),
    );
    expect(parseQuery("data.Spud:<=2020-01-01T10:00:00")).toEqual(
      expect.objectContaining({ upper: "2020-01-01T10:00:00", includeUpper: true }),
    );
  });

  it("parser - escaping keeps reserved characters literal", () => {
    expect(parseQuery("data.Name:a\\:b\\(c\\)")).toEqual(term("a:b(c)", "data.Name"));
    expect(parseQuery('"say \\"hi\\""')).toEqual(term('say "hi"', undefined, "phrase"));
    expect(parseQuery("data.Code:A\\*")).toEqual(term("A*", "data.Code"));
  });

  it("parser - OSDU nested queries prefix inner fields with the path", () => {
    expect(parseQuery('nested(data.NestedTest, (NumberTest:(12 OR 34) AND StringTest:"test"))')).toEqual({
      type: "nested",
      path: "data.NestedTest",
      pos: 0,
      query: bool({
        must: [
          bool({ should: [term("12", "data.NestedTest.NumberTest"), term("34", "data.NestedTest.NumberTest")] }),
          term("test", "data.NestedTest.StringTest", "phrase"),
        ],
      }),
    });
  });

  it("parser - multi-level nested and nested combined with other clauses", () => {
    const node = parseQuery("nested(data.NestedTest, nested(data.NestedTest.NestedInnerTest, (NumberInnerTest:(>12)))) AND data.Kind:well");
    expect(node).toEqual(
      bool({
        must: [
          {
            type: "nested",
            path: "data.NestedTest",
            pos: 0,
            query: {
              type: "nested",
              path: "data.NestedTest.NestedInnerTest",
              pos: 24,
              query: expect.objectContaining({ type: "range", field: "data.NestedTest.NestedInnerTest.NumberInnerTest", lower: "12" }),
            },
          },
          term("well", "data.Kind"),
        ],
      }),
    );
  });

  it("parser - malformed queries report where they fail", () => {
    const cases: Array<[string, RegExp, number]> = [
      ['data.Name:"abc', /unbalanced double quotes/, 10],
      ["(a OR b", /closing brackets missing/, 0],
      ["a OR b)", /Malformed closing parentheses.*position: 6/, 6],
      ["a AND", /no right-hand side/, 2],
      ["AND a", /no left-hand side/, 0],
      ["data.Depth:[1 TO", /bound is missing/, 16],
      ["data.Depth:[1 2]", /expected 'TO'/, 14],
      ["data.Name:/ab.*/", /regular expressions/, 10],
      ["nested(data.X (a))", /expected ','/, 14],
    ];
    for (const [query, message, position] of cases) {
      let caught: unknown;
      try {
        parseQuery(query);
      } catch (error) {
        caught = error;
      }
      expect(caught, query).toBeInstanceOf(QuerySyntaxError);
      expect((caught as QuerySyntaxError).message, query).toMatch(message);
      expect((caught as QuerySyntaxError).position, query).toBe(position);
    }
  });

  it("parser - more than 1024 clauses are refused", () => {
    expect(() => parseQuery(Array.from({ length: 1025 }, (_, i) => `t${i}`).join(" "))).toThrow(/more than 1024 clauses/);
  });

  it("parser - ES date math in range bounds: units, rounding up or down, date anchors; a malformed one is an error at its position", () => {
    const now = Date.UTC(2026, 2, 18, 15, 30, 45, 500); // a Wednesday
    expect(parseDateMath("now", { now })).toBe(now);
    expect(parseDateMath("now-1d+2h", { now })).toBe(now - 86_400_000 + 7_200_000);
    expect(parseDateMath("now/d", { now })).toBe(Date.UTC(2026, 2, 18));
    expect(parseDateMath("now/d", { now, roundUp: true })).toBe(Date.UTC(2026, 2, 19) - 1);
    expect(parseDateMath("now-1M/M", { now })).toBe(Date.UTC(2026, 1, 1));
    expect(parseDateMath("now/w", { now })).toBe(Date.UTC(2026, 2, 16)); // ISO weeks start on Monday
    expect(parseDateMath("2017-01-31||+1M")).toBe(Date.UTC(2017, 1, 28));
    expect(parseDateMath("2016-02-29T12:00:00Z||+1y")).toBe(Date.UTC(2017, 1, 28, 12));
    expect(parseDateMath("2017-01-01")).toBeUndefined(); // a plain date is not date math
    for (const [query, position] of [
      ["d:[now-1x TO now]", 3],
      ["d:>now+d", 3],
      ["d:[* TO abc||+1d]", 8],
    ] as const) {
      expect(() => parseQuery(query), query).toThrow(QuerySyntaxError);
      try {
        parseQuery(query);
      } catch (error) {
        expect((error as QuerySyntaxError).position, query).toBe(position);
      }
    }
    expect(parseQuery("d:[now-1d/d TO now]")).toMatchObject({ type: "range", lower: "now-1d/d", upper: "now" });
    expect(parseQuery("d:nowhere")).toMatchObject({ type: "term", value: "nowhere" });
  });
});
