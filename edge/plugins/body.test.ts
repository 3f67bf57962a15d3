import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { MAX_BODY_DEPTH, nestsDeeperThan, pointerPastDepth } from "./body.ts";
import { tooDeepAt } from "../../subjects/search.ts";
import { clip, clipPointer } from "./errors.ts";

/** The value a JSON pointer names, or undefined. */
function at(value: unknown, pointer: string): unknown {
  let node = value;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (node === null || typeof node !== "object" || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

describe("body nesting", () => {
  it("body depth - the limit counts arrays and objects alike: at the limit passes, one level more does not", () => {
    const arrays = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    const objects = (n: number) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;
    const mixed = (n: number) => `${'[{"a":'.repeat(n / 2)}[]${"}]".repeat(n / 2)}`;
    for (const make of [arrays, objects]) {
      expect(nestsDeeperThan(make(MAX_BODY_DEPTH), MAX_BODY_DEPTH)).toBe(false);
      expect(nestsDeeperThan(make(MAX_BODY_DEPTH + 1), MAX_BODY_DEPTH)).toBe(true);
      expect(nestsDeeperThan(make(500_000), MAX_BODY_DEPTH)).toBe(true);
    }
    expect(nestsDeeperThan(mixed(MAX_BODY_DEPTH - 2), MAX_BODY_DEPTH)).toBe(false);
    expect(nestsDeeperThan(mixed(MAX_BODY_DEPTH), MAX_BODY_DEPTH)).toBe(true);
    // Siblings do not add up: width is not depth.
    expect(nestsDeeperThan(JSON.stringify(Array.from({ length: 10_000 }, () => [[1], { a: [2] }])), 4)).toBe(false);
  });

  it("body depth - brackets inside strings do not count, escaped quotes included", () => {
    const brackets = "[{".repeat(5_000);
    expect(nestsDeeperThan(JSON.stringify({ s: brackets }), 2)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify({ [brackets]: 1 }), 2)).toBe(false);
    // An escaped quote does not end the string; an escaped backslash before a quote does.
    expect(nestsDeeperThan(JSON.stringify({ s: `"${brackets}"` }), 2)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify({ s: `\\\\"${brackets}\\` }), 2)).toBe(false);
    expect(nestsDeeperThan(`{"s":"\\\\"}${"[".repeat(4)}`, 2)).toBe(true);
    expect(nestsDeeperThan(`{"s":"\\"${"[".repeat(4)}"}`, 2)).toBe(false);
    // An unterminated string is JSON.parse's to refuse.
    expect(nestsDeeperThan(`"${"[".repeat(10)}`, 2)).toBe(false);
  });

  it("body depth - on any JSON, the scan agrees with a walk of the parsed value and names a container just past the limit", () => {
    const key = fc.oneof(fc.constantFrom("a", "", "~", "/", "a/b~c", '"', "\\", "[", "{", "]}"), fc.string({ maxLength: 6 }));
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof({ depthSize: "small", withCrossShrink: true }, fc.jsonValue({ maxDepth: 0 }), tie("array"), tie("object")),
      array: fc.array(tie("tree"), { maxLength: 4 }),
      object: fc.dictionary(key, tie("tree"), { maxKeys: 4 }),
    }));
    fc.assert(
      fc.property(tree, fc.integer({ min: 1, max: 6 }), fc.boolean(), (value, limit, pretty) => {
        const text = pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value);
        const walked = tooDeepAt(value, limit);
        expect(nestsDeeperThan(text, limit)).toBe(walked !== undefined);
        if (walked === undefined) return;
        const pointer = pointerPastDepth(text, limit);
        expect(pointer.split("/").length - 1).toBe(limit);
        const container = at(value, pointer);
        expect(container !== null && typeof container === "object").toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it("body depth - the pointer of a deep record body is the one the storage check names", () => {
    const text = `[{"id":"x","data":{"Name":"Deep","x":${"[".repeat(30_000)}${"]".repeat(30_000)}}}]`;
    expect(nestsDeeperThan(text, MAX_BODY_DEPTH)).toBe(true);
    expect(pointerPastDepth(text, MAX_BODY_DEPTH, "/body")).toBe(`/body/0/data/x${"/0".repeat(MAX_BODY_DEPTH - 3)}`);
    expect(pointerPastDepth('[1,[2,{"k/~":{"b":[[0]]}}]]', 5)).toBe("/1/1/k~1~0/b/0");
  });
});

describe("problem texts", () => {
  it("errors - long quoted values and field names are cut short, short ones kept", () => {
    expect(clip(`Expected string to match '^[A-Za-z0-9_-]{1,128}$'`)).toBe(`Expected string to match '^[A-Za-z0-9_-]{1,128}$'`);
    expect(clip(`Unknown value '${"x".repeat(100_000)}'`)).toBe(`Unknown value '${"x".repeat(40)}…'`);
    expect(clip("y".repeat(100_000)).length).toBeLessThanOrEqual(301);
    expect(clipPointer("/body/subscription/callback_uri")).toBe("/body/subscription/callback_uri");
    expect(clipPointer(`/body/${"k".repeat(100_000)}`)).toBe(`/body/${"k".repeat(40)}…`);
    expect(clipPointer(`/body${"/0".repeat(1_000)}`).length).toBeLessThanOrEqual(301);
  });
});
