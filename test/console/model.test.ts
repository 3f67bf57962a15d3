/** The console's pure functions: what its views derive from the API's answers. */
import { describe, expect, it } from "vitest";
import { fieldValue, openDeadLetters, resultColumns, twinRows } from "../../console/src/model.ts";
import type { DeliveryAttempt } from "../../subjects/notifications.ts";

const attempt = (event_id: string, attempt: number, state: DeliveryAttempt["state"]): DeliveryAttempt => ({ event_id, attempt, state });

describe("console model", () => {
  it("dead letters - an event whose last scheduled attempt is dead stays open until a replay succeeds", () => {
    expect(openDeadLetters([attempt("a", 2, "dead"), attempt("a", 1, "failed"), attempt("b", 1, "succeeded")])).toEqual([
      attempt("a", 2, "dead"),
    ]);
    // Newest first: a failed replay keeps the letter, a succeeded one closes it.
    expect(openDeadLetters([attempt("a", 3, "failed"), attempt("a", 2, "dead")])).toEqual([attempt("a", 2, "dead")]);
    expect(openDeadLetters([attempt("a", 3, "succeeded"), attempt("a", 2, "dead")])).toEqual([]);
  });

  it("dead letters - each event is listed once, by its newest dead attempt", () => {
    expect(openDeadLetters([attempt("a", 4, "dead"), attempt("a", 2, "dead"), attempt("c", 1, "pending")])).toEqual([
      attempt("a", 4, "dead"),
    ]);
  });

  it("twins - a group's desired and reported values side by side, by name, either side missing", () => {
    const at = "2026-11-28T10:00:00.000Z";
    const twin = {
      desired: { g: { rate: { value: "42", version: 3, updated_at: at }, mode: { value: "auto", version: 2, updated_at: at } } },
      reported: { g: { rate: { value: "41", version: 7, updated_at: at }, temp: { value: "80", version: 8, updated_at: at } } },
    };
    expect(twinRows(twin, "g").map((r) => [r.name, r.desired?.value, r.reported?.value])).toEqual([
      ["mode", "auto", undefined],
      ["rate", "42", "41"],
      ["temp", undefined, "80"],
    ]);
    expect(twinRows(twin, "other")).toEqual([]);
  });

  it("search - columns are the returned fields (id first), else id, kind and the first scalar data fields", () => {
    const results = [
      { id: "a", kind: "k", data: { Name: "A", Depth: 3, Shape: { type: "Point" } } },
      { id: "b", kind: "k", data: { Name: "B", Operator: "X" } },
    ];
    expect(resultColumns(results, ["data.Name", "id"])).toEqual(["id", "data.Name"]);
    expect(resultColumns(results)).toEqual(["id", "kind", "data.Name", "data.Depth", "data.Operator"]);
    expect(fieldValue(results[0]!, "data.Name")).toBe("A");
    expect(fieldValue(results[0]!, "data.Missing.Deeper")).toBe("—");
    expect(fieldValue(results[0]!, "data.Shape")).toBe('{"type":"Point"}');
    expect(fieldValue({ data: { Long: "x".repeat(100) } }, "data")).toHaveLength(60);
  });
});
