/** The console's pure functions: what its views derive from the API's answers. */
import { describe, expect, it } from "vitest";
import {
  expectationCurve,
  expiryText,
  mergeTasks,
  fieldValue,
  openDeadLetters,
  outcomeRows,
  percentileMarks,
  requestRates,
  resultColumns,
  twinRows,
} from "../../console/src/model.ts";
import type { DeliveryAttempt } from "../../subjects/notifications.ts";
import type { Task } from "../../subjects/projects.ts";

const attempt = (event_id: string, attempt: number, state: DeliveryAttempt["state"]): DeliveryAttempt => ({ event_id, attempt, state });

describe("console model", () => {
  it("tasks - a fresh read replaces the held copy and the table stays newest first", () => {
    const task = (taskId: string, createdAt: string, state: Task["state"] = "queued"): Task => ({
      taskId,
      projectId: "p",
      kind: "display-items",
      state,
      createdAt,
    });
    const held = [task("b", "2026-11-28T10:00:02.000Z"), task("a", "2026-11-28T10:00:01.000Z")];
    const merged = mergeTasks(held, [task("c", "2026-11-28T10:00:03.000Z"), task("a", "2026-11-28T10:00:01.000Z", "succeeded")]);
    expect(merged.map((t) => [t.taskId, t.state])).toEqual([
      ["c", "queued"],
      ["b", "queued"],
      ["a", "succeeded"],
    ]);
    // Tasks of the same millisecond keep the API's order.
    expect(mergeTasks([], [task("y", "2026-11-28T10:00:01.000Z"), task("x", "2026-11-28T10:00:01.000Z")]).map((t) => t.taskId)).toEqual([
      "y",
      "x",
    ]);
  });

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

  it("reporting - the expectation curve: risked as answered, success case divided by the chance of success, by volume", () => {
    const product = {
      unit: "MMboe",
      successCase: { p90: 10, p50: 50, p10: 150, mean: 70 },
      riskedMean: 35,
      riskedExceedance: [
        { volume: 50, probability: 0.25 },
        { volume: 1, probability: 0.5 },
        { volume: 400, probability: 0.005 },
      ],
    };
    expect(expectationCurve(product, 0.5)).toEqual({ volumes: [1, 50, 400], risked: [0.5, 0.25, 0.005], success: [1, 0.5, 0.01] });
    expect(expectationCurve(product, 0).success).toEqual([0, 0, 0]);
    expect(percentileMarks(product).map((m) => [m.label, m.volume])).toEqual([
      ["P90", 10],
      ["P50", 50],
      ["P10", 150],
    ]);
  });

  it("reporting - the outcome tree's terminal nodes with the branch names above each", () => {
    const nodes = [
      { nodeId: "n0", parentId: null, kind: "root", jointProbability: 1 },
      { nodeId: "n1", parentId: "n0", kind: "scenario", name: "Oil case", jointProbability: 0.7 },
      { nodeId: "n2", parentId: "n1", kind: "commonFailure", jointProbability: 0.28 },
      { nodeId: "n3", parentId: "n1", kind: "commonSuccess", jointProbability: 0.42 },
      { nodeId: "n4", parentId: "n3", kind: "outcome", segmentStates: { a: true }, jointProbability: 0.42 },
      { nodeId: "n5", parentId: "n0", kind: "scenario", name: "Gas case", jointProbability: 0.3 },
      { nodeId: "n6", parentId: "n5", kind: "outcome", jointProbability: 0.3 },
    ];
    expect(outcomeRows(nodes).map((r) => [r.node.nodeId, r.path.join(" › ")])).toEqual([
      ["n2", "Oil case"],
      ["n4", "Oil case › common success"],
      ["n6", "Gas case"],
    ]);
  });

  it("content - a task's expiry counts down, then says when the content went", () => {
    const at = Date.parse("2026-11-28T10:00:00.000Z");
    expect(expiryText(undefined, at)).toBe("—");
    expect(expiryText("2026-11-28T10:00:42.000Z", at)).toBe("in 42 s (10:00:42Z)");
    expect(expiryText("2026-11-28T10:00:00.000Z", at)).toBe("expired at 10:00:00Z");
  });

  it("fleet - requests per second between looks; a restart's drop counts as 0; idle actors left out, the busiest first", () => {
    const samples = [
      { time: 100, totals: { system: 10, search: 0, twins: 50, idle: 3 } },
      { time: 102, totals: { system: 14, search: 20, twins: 2, idle: 3 } },
      { time: 104, totals: { system: 18, search: 60, twins: 6, idle: 3 } },
    ];
    expect(requestRates(samples)).toEqual({
      times: [102, 104],
      series: [
        { name: "search", rates: [10, 20] },
        { name: "system", rates: [2, 2] },
        { name: "twins", rates: [0, 2] },
      ],
    });
    expect(requestRates(samples, 1).series.map((s) => s.name)).toEqual(["search"]);
    expect(requestRates(samples.slice(0, 1))).toEqual({ times: [], series: [] });
  });
});
