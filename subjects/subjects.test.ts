import { describe, expect, it } from "vitest";
import { Type, type TSchema } from "@sinclair/typebox";
import { DerrickError, check, checkToken, subjects, unavailable, invalidField } from "./index.ts";
import { checkDeviceSubjects, subjectsOverlap } from "./twins.ts";

/** The field errors `check` reports for `value`, or undefined when it passes. */
function errorsOf(schema: TSchema, value: unknown) {
  try {
    check(schema, value);
  } catch (error) {
    return (error as DerrickError).errors;
  }
  return undefined;
}

describe("subjects", () => {
  it("subjects - builders produce derrick.<capability>.<operation>", () => {
    expect(subjects.system.echo()).toBe("derrick.system.echo");
    expect(subjects.identity["appkey.verify"]()).toBe("derrick.identity.appkey.verify");
    expect(subjects.events("opendes", "PublishData")).toBe("derrick.events.opendes.PublishData");
  });

  it("subjects - tokens outside [A-Za-z0-9_-] are refused, never mangled", () => {
    expect(() => subjects.events("open.des", "PublishData")).toThrow(DerrickError);
    expect(() => subjects.events("opendes", "a*")).toThrow(/\/type/);
    expect(() => checkToken("x".repeat(129), "/id")).toThrow();
    expect(checkToken("a_B-9", "/id")).toBe("a_B-9");
  });

  it("subjects - a problem carries RFC 9457 members and the OSDU aliases", () => {
    const problem = invalidField("/body/callback_uri", "must be a valid uri").toProblem("/v1/x");
    expect(problem).toMatchObject({
      type: "urn:derrick:problem:validation",
      title: "Bad Request",
      status: 400,
      code: 400,
      reason: "Bad Request",
      instance: "/v1/x",
      errors: [{ pointer: "/body/callback_uri", message: "must be a valid uri" }],
    });
    expect(problem.message).toBe(problem.detail);
  });

  it("subjects - an error survives the trip through its problem body", () => {
    const original = new DerrickError(409, "task t1 is running", { extensions: { taskId: "t1", state: "running" } });
    const rebuilt = DerrickError.fromProblem(original.toProblem(), { "Retry-After": "1" });
    expect(rebuilt.status).toBe(409);
    expect(rebuilt.detail).toBe("task t1 is running");
    expect(rebuilt.toProblem()).toMatchObject({ taskId: "t1", state: "running" });
    expect(rebuilt.headers["Retry-After"]).toBe("1");
    expect(unavailable("x").retryable).toBe(true);
  });

  it("subjects - check names every offending field by JSON pointer", () => {
    const schema = Type.Object({ a: Type.Integer(), b: Type.String({ format: "email" }) }, { additionalProperties: false });
    expect(check(schema, { a: 1, b: "x@y.io" })).toEqual({ a: 1, b: "x@y.io" });
    try {
      check(schema, { a: "1", b: "nope", c: true });
      throw new Error("expected a validation error");
    } catch (error) {
      const e = error as DerrickError;
      expect(e.status).toBe(400);
      const pointers = e.errors!.map((x) => x.pointer);
      expect(pointers).toEqual(expect.arrayContaining(["/body/a", "/body/b", "/body/c"]));
      expect(e.errors!.find((x) => x.pointer === "/body/b")!.message).toBe("must be a valid email");
    }
  });

  it("subjects - a value refused by `X | null` is named where X refuses it; other unions answer once for the field", () => {
    const nullable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));
    const schema = Type.Object({
      list: nullable(Type.Array(Type.String({ maxLength: 3 }), { maxItems: 2 })),
      sort: nullable(Type.Object({ field: nullable(Type.Array(Type.String({ maxLength: 3 }))) })),
      either: nullable(Type.Union([Type.String(), Type.Integer()])),
    });
    expect(errorsOf(schema, { list: null, sort: null, either: null })).toBeUndefined();
    expect(errorsOf(schema, { list: ["abc", "abcd"] })).toEqual([
      { pointer: "/body/list/1", message: "expected string length less or equal to 3" },
    ]);
    expect(errorsOf(schema, { list: ["a", "b", "c"] })).toEqual([
      { pointer: "/body/list", message: "expected array length to be less or equal to 2" },
    ]);
    expect(errorsOf(schema, { sort: { field: ["abcd"] } })).toEqual([
      { pointer: "/body/sort/field/0", message: "expected string length less or equal to 3" },
    ]);
    expect(errorsOf(schema, { list: 5 })).toEqual([{ pointer: "/body/list", message: "expected array" }]);
    expect(errorsOf(schema, { either: true })).toEqual([{ pointer: "/body/either", message: "expected union value" }]);
  });

  it("validation - a value outside an enumeration is named with the values that would be accepted", () => {
    const schema = Type.Object({ kind: Type.Union([Type.Literal("a"), Type.Literal("b")]) });
    expect(errorsOf(schema, { kind: "c" })).toEqual([{ pointer: "/body/kind", message: '"c" is not one of "a", "b"' }]);
    expect(errorsOf(schema, { kind: 3 })).toEqual([{ pointer: "/body/kind", message: '3 is not one of "a", "b"' }]);
  });
});

describe("device subjects", () => {
  it("subjects - a device may be granted its own subjects, never derrick's, JetStream's, other inboxes or a leading wildcard", () => {
    expect(() => checkDeviceSubjects(["slbapps.AppA.DataIn", "slbapps.AppA.*", "plant.line-1.>"], "/subscribe")).not.toThrow();
    for (const bad of [
      "derrick.>",
      "derrick.twins.put",
      "$JS.API.>",
      "$KV.other.>",
      "_INBOX.x",
      "_INBOX_AppB.>",
      "_R_.>",
      "_R_.x.y",
      "_anything",
      ">",
      "*.AppA",
      "a..b",
      "a.>.b",
      "a b",
      "a.b*",
      "",
    ]) {
      let error: unknown;
      try {
        checkDeviceSubjects(["slbapps.ok", bad], "/publish");
      } catch (e) {
        error = e;
      }
      expect(error, bad).toBeInstanceOf(DerrickError);
      expect((error as DerrickError).status).toBe(400);
      expect(JSON.stringify((error as DerrickError).toProblem()), bad).toContain("/publish/1");
    }
  });

  it("validation - a value outside its pattern is quoted (shortened) next to its pointer", () => {
    const schema = Type.Object({ group: Type.String({ pattern: "^[a-z]+$" }) });
    expect(errorsOf(schema, { group: "bad group" })).toEqual([
      { pointer: "/body/group", message: `"bad group" does not match '^[a-z]+$'` },
    ]);
    const long = `${"x".repeat(30)} ${"y".repeat(100)}`;
    expect(errorsOf(schema, { group: long })![0]!.message).toBe(`"${long.slice(0, 40)}…" does not match '^[a-z]+$'`);
    expect(() => checkToken("a.b", "/params/organization")).toThrow(/"a\.b" does not match/);
  });

  it("subjects - two grants overlap when some subject matches both", () => {
    for (const [a, b] of [
      ["a.b", "a.b"],
      ["a.*", "a.b"],
      ["a.>", "a.b.c"],
      ["slbapps.>", "slbapps.AppB.DataIn"],
      ["*.x", "a.*"],
      ["a.>", "*.b"],
    ])
      expect(subjectsOverlap(a!, b!), `${a} ${b}`).toBe(true);
    for (const [a, b] of [
      ["a.b", "a.c"],
      ["a.*", "a.b.c"],
      ["a.>", "a"],
      ["a.b", "a.b.c"],
      ["slbapps.AppA.>", "slbapps.AppB.DataIn"],
    ])
      expect(subjectsOverlap(a!, b!), `${a} ${b}`).toBe(false);
  });
});
