import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { DerrickError } from "../../subjects/index.ts";
import { FIELD_EXPRESSION_MAX_LENGTH, FIELD_PATH_MAX_LENGTH, QueryRequest } from "../../subjects/search.ts";
import { MAX_KIND_LENGTH, decodeSearchBody, nestedField, planSearch } from "./validate.ts";

/** How nested(…) sort and aggregation fields were read before (one RegExp): the reference for what they mean. */
function formerNestedField(text: string): { field: string; mode?: "min" | "max" } | undefined {
  const m = /^nested\s*\(\s*([^,\s()]+)\s*,\s*(.+?)\s*(?:,\s*(min|max)\s*)?\)$/i.exec(text.trim());
  if (!m) return undefined;
  const inner = m[2]!;
  if (/^nested\s*\(/i.test(inner)) {
    const deeper = formerNestedField(inner);
    return deeper ? { field: deeper.field, ...(m[3] ? { mode: m[3].toLowerCase() as "min" | "max" } : {}) } : undefined;
  }
  if (!/^[\w.-]+$/.test(inner)) return undefined;
  return { field: `${m[1]}.${inner}`, ...(m[3] ? { mode: m[3].toLowerCase() as "min" | "max" } : {}) };
}

/** The 400 a request body gets, as the actor answers it: its `errors`. */
function refusal(body: unknown): Array<{ pointer: string; message: string }> {
  try {
    planSearch(decodeSearchBody(QueryRequest, body), false);
  } catch (error) {
    expect(error).toBeInstanceOf(DerrickError);
    expect((error as DerrickError).status).toBe(400);
    expect((error as DerrickError).detail).toBe("Invalid parameters were given on search request");
    return (error as DerrickError).errors ?? [];
  }
  throw new Error(`accepted: ${JSON.stringify(body).slice(0, 200)}`);
}

const KIND = "osdu:wks:master-data--Well:1.0.0";

describe("search request validation", () => {
  it("validate - nested(…) sort and aggregation fields read as the former RegExp read them", () => {
    const space = fc.constantFrom("", " ", "  ", "\n", "\t", "\u00a0");
    const piece = fc.constantFrom(
      "nested",
      "NESTED",
      "nested(",
      "(",
      ")",
      ",",
      ", ",
      " ",
      "\n",
      "a",
      "b.c",
      "x-y",
      "min",
      "MAX",
      "max",
      "é",
      "nested(p.q, r)",
    );
    const text = fc
      .tuple(
        fc.boolean(),
        space,
        space,
        fc.constantFrom("p", "p.q", "p,q", "(p)", ""),
        space,
        fc.boolean(),
        fc.array(piece, { maxLength: 8 }),
        fc.boolean(),
        space,
      )
      .map(
        ([head, s1, s2, path, s3, comma, rest, close, s4]) =>
          `${head ? `${s1}nested${s2}(${path}${s3}${comma ? "," : ""}` : ""}${rest.join("")}${close ? ")" : ""}${s4}`,
      );
    fc.assert(
      fc.property(text, (t) => {
        expect(nestedField(t), JSON.stringify(t)).toEqual(formerNestedField(t));
      }),
      { numRuns: 50_000 },
    );
    expect(nestedField("nested(data.VerticalMeasurements, VerticalMeasurementID, MIN)")).toEqual({
      field: "data.VerticalMeasurements.VerticalMeasurementID",
      mode: "min",
    });
    expect(nestedField("nested(data.A, nested(data.A.B, C))")).toEqual({ field: "data.A.B.C" });
    expect(nestedField("nested(data.A, B, max )")).toEqual({ field: "data.A.B", mode: "max" });
    expect(nestedField("nested(data.A, B C)")).toBeUndefined();
  });

  it("validate - a nested(…) field missing its closing parenthesis is refused however many spaces it holds", () => {
    // 2,000 spaces took the former RegExp 5 s, and it grew with the cube of their number.
    const open = `nested(data.A,${" ".repeat(40_000)}B`;
    expect(nestedField(open)).toBeUndefined();
    expect(() => planSearch({ kind: KIND, sort: { field: [open], order: ["ASC"] } }, false)).toThrow(DerrickError);
    expect(() => planSearch({ kind: KIND, aggregateBy: open }, false)).toThrow(DerrickError);
  });

  it("validate - a kind of a million spaces is answered with OSDU's message", () => {
    // split(/\s*,\s*/) took quadratic time on it (100,000 spaces: 3 s).
    expect(() => planSearch({ kind: " ".repeat(1_000_000) }, false)).toThrow("Invalid parameters were given on search request");
    try {
      planSearch({ kind: `${" ".repeat(1_000_000)}a` }, false);
    } catch (error) {
      // The kind as given (OSDU), cut at MAX_KIND_LENGTH characters.
      expect((error as DerrickError).errors).toContainEqual({
        pointer: "/body/kind",
        message: `Not a valid record kind format. Found: ${" ".repeat(MAX_KIND_LENGTH)}…`,
      });
    }
    expect(planSearch({ kind: ` ${KIND} ,  ${KIND.replace("Well", "Wellbore")}  ` }, false).plan.kinds).toEqual([
      KIND.toLowerCase(),
      KIND.replace("Well", "Wellbore").toLowerCase(),
    ]);
  });

  it("validate - field paths, sort fields and aggregateBy beyond their lengths are 400 naming the entry; at their lengths they pass", () => {
    const path = (n: number) => `data.${"x".repeat(n - 5)}`;
    const over = path(FIELD_PATH_MAX_LENGTH + 1);
    const expressionOver = `nested(data.A, ${"y".repeat(FIELD_EXPRESSION_MAX_LENGTH)})`;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ returnedFields: ["id", over] }, "/body/returnedFields/1"],
      [{ highlightedFields: [over] }, "/body/highlightedFields/0"],
      [{ highlightedFields: [`${"*?".repeat(FIELD_PATH_MAX_LENGTH)}!`] }, "/body/highlightedFields/0"],
      [{ spatialFilter: { field: over, byDistance: { point: { latitude: 0, longitude: 0 }, distance: 1 } } }, "/body/spatialFilter/field"],
      [{ sort: { field: [expressionOver], order: ["ASC"] } }, "/body/sort/field/0"],
      [{ sort: { field: ["id"], order: ["A".repeat(FIELD_PATH_MAX_LENGTH + 1)] } }, "/body/sort/order/0"],
      [{ sort: { field: ["id"], order: ["ASC"], filter: ["f".repeat(FIELD_EXPRESSION_MAX_LENGTH + 1)] } }, "/body/sort/filter/0"],
      [{ aggregateBy: expressionOver }, "/body/aggregateBy"],
    ];
    for (const [body, pointer] of cases) {
      const errors = refusal({ kind: KIND, ...body });
      expect(
        errors.map((e) => e.pointer),
        pointer,
      ).toContain(pointer);
      expect(errors.find((e) => e.pointer === pointer)!.message).toMatch(/length/);
    }
    const atLimit = path(FIELD_PATH_MAX_LENGTH);
    const nestedAtLimit = `nested(data.A, ${"y".repeat(FIELD_EXPRESSION_MAX_LENGTH - "nested(data.A, )".length)})`;
    expect(nestedAtLimit.length).toBe(FIELD_EXPRESSION_MAX_LENGTH);
    const { plan } = planSearch(
      decodeSearchBody(QueryRequest, {
        kind: KIND,
        returnedFields: [atLimit],
        highlightedFields: [atLimit],
        sort: { field: [nestedAtLimit], order: ["ASC"] },
        aggregateBy: nestedAtLimit,
        spatialFilter: { field: atLimit, byDistance: { point: { latitude: 0, longitude: 0 }, distance: 1 } },
      }),
      false,
    );
    expect(plan).toMatchObject({
      returnedFields: [atLimit],
      highlightedFields: [atLimit],
      aggregateBy: `data.A.${"y".repeat(FIELD_EXPRESSION_MAX_LENGTH - 16)}`,
    });
  });
});
