/**
 * Reporting by unit and analysis over HTTP (bearer token + appkey + partition header on every
 * route): PUT/GET/DELETE of the five assessment entities and the five aggregation endpoints. Each
 * route is one request to the `reporting` actor, which checks the group `assessments.editors` on
 * writes, the rules a schema cannot say and the references; the edge validates paths and bodies
 * and documents them.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { Problem, subjects } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import type { TSchema } from "@sinclair/typebox";
import {
  AggregationResult,
  ENTITY_SCHEMAS,
  EntityQuery,
  FullCycleAggregationBody,
  ID_PATTERN,
  type Collection,
} from "../../subjects/reporting.ts";
import { forward } from "../forward.ts";
import type { AuthPlugin, AuthOptions } from "../plugins/auth.ts";
import { requestMeta } from "../request-state.ts";

const errors = { 400: Problem, 401: Problem, 403: Problem, 404: Problem, 409: Problem, 413: Problem, 503: Problem, 504: Problem };
const credentials = { auth: { appkey: true } as AuthOptions, partition: true } as const;
const params = t.Object({ id: t.String({ pattern: ID_PATTERN }) });
const names = subjects.reporting;
const BASE = "/assessments/v1";

const LABELS: Record<Collection, string> = {
  licenses: "license (versions are merged by versionNumber: every version is kept)",
  segmentanalyses: "segment analysis",
  prospectanalyses: "prospect analysis (its segment analyses must exist)",
  fullcycleanalyses: "full cycle analysis (its prospect analysis must exist)",
  multiplescenarioanalyses: "multiple scenario analysis (its scenarios' prospect analyses must exist)",
};

function entityRoutes(bus: Bus, auth: AuthPlugin, collection: Collection) {
  const tags = ["assessments"];
  // One route group per collection: the body schema differs, the shape of the handlers does not.
  const schema = ENTITY_SCHEMAS[collection] as TSchema;
  const entity = AggregationResult;
  const path: string = `${BASE}/${collection}/:id`;
  return new Elysia({ name: `derrick-reporting-${collection}`, normalize: false })
    .use(auth)
    .put(
      path,
      async ({ params, body, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["entity.put"](), { collection, id: params.id, body }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        body: schema,
        detail: {
          tags,
          summary: `Create or replace a ${LABELS[collection]}; group assessments.editors; 201 created, 200 replaced, ETag = version`,
        },
        response: { 200: entity, 201: entity, ...errors },
      },
    )
    .get(
      path,
      async ({ params, query, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(
            names["entity.get"](),
            { collection, id: params.id, ...(query.version !== undefined ? { version: query.version } : {}) },
            requestMeta(request, principal, partition),
          ),
        ),
      {
        ...credentials,
        params,
        query: EntityQuery,
        detail: {
          tags,
          summary: `One ${collection.replace(/s$/, "")} as stored (ETag = version); ?version=n for one of the last 16 versions`,
        },
        response: { 200: entity, ...errors },
      },
    )
    .delete(
      path,
      async ({ params, set, request, principal, partition }) =>
        forward(
          set,
          await bus.request(names["entity.delete"](), { collection, id: params.id }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        detail: { tags, summary: `Delete a ${collection.replace(/s$/, "")} (group assessments.editors) → 204` },
        response: { 204: t.Void(), ...errors },
      },
    );
}

export const reportingRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const tags = ["reporting"];
  return new Elysia({ name: "derrick-reporting-routes", normalize: false })
    .use(auth)
    .use(entityRoutes(bus, auth, "licenses"))
    .use(entityRoutes(bus, auth, "segmentanalyses"))
    .use(entityRoutes(bus, auth, "prospectanalyses"))
    .use(entityRoutes(bus, auth, "fullcycleanalyses"))
    .use(entityRoutes(bus, auth, "multiplescenarioanalyses"))
    .get(
      `${BASE}/licenseaggregation/:id`,
      async ({ params, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["license.aggregation"](), params, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        detail: {
          tags,
          summary:
            "A license: every version with blocks, nation, licensees and the linked prospects' analyses with their chance of success",
        },
        response: { 200: AggregationResult, ...errors },
      },
    )
    .get(
      `${BASE}/prospectanalysisaggregation/:id`,
      async ({ params, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["prospect.aggregation"](), params, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        detail: {
          tags,
          summary: "Chance of success, resources per product (success case, risked), PRMS labels, entitlement, segment risks and volumes",
        },
        response: { 200: AggregationResult, ...errors },
      },
    )
    .get(
      `${BASE}/prospectanalysisaggregation/:id/details`,
      async ({ params, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["prospect.details"](), params, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        detail: {
          tags,
          summary: "The enrolled segment analyses: name, properties, chance of success, volumes, entitlement ({segments: [...]})",
        },
        response: { 200: AggregationResult, ...errors },
      },
    )
    .post(
      `${BASE}/fullcycleanalysisaggregation`,
      async ({ body, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["fullcycle.aggregation"](), { body }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        body: FullCycleAggregationBody,
        detail: {
          tags,
          summary:
            "Flows, cumulative volumes, cash flows and indicators (NPV, IRR, payout, P/I, EMV, break-even Pg) per level for every full cycle analysis of a prospect analysis",
        },
        response: { 200: AggregationResult, ...errors },
      },
    )
    .get(
      `${BASE}/prospectmultiplescenarioanalysisaggregation/:id`,
      async ({ params, set, request, principal, partition }) =>
        forward<Record<string, unknown>>(
          set,
          await bus.request(names["scenario.aggregation"](), params, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params,
        detail: {
          tags,
          summary:
            "Set-up, results overall and per scenario, the outcome tree (exact ≤ 16 segments, Monte Carlo beyond) and the polygon with area and bbox",
        },
        response: { 200: AggregationResult, ...errors },
      },
    );
};
