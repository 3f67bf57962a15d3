/**
 * An aggregation's heavy part as data: its loaded and checked inputs (plain, structured-cloneable values) and which
 * computation to run on them. The same job runs in the actor (answers at once) or in a worker thread (tasks), so a
 * computation of seconds never holds the event loop every actor of the process shares (docs/reporting.md).
 */
import type { AggregationResult } from "../../subjects/reporting.ts";
import {
  fullCycle,
  prospectAggregation,
  scenarioAggregation,
  simulateProspect,
  type FullCycleInput,
  type ProspectModel,
  type ScenarioInput,
} from "./aggregate.ts";

type Level = Parameters<typeof fullCycle>[3][number];

export type AggregationJob =
  | { kind: "prospect"; model: ProspectModel; licenses: Array<{ licenseId: string; name: string }>; version: number }
  | {
      kind: "fullcycle";
      model: ProspectModel;
      prospectAnalysisId: string;
      company?: { companyId: string; workingInterest: number | undefined };
      levels: readonly Level[];
      analyses: FullCycleInput[];
      needsSimulation: boolean;
    }
  | { kind: "scenarios"; msa: Parameters<typeof scenarioAggregation>[0]; scenarios: ScenarioInput[] };

export function computeJob(job: AggregationJob): AggregationResult {
  switch (job.kind) {
    case "prospect":
      return prospectAggregation(job.model, job.licenses, job.version) as AggregationResult;
    case "scenarios":
      return scenarioAggregation(job.msa, job.scenarios) as AggregationResult;
    case "fullcycle": {
      const { model, company, levels } = job;
      const sim = job.needsSimulation ? simulateProspect(model) : undefined;
      return {
        prospectAnalysisId: job.prospectAnalysisId,
        ...(company ? { companyId: company.companyId, workingInterest: company.workingInterest } : {}),
        levels,
        pg: model.chance.pgAtLeastOne,
        fullCycleAnalyses: [...job.analyses]
          .sort((a, b) => a.fc.fullCycleAnalysisId.localeCompare(b.fc.fullCycleAnalysisId))
          .map((a) => fullCycle(a, model, sim, levels, company?.workingInterest)),
      } as AggregationResult;
    }
  }
}
