/**
 * Limits through the edge: the per-client request rate (429 + Retry-After), and a body just over the
 * limit on every write route of each capability answered 413 with nothing written. Event, twin value
 * and open-cursor limits have their own tests (notifications/delivery, twins/rest, search/cursor);
 * concurrent deliveries per receiver: notifications/crash.
 */
import { describe, expect } from "vitest";
import { eventually } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";

const it = derrickTest({ env: { DERRICK_RATE_LIMIT: "5/s", DERRICK_RATE_BURST: "5", DERRICK_BODY_LIMIT: "16384" } });

describe("edge limits", () => {
  it("limits - a client over its rate gets 429 problem+json with Retry-After; other clients are not affected", async ({ derrick }) => {
    await derrick.token("alpha");
    await derrick.token("beta");
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 12; i++) {
      const res = await derrick.call("/v1/system/whoami", { as: "alpha" });
      statuses.push(res.status);
      if (res.status === 429) refused ??= res;
      else await res.body?.cancel();
    }
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(5);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(7);
    expect(refused).toBeDefined();
    expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    await expectProblem(refused!, 429);
    expect((await derrick.call("/v1/system/whoami", { as: "beta" })).status).toBe(200);
    // The bucket refills: alpha is served again.
    await eventually(async () => (await derrick.call("/v1/system/whoami", { as: "alpha" })).status === 200, {
      timeoutMs: 3_000,
      intervalMs: 250,
    });
  });

  it("limits - a body just over the limit is 413 on every write route, and nothing is written", async ({ derrick, jsm }) => {
    const sequences = async () => {
      const seqs: Record<string, number> = {};
      for await (const info of jsm.streams.list()) seqs[info.config.name] = info.state.last_seq;
      return seqs;
    };
    const before = await sequences();
    const big = JSON.stringify({ data: "x".repeat(16_384) });
    const routes: Array<[string, string]> = [
      ["POST", "/v1/notifications/subscriptions/types/PlanShared"],
      ["POST", "/v1/notifications/events/PlanShared"],
      ["PUT", "/api/twin-properties/v1/acme/prod/rig-1/twin-properties"],
      ["PUT", "/v1/projects/p1"],
      ["POST", "/v1/projects/p1/display-items/content/requests"],
      ["PUT", "/api/storage/v2/records"],
      ["POST", "/api/search/v2/query"],
      ["PUT", "/assessments/v1/licenses/l1"],
    ];
    for (const [method, path] of routes) {
      // Admin for the writes; spread the calls over the rate limit of this deployment.
      const res = await eventually(
        async () => {
          const r = await derrick.call(path, { as: "admin", method, body: big });
          return r.status === 429 ? undefined : r;
        },
        { timeoutMs: 5_000, intervalMs: 200 },
      );
      expect(res.status, `${method} ${path}`).toBe(413);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
    }
    expect(await sequences()).toEqual(before);
  });
});
