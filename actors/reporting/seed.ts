/**
 * `derrick seed`: loads the demo data set (demo.ts) into a running derrick over NATS, as a trusted
 * internal caller holding `assessments.editors`, into one partition. Idempotent: a second run
 * replaces the entities (200) and the license keeps its two versions.
 */
import type { Principal } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import { EDITORS_GROUP, reportingEntityPut } from "../../subjects/reporting.ts";
import { DEMO, loadDemo, type DemoItem } from "../../subjects/reporting-demo.ts";

export const SEED_PRINCIPAL: Principal = { clientId: "derrick-seed", subject: "derrick-seed", groups: [EDITORS_GROUP], kind: "service" };

export async function seedDemo(bus: Bus, partition: string): Promise<Array<{ item: DemoItem; status: number }>> {
  return loadDemo(async (item) => {
    const reply = await bus.request(
      reportingEntityPut,
      { collection: item.collection, id: item.id, body: item.body },
      { principal: SEED_PRINCIPAL, partition },
    );
    return reply.status;
  });
}

/** The paths to try once the demo is loaded. */
export const DEMO_PATHS = [
  "GET  /assessments/v1/licenseaggregation/pl-123",
  "GET  /assessments/v1/prospectanalysisaggregation/pa-alpha-oil",
  "GET  /assessments/v1/prospectanalysisaggregation/pa-alpha-oil/details",
  'POST /assessments/v1/fullcycleanalysisaggregation  {"prospectAnalysisId":"pa-alpha-oil"}',
  "GET  /assessments/v1/prospectmultiplescenarioanalysisaggregation/msa-alpha",
];

export { DEMO };
