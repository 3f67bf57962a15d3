/** Shared helpers of the reporting tests: the file's derrick, PUT as the editor, the demo set. */
import type { TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { DEMO, loadDemo, type DemoItem } from "../../subjects/reporting-demo.ts";

/** A file's derrick serving the reporting API (with `env` added to its settings). */
export const reportingTest = (env: Record<string, string> = {}) => derrickTest({ actors: ["identity", "reporting"], env });

export const put = (
  derrick: TestDerrick,
  collection: string,
  id: string,
  body: unknown,
  as: "admin" | "alpha" | "beta" = "admin",
  partition = "opendes",
) => derrick.call(`/assessments/v1/${collection}/${id}`, { as, partition, method: "PUT", body: JSON.stringify(body) });

export async function loadDemoOver(derrick: TestDerrick, partition = "opendes") {
  return loadDemo(async (item: DemoItem) => {
    const res = await put(derrick, item.collection, item.id, item.body, "admin", partition);
    if (res.status >= 300) throw new Error(`${item.collection}/${item.id}: ${res.status} ${await res.text()}`);
    return res.status;
  });
}

export const demoBody = (id: string, index = 0) => structuredClone(DEMO.filter((d) => d.id === id)[index]!.body) as Record<string, any>;

/** A segment with a lognormal oil volume. */
export const segment = (name: string, ps: number, p90: number, p10: number, extra: Record<string, unknown> = {}) => ({
  name,
  riskFactors: [{ name: "trap", probability: ps }],
  volumes: { oil: { unit: "MMbbl", p90, p10 } },
  ...extra,
});

/** A prospect analysis of `segmentAnalysisIds`, their outcomes independent. */
export const prospectAnalysis = (prospectId: string, name: string, segmentAnalysisIds: string[], extra: Record<string, unknown> = {}) => ({
  prospect: { id: prospectId, name },
  segmentAnalysisIds,
  dependency: { model: "independent" },
  ...extra,
});
