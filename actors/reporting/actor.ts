/**
 * Wiring of the `reporting` actor: opens the assessment buckets and serves the entity and
 * aggregation endpoints. Stateless beyond NATS: start more processes to scale; they share the
 * cache in KV, each holding the results it read last in memory (result-memory.ts).
 */
import { ComputePool } from "./compute-pool.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import * as op from "../../subjects/reporting.ts";
import { endpointsWith, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import {
  deleteEntity,
  fullCycleAggregate,
  getAggregationTask,
  getAggregationTaskResult,
  getEntity,
  licenseAggregate,
  prospectAggregate,
  prospectAggregateDetails,
  putEntity,
  runAggregationTask,
  scenarioAggregate,
  type ReportingDeps,
} from "./handlers.ts";
import { BUCKETS, assessmentStore, openStores } from "./store.ts";
import { RESULT_MEMORY, ResultMemory } from "./result-memory.ts";
import { republishedWrites } from "../../subjects/index.ts";
import { AggregationTasks, openTaskBuckets } from "./tasks.ts";
import { actorMetrics } from "../runtime/metrics.ts";

export async function startReportingActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "reporting" });
  const stores = await openStores(nc, options.storage, log);
  const results = new ResultMemory(stores.cache, nc, log, RESULT_MEMORY, republishedWrites(BUCKETS.entities).dest);
  await results.start();
  const metrics = options.metrics ? actorMetrics(options.metrics) : undefined;
  // Both results exported from 0, so a ratio of their rates exists before the first hit.
  for (const result of ["hit", "miss"]) metrics?.reportingCache.inc({ result }, 0);
  const offThread = new ComputePool();
  const deps: ReportingDeps = {
    store: assessmentStore(stores, { results }),
    offThread,
    ...(metrics ? { cacheReads: (result: "hit" | "miss") => metrics.reportingCache.inc({ result }) } : {}),
  };
  const buckets = await openTaskBuckets(nc, options.storage);
  const tasks = new AggregationTasks(buckets.tasks, buckets.results, (task) => runAggregationTask(task, deps), log, {
    ...(stores.maxValueBytes ? { maxValueBytes: stores.maxValueBytes } : {}),
  });
  deps.tasks = tasks;
  const on = endpointsWith(deps);
  return serveActor(
    nc,
    {
      name: "reporting",
      description: "reporting by unit and analysis: assessment entities and risk, volume and economics aggregations",
      endpoints: [
        on(op.reportingEntityPut, putEntity),
        on(op.reportingEntityGet, getEntity),
        on(op.reportingEntityDelete, deleteEntity),
        on(op.reportingLicenseAggregation, licenseAggregate),
        on(op.reportingProspectAggregation, prospectAggregate),
        on(op.reportingProspectDetails, prospectAggregateDetails),
        on(op.reportingFullcycleAggregation, fullCycleAggregate),
        on(op.reportingScenarioAggregation, scenarioAggregate),
        on(op.reportingTaskGet, getAggregationTask),
        on(op.reportingTaskResult, getAggregationTaskResult),
      ],
    },
    options,
    async () => {
      stores.close?.();
      await tasks.stop();
      offThread.stop();
      await results.stop();
    },
  );
}
