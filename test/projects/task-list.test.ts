import { describe, expect } from "vitest";
import { expectProblem, getJson } from "../harness/json.ts";
import type { TaskPage } from "../../subjects/projects.ts";
import { putProject } from "./fixtures.ts";
import { contentTest, requestContent } from "./helpers.ts";
import { BUCKETS } from "../../actors/projects/store.ts";
import { jetstreamManager } from "@nats-io/jetstream";

// The edge and the projects actor only: the tasks stay queued, which the list shows as they are.
const it = contentTest({ actors: ["identity", "projects"] });

const listOf = (derrick: Parameters<typeof putProject>[0], projectId: string, query = "", partition = "opendes") =>
  getJson<TaskPage>(derrick, `/v2/projects/${projectId}/tasks${query}`, { partition });

describe("the task list of a project", () => {
  it("task list - lists the project's tasks newest first, as the single read gives them, in pages", async ({ derrick }) => {
    await putProject(derrick, "p-list");
    const requested = [];
    for (const kind of ["display-items", "key-parameters", "display-items", "key-parameters", "display-items"] as const)
      requested.push(await requestContent(derrick, "p-list", kind));
    const newestFirst = requested.map((r) => r.taskId).reverse();

    const all = await listOf(derrick, "p-list");
    expect(all.items.map((t) => t.taskId)).toEqual(newestFirst);
    expect(all.nextBefore).toBeUndefined();
    const single = await getJson(derrick, `/v2/projects/p-list/tasks/${newestFirst[0]}`);
    expect(all.items[0]).toEqual(single);
    expect(all.items[0]).toMatchObject({ state: "queued", kind: "display-items", contentId: requested.at(-1)!.contentId });

    const first = await listOf(derrick, "p-list", "?limit=2");
    expect(first.items.map((t) => t.taskId)).toEqual(newestFirst.slice(0, 2));
    const second = await listOf(derrick, "p-list", `?limit=2&before=${first.nextBefore}`);
    expect(second.items.map((t) => t.taskId)).toEqual(newestFirst.slice(2, 4));
    const last = await listOf(derrick, "p-list", `?limit=2&before=${second.nextBefore}`);
    expect(last.items.map((t) => t.taskId)).toEqual(newestFirst.slice(4));
    expect(last.nextBefore).toBeUndefined();
  });

  it("task list - a bad limit or before is a 400 naming the parameter and what is accepted", async ({ derrick }) => {
    await putProject(derrick, "p-list-bad");
    await requestContent(derrick, "p-list-bad");
    for (const [query, pointer] of [
      ["?limit=0", "/query/limit"],
      ["?limit=101", "/query/limit"],
      ["?limit=ten", "/query/limit"],
      ["?before=tsk_unknown", "/query/before"],
      ["?before=a.b", "/query/before"],
    ]) {
      const problem = await expectProblem(await derrick.call(`/v2/projects/p-list-bad/tasks${query}`), 400);
      expect(problem.errors?.[0]?.pointer, query).toBe(pointer);
    }
    const problem = await expectProblem(await derrick.call("/v2/projects/p-list-bad/tasks?limit=ten"), 400);
    expect(problem.detail).toMatch(/"ten".*1 to 100/);
  });

  it("task list - members only: 404 for an unknown project, 403 for a non-member; admins must be members", async ({ derrick }) => {
    await putProject(derrick, "p-list-members");
    await requestContent(derrick, "p-list-members");
    await expectProblem(await derrick.call("/v2/projects/p-list-none/tasks"), 404);
    await expectProblem(await derrick.call("/v2/projects/p-list-members/tasks", { as: "beta" }), 403);
    await expectProblem(await derrick.call("/v2/projects/p-list-members/tasks", { as: "admin" }), 403);
    expect((await derrick.call("/v2/projects/p-list-members/tasks", { partition: null })).status).toBe(400);
  });

  it("task list - another partition's project of the same id lists only its own tasks", async ({ derrick }) => {
    await putProject(derrick, "p-list-part");
    const here = await requestContent(derrick, "p-list-part");
    expect((await derrick.call("/v2/projects/p-list-part/tasks", { partition: "other" })).status).toBe(404);
    const created = await derrick.call("/v1/projects/p-list-part", {
      as: "admin",
      partition: "other",
      method: "PUT",
      body: JSON.stringify({ name: "elsewhere", members: ["alpha"] }),
    });
    expect(created.status).toBe(201);
    expect((await listOf(derrick, "p-list-part", "", "other")).items).toEqual([]);
    expect((await listOf(derrick, "p-list-part")).items.map((t) => t.taskId)).toEqual([here.taskId]);
  });

  it("task list - a deleted project's list is 404; created again, it starts empty", async ({ derrick }) => {
    await putProject(derrick, "p-list-gone");
    await requestContent(derrick, "p-list-gone");
    expect((await derrick.call("/v1/projects/p-list-gone", { as: "admin", method: "DELETE" })).status).toBe(204);
    await expectProblem(await derrick.call("/v2/projects/p-list-gone/tasks"), 404);
    await putProject(derrick, "p-list-gone");
    expect((await listOf(derrick, "p-list-gone")).items).toEqual([]);
    const fresh = await requestContent(derrick, "p-list-gone");
    expect((await listOf(derrick, "p-list-gone")).items.map((t) => t.taskId)).toEqual([fresh.taskId]);
  });

  it("task list - a deleted index bucket is made again: later tasks are listed, the ones it held are not", {
    timeout: 30_000,
  }, async ({ derrick }) => {
    await putProject(derrick, "p-list-index");
    await requestContent(derrick, "p-list-index");
    const jsm = await jetstreamManager(derrick.nc);
    expect(await jsm.streams.delete(`KV_${BUCKETS.taskIndex}`)).toBe(true);
    const after = await requestContent(derrick, "p-list-index");
    expect((await listOf(derrick, "p-list-index")).items.map((t) => t.taskId)).toEqual([after.taskId]);
    expect((await jsm.streams.info(`KV_${BUCKETS.taskIndex}`)).config).toMatchObject({ max_age: 7 * 86_400_000 * 1_000_000 });
  });
});
