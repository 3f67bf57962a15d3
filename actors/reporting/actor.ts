/**
 * Wiring of the `reporting` actor: opens the assessment buckets and serves the entity and
 * aggregation endpoints. Stateless beyond NATS: start more processes to scale; they share the
 * cache in KV.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { AggregationRef, EntityPutRequest, EntityRef, FullCycleAggregationRequest } from "../../subjects/reporting.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import {
  deleteEntity,
  fullCycleAggregate,
  getEntity,
  licenseAggregate,
  prospectAggregate,
  prospectAggregateDetails,
  putEntity,
  scenarioAggregate,
  type ReportingDeps,
} from "./handlers.ts";
import { assessmentStore, openStores } from "./store.ts";

export async function startReportingActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const stores = await openStores(nc, options.storage, options.log.child({ actor: "reporting" }));
  const deps: ReportingDeps = { store: assessmentStore(stores) };
  const names = subjects.reporting;
  return serveActor(
    nc,
    {
      name: "reporting",
      description: "reporting by unit and analysis: assessment entities and risk, volume and economics aggregations",
      endpoints: [
        endpoint({
          name: "entity-put",
          subject: names["entity.put"](),
          input: EntityPutRequest,
          handler: (input, ctx) => putEntity(input, ctx, deps),
        }),
        endpoint({
          name: "entity-get",
          subject: names["entity.get"](),
          input: EntityRef,
          handler: (input, ctx) => getEntity(input, ctx, deps),
        }),
        endpoint({
          name: "entity-delete",
          subject: names["entity.delete"](),
          input: EntityRef,
          handler: (input, ctx) => deleteEntity(input, ctx, deps),
        }),
        endpoint({
          name: "license-aggregation",
          subject: names["license.aggregation"](),
          input: AggregationRef,
          handler: (input, ctx) => licenseAggregate(input, ctx, deps),
        }),
        endpoint({
          name: "prospect-aggregation",
          subject: names["prospect.aggregation"](),
          input: AggregationRef,
          handler: (input, ctx) => prospectAggregate(input, ctx, deps),
        }),
        endpoint({
          name: "prospect-details",
          subject: names["prospect.details"](),
          input: AggregationRef,
          handler: (input, ctx) => prospectAggregateDetails(input, ctx, deps),
        }),
        endpoint({
          name: "fullcycle-aggregation",
          subject: names["fullcycle.aggregation"](),
          input: FullCycleAggregationRequest,
          handler: (input, ctx) => fullCycleAggregate(input, ctx, deps),
        }),
        endpoint({
          name: "scenario-aggregation",
          subject: names["scenario.aggregation"](),
          input: AggregationRef,
          handler: (input, ctx) => scenarioAggregate(input, ctx, deps),
        }),
      ],
    },
    options,
    async () => stores.close?.(),
  );
}
