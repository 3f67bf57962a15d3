/**
 * Reporting by unit and analysis over HTTP (bearer token + appkey + partition header on every
 * route): PUT/GET/DELETE of the five assessment entities and the five aggregation endpoints. Each
 * route is one request to the `reporting` actor, which checks the group `assessments.editors` on
 * writes, the rules a schema cannot say and the references; the edge validates paths and bodies
 * and documents them.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import type { Static, TSchema } from "@sinclair/typebox";
import {
  ENTITY_SCHEMAS,
  EntityQuery,
  FullCycleAggregationBody,
  IdPath,
  reportingEntityDelete,
  reportingEntityGet,
  reportingEntityPut,
  reportingFullcycleAggregation,
  reportingLicenseAggregation,
  reportingProspectAggregation,
  reportingProspectDetails,
  reportingScenarioAggregation,
  reportingTaskGet,
  reportingTaskResult,
  AggregationTask,
  TaskPath,
  type Collection,
} from "../../subjects/reporting.ts";
import type { AuthPlugin } from "../plugins/auth.ts";
import { problems, relayOn, type Relay, type RelayContext } from "../relay.ts";

const errors = problems(400, 401, 403, 404, 409, 413, 503, 504);
/** Every route: bearer token, appkey and partition header. */
const credentials = { auth: { appkey: true }, partition: true } as const;
const BASE = "/assessments/v1";

const LABELS: Record<Collection, string> = {
  licenses: "license (versions are merged by versionNumber: every version is kept)",
  segmentanalyses: "segment analysis",
  prospectanalyses: "prospect analysis (its segment analyses must exist)",
  fullcycleanalyses: "full cycle analysis (its prospect analysis must exist)",
  multiplescenarioanalyses: "multiple scenario analysis (its scenarios' prospect analyses must exist)",
};

/** The answer of an aggregation whose estimated work is large: a task to poll (docs/reporting.md). */
const ACCEPTED = " — or, when its estimated work is large, 202 with a task (Location) whose result is read once it succeeded";

/** What each aggregation read by id answers, as its route's summary. */
const AGGREGATION_SUMMARIES = {
  license: "A license: every version with blocks, nation, licensees and the linked prospects' analyses with their chance of success",
  prospect: "Chance of success, resources per product (success case, risked), PRMS labels, entitlement, segment risks and volumes",
  details: "The enrolled segment analyses: name, properties, chance of success, volumes, entitlement ({segments: [...]})",
  scenarios:
    "Set-up, results overall and per scenario, the outcome tree (exact ≤ 16 segments, Monte Carlo beyond) and the polygon with area and bbox",
};

function entityRoutes(relay: Relay, auth: AuthPlugin, collection: Collection) {
  // One route group per collection: the body schema differs, the shape of the handlers does not.
  const schema = ENTITY_SCHEMAS[collection] as TSchema;
  const path: string = `${BASE}/${collection}/:id`;
  return new Elysia({ name: `derrick-reporting-${collection}`, normalize: false })
    .use(auth)
    .guard({ ...credentials, detail: { tags: ["assessments"] } }, (app) =>
      app
        .put(path, ({ set, request, body, params }) => relay({ set, request }, reportingEntityPut, { collection, id: params.id, body }), {
          params: IdPath,
          body: schema,
          detail: {
            summary: `Create or replace a ${LABELS[collection]}; group assessments.editors; 201 created, 200 replaced, ETag = version`,
          },
          response: { 200: reportingEntityPut.reply, 201: reportingEntityPut.reply, ...errors },
        })
        .get(
          path,
          ({ set, request, params, query }) =>
            relay({ set, request }, reportingEntityGet, {
              collection,
              id: params.id,
              ...(query.version !== undefined ? { version: query.version } : {}),
            }),
          {
            params: IdPath,
            query: EntityQuery,
            detail: {
              summary: `One ${collection.replace(/s$/, "")} as stored (ETag = version); ?version=n for one of the last 16 versions`,
            },
            response: { 200: reportingEntityGet.reply, ...errors },
          },
        )
        .delete(path, ({ set, request, params }) => relay({ set, request }, reportingEntityDelete, { collection, id: params.id }), {
          params: IdPath,
          detail: { summary: `Delete a ${collection.replace(/s$/, "")} (group assessments.editors) → 204` },
          response: { 204: t.Void(), ...errors },
        }),
    );
}

export const reportingRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const relay = relayOn(bus);
  // An aggregation read by the id in its path: the path parameters are its whole request.
  const byId = <R extends Record<number, TSchema>>(op: typeof reportingLicenseAggregation, summary: string, response: R) =>
    [
      ({ set, request, params }: RelayContext & { params: Static<typeof IdPath> }) => relay({ set, request }, op, params),
      { params: IdPath, detail: { summary }, response },
    ] as const;
  const answered = (op: typeof reportingLicenseAggregation) => ({ 200: op.reply, ...errors });
  const answeredOrAccepted = (op: typeof reportingLicenseAggregation) => ({ 200: op.reply, 202: AggregationTask, ...errors });
  return new Elysia({ name: "derrick-reporting-routes", normalize: false })
    .use(auth)
    .use(entityRoutes(relay, auth, "licenses"))
    .use(entityRoutes(relay, auth, "segmentanalyses"))
    .use(entityRoutes(relay, auth, "prospectanalyses"))
    .use(entityRoutes(relay, auth, "fullcycleanalyses"))
    .use(entityRoutes(relay, auth, "multiplescenarioanalyses"))
    .guard({ ...credentials, detail: { tags: ["reporting"] } }, (app) =>
      app
        .get(
          `${BASE}/licenseaggregation/:id`,
          ...byId(reportingLicenseAggregation, AGGREGATION_SUMMARIES.license, answered(reportingLicenseAggregation)),
        )
        .get(
          `${BASE}/prospectanalysisaggregation/:id`,
          ...byId(
            reportingProspectAggregation,
            `${AGGREGATION_SUMMARIES.prospect}${ACCEPTED}`,
            answeredOrAccepted(reportingProspectAggregation),
          ),
        )
        .get(
          `${BASE}/prospectanalysisaggregation/:id/details`,
          ...byId(reportingProspectDetails, AGGREGATION_SUMMARIES.details, answered(reportingProspectDetails)),
        )
        .post(
          `${BASE}/fullcycleanalysisaggregation`,
          ({ set, request, body }) => relay({ set, request }, reportingFullcycleAggregation, { body }),
          {
            body: FullCycleAggregationBody,
            detail: {
              summary: `Flows, cumulative volumes, cash flows and indicators (NPV, IRR, payout, P/I, EMV, break-even Pg) per level for every full cycle analysis of a prospect analysis${ACCEPTED}`,
            },
            response: { 200: reportingFullcycleAggregation.reply, 202: AggregationTask, ...errors },
          },
        )
        .get(
          `${BASE}/prospectmultiplescenarioanalysisaggregation/:id`,
          ...byId(
            reportingScenarioAggregation,
            `${AGGREGATION_SUMMARIES.scenarios}${ACCEPTED}`,
            answeredOrAccepted(reportingScenarioAggregation),
          ),
        )
        .get(`${BASE}/aggregationtasks/:taskId`, ({ set, request, params }) => relay({ set, request }, reportingTaskGet, params), {
          params: TaskPath,
          detail: {
            summary:
              "An aggregation task: queued → running → succeeded | failed (error); expiresAt = completedAt + 60 s, until which its result is kept",
          },
          response: { 200: reportingTaskGet.reply, ...errors },
        })
        .get(
          `${BASE}/aggregationtasks/:taskId/result`,
          ({ set, request, params }) => relay({ set, request }, reportingTaskResult, params),
          {
            params: TaskPath,
            detail: {
              summary:
                "The result of a succeeded aggregation task (the body its aggregation answers with 200); 409 while it runs, 404 when it failed or its result expired (60 s after completion)",
            },
            response: { 200: reportingTaskResult.reply, ...errors },
          },
        ),
    );
};
