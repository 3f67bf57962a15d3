import { describe, expect } from "vitest";
import { eventually } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { drillingPlanValues, putProject } from "./fixtures.ts";
import { contentOf, requestContent, taskIn, taskOf } from "./helpers.ts";

const it = derrickTest({ actors: ["identity", "projects", "content-worker"] });

// The one test that waits for real: results live 60 s after completion (the content bucket's max age).
describe("content expiry", () => {
  it("expiry - content and parts are readable until about expiresAt and gone (404) within 2 s after it", { timeout: 90_000 }, async ({
    derrick,
  }) => {
    await putProject(derrick, "p-exp", { values: drillingPlanValues(6000) });
    const { taskId, contentId } = await requestContent(derrick, "p-exp", "display-items", { ids: ["trajectory-survey"] });
    const task = await taskIn(derrick, "p-exp", taskId, { states: ["succeeded"], timeoutMs: 10_000 });
    const expiresAt = Date.parse(task.expiresAt!);
    expect(expiresAt - Date.parse(task.completedAt!)).toBe(60_000);
    const content = await contentOf(derrick, "p-exp", "display-items", contentId);
    const partPath = `/v1/projects/p-exp/display-items/content-parts/${content.parts![0]}`;

    let lastReadable = Date.now();
    const gone = await eventually(
      async () => {
        const now = Date.now();
        const r = await derrick.call(`/v1/projects/p-exp/display-items/content/${contentId}`);
        if (r.status === 200) {
          lastReadable = now;
          return undefined;
        }
        return { at: now, status: r.status, body: await json(r) };
      },
      { timeoutMs: 70_000, intervalMs: 200, what: "the content to expire" },
    );
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ taskId, state: "succeeded" });
    expect(lastReadable).toBeGreaterThanOrEqual(expiresAt - 2_000);
    expect(gone.at).toBeLessThanOrEqual(expiresAt + 2_000);
    expect((await derrick.call(partPath)).status).toBe(404);
    // The task itself stays, saying when its result went away.
    expect(await taskOf(derrick, "p-exp", taskId)).toMatchObject({
      state: "succeeded",
      expiresAt: task.expiresAt,
    });
  });
});
