import { describe, expect, it } from "vitest";
import { DerrickError } from "../../subjects/index.ts";
import { pageOfIndex, withTask, type TaskIndex } from "./task-index.ts";

const at = (ms: number) => new Date(ms).toISOString();
const entry = (n: number, ms = n * 1000) => ({ taskId: `tsk_${n}`, createdAt: at(ms) });
const indexOf = (...ns: number[]): TaskIndex => ({ incarnation: "i1", tasks: ns.map((n) => entry(n)) });

describe("task index (pure)", () => {
  it("withTask - puts the task first, keeps creation order, drops expired entries and caps the list", () => {
    expect(withTask(undefined, "i1", entry(1), 1000).tasks).toEqual([entry(1)]);
    expect(withTask(indexOf(2, 1), "i1", entry(3), 3000).tasks.map((t) => t.taskId)).toEqual(["tsk_3", "tsk_2", "tsk_1"]);
    // A request committed after a newer one still lands by its creation.
    expect(withTask(indexOf(3, 1), "i1", entry(2), 3000).tasks.map((t) => t.taskId)).toEqual(["tsk_3", "tsk_2", "tsk_1"]);
    expect(withTask(indexOf(3, 2, 1), "i1", entry(4), 4000, { retentionMs: 2500 }).tasks.map((t) => t.taskId)).toEqual([
      "tsk_4",
      "tsk_3",
      "tsk_2",
    ]);
    expect(withTask(indexOf(3, 2, 1), "i1", entry(4), 4000, { max: 2 }).tasks.map((t) => t.taskId)).toEqual(["tsk_4", "tsk_3"]);
    // The same task twice is listed once.
    expect(withTask(indexOf(1), "i1", entry(1), 1000).tasks).toEqual([entry(1)]);
  });

  it("withTask - a new incarnation of the project starts an empty list", () => {
    expect(withTask(indexOf(2, 1), "i2", entry(3), 3000)).toEqual({ incarnation: "i2", tasks: [entry(3)] });
    expect(withTask(indexOf(2, 1), undefined, entry(3), 3000)).toEqual({ tasks: [entry(3)] });
  });

  it("pageOfIndex - pages newest first with the before of the next page until the oldest", () => {
    const index = indexOf(5, 4, 3, 2, 1);
    expect(pageOfIndex(index, "i1", undefined, 2)).toEqual({ taskIds: ["tsk_5", "tsk_4"], nextBefore: "tsk_4" });
    expect(pageOfIndex(index, "i1", "tsk_4", 2)).toEqual({ taskIds: ["tsk_3", "tsk_2"], nextBefore: "tsk_2" });
    expect(pageOfIndex(index, "i1", "tsk_2", 2)).toEqual({ taskIds: ["tsk_1"] });
    expect(pageOfIndex(index, "i1", undefined, 5)).toEqual({ taskIds: ["tsk_5", "tsk_4", "tsk_3", "tsk_2", "tsk_1"] });
    expect(pageOfIndex(undefined, "i1", undefined, 20)).toEqual({ taskIds: [] });
    // Another incarnation's list is not this project's.
    expect(pageOfIndex(index, "i2", undefined, 20)).toEqual({ taskIds: [] });
  });

  it("pageOfIndex - a before not in the list is a 400 naming /query/before and the value", () => {
    const refused = (() => {
      try {
        return pageOfIndex(indexOf(2, 1), "i1", "tsk_9", 2);
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(DerrickError);
    expect(refused).toMatchObject({ status: 400 });
    expect((refused as DerrickError).message).toMatch(/\/query\/before.*"tsk_9".*accepted/);
  });
});
