import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";
import { drillingPlanValues, putProject } from "./fixtures.ts";

// The one test that waits for real: results live 60 s after completion (the content bucket's max age).
describe("content expiry", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["identity", "projects", "content-worker"] });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("expiry - content and parts are readable until about expiresAt and gone (404) within 2 s after it", { timeout: 90_000 }, async () => {
    await putProject(derrick, "p-exp", { values: drillingPlanValues(6000) });
    const res = await derrick.call("/v1/projects/p-exp/display-items/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["trajectory-survey"] }),
    });
    const { taskId, contentId } = (await res.json()) as { taskId: string; contentId: string };
    const task = await eventually(async () => {
      const t = (await (await derrick.call(`/v2/projects/p-exp/tasks/${taskId}`)).json()) as {
        state: string;
        completedAt?: string;
        expiresAt?: string;
      };
      return t.state === "succeeded" ? t : undefined;
    });
    const expiresAt = Date.parse(task.expiresAt!);
    expect(expiresAt - Date.parse(task.completedAt!)).toBe(60_000);
    const content = (await (await derrick.call(`/v1/projects/p-exp/display-items/content/${contentId}`)).json()) as { parts: string[] };
    const partPath = `/v1/projects/p-exp/display-items/content-parts/${content.parts[0]}`;

    let lastReadable = Date.now();
    const gone = await eventually(
      async () => {
        const now = Date.now();
        const r = await derrick.call(`/v1/projects/p-exp/display-items/content/${contentId}`);
        if (r.status === 200) {
          lastReadable = now;
          return undefined;
        }
        return { at: now, status: r.status, body: (await r.json()) as Record<string, unknown> };
      },
      { timeoutMs: 70_000, intervalMs: 200, what: "the content to expire" },
    );
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ taskId, state: "succeeded" });
    expect(lastReadable).toBeGreaterThanOrEqual(expiresAt - 2_000);
    expect(gone.at).toBeLessThanOrEqual(expiresAt + 2_000);
    expect((await derrick.call(partPath)).status).toBe(404);
    // The task itself stays, saying when its result went away.
    expect(await (await derrick.call(`/v2/projects/p-exp/tasks/${taskId}`)).json()).toMatchObject({
      state: "succeeded",
      expiresAt: task.expiresAt,
    });
  });
});
