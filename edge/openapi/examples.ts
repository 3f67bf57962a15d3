/**
 * The examples of the API document, one entry per operation keyed as `/openapi.json` names it
 * ("METHOD /path"): the request body and each JSON 2xx answer, plus examples of path and query
 * parameters (by name, and per operation where a name means different things). Injected by
 * edge/openapi/document.ts; test/platform/openapi.test.ts checks that every operation has them and
 * that each one validates against the schema it illustrates, so none can drift from its route.
 *
 * The values are those of a real run against the demo data of `derrick seed` and the test clients,
 * so "Test Request" on /docs works with them once that data is loaded.
 */
import type { BuildInfo, EchoBody, FleetStatus } from "../../subjects/system.ts";
import type { Jwks, TokenResponse } from "../../subjects/identity.ts";
import type { DeliveryList, EventAccepted, EventBody, SecretReply, Subscription, SubscriptionBase } from "../../subjects/notifications.ts";
import type { TwinGetReply, TwinPutReply, TwinUpdateBody } from "../../subjects/twins.ts";
import type {
  CatalogItem,
  CatalogItemBody,
  CatalogPage,
  Content,
  ContentAccepted,
  ContentPart,
  ContentRequestBody,
  Project,
  ProjectBody,
  Task,
  TaskPage,
} from "../../subjects/projects.ts";
import type {
  CursorQueryRequest,
  CursorQueryResponse,
  PutRecordsBody,
  PutRecordsResponse,
  QueryRequest,
  QueryResponse,
  StoredRecord,
  VersionInfo,
} from "../../subjects/search.ts";
import { ID_FIELD, type Collection, type FullCycleAggregationBody } from "../../subjects/reporting.ts";
import { DEMO } from "../../subjects/reporting-demo.ts";
import {
  FULL_CYCLE_AGGREGATION,
  LICENSE_AGGREGATION,
  PROSPECT_AGGREGATION,
  PROSPECT_DETAILS,
  SCENARIO_AGGREGATION,
  AGGREGATION_TASK_ACCEPTED,
  AGGREGATION_TASK_SUCCEEDED,
} from "./reporting-examples.ts";

/** What the document shows of one operation beyond its schemas. */
export type OperationExamples = {
  /** The request body (every media type it is accepted in shows it). */
  request?: unknown;
  /** Each JSON 2xx answer by status. */
  responses?: { [status in 200 | 201 | 202]?: unknown };
  /** Parameter examples that differ from PARAMETER_EXAMPLES for this operation. */
  parameters?: Record<string, unknown>;
};

const SUBSCRIPTION_ID = "sub_tK161iQd2VF4u9ikqDVsUg";
const EVENT_ID = "evt_1Au9s1yvD1sfDt8UbdgiN6";
const TASK_ID = "tsk_1Au9s1yvD1sfDt8UbdgjMK";
const CONTENT_ID = "cnt_1Au9s1yvD1sfDt8UbdgjMK";
const SUCCEEDED_TASK = {
  taskId: TASK_ID,
  projectId: "volve-f21a",
  kind: "display-items",
  state: "succeeded",
  createdAt: "2026-11-28T02:39:59.700Z",
  startedAt: "2026-11-28T02:39:59.703Z",
  completedAt: "2026-11-28T02:39:59.705Z",
  expiresAt: "2026-11-28T02:40:59.705Z",
  contentId: CONTENT_ID,
} satisfies Task;
const RECORD_ID = "opendes:master-data--Well:volve-f21";
const WELL_KIND = "osdu:wks:master-data--Well:1.0.0";

/** Parameter examples by name, for every operation that has a parameter of that name. */
export const PARAMETER_EXAMPLES: Readonly<Record<string, unknown>> = {
  "slb-partition-id": "opendes",
  "data-partition-id": "opendes",
  subscritpionType: "PlanShared",
  type: "PlanShared",
  subscriptionId: SUBSCRIPTION_ID,
  eventId: EVENT_ID,
  organization: "acme",
  environment: "prod",
  twinId: "pump-7",
  group: "config",
  name: "sampleRateHz",
  projectId: "volve-f21a",
  memberId: "beta",
  taskId: TASK_ID,
  contentId: CONTENT_ID,
  contentPartId: `${CONTENT_ID}-0`,
  offset: 0,
  limit: 50,
  category: "trajectory",
  version: 1,
  cursor: "89D7BB670FA7420679459DAD9388428A",
  id: RECORD_ID,
};

const subscriptionBase = {
  subscriber: "Drilling planner",
  callback_uri: "https://hooks.example.com/derrick",
  callback_headers: { Authorization: "Bearer receiver-token" },
  drill_plan_object_types: ["/well/api/wells", "/Traj/api/trajectories"],
  contact_email: "planner@example.com",
} satisfies SubscriptionBase;

const subscription = {
  ...subscriptionBase,
  data_source: null,
  subscription_id: SUBSCRIPTION_ID,
  client_id: "alpha",
  updated_at: "2026-11-28T02:39:57.964Z",
  subscription_type: "PlanShared",
} satisfies Subscription;

const secret = (key: string) => ({ key }) satisfies SecretReply;
const accepted = { event_id: EVENT_ID } satisfies EventAccepted;

const twinPath = "/api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties";

const displayItem = {
  name: "Rig contractor",
  description: "Company operating the rig",
  dataType: "string",
  category: "general",
  objectTypes: ["rig"],
} satisfies CatalogItemBody;
const keyParameter = {
  name: "Maximum dogleg severity",
  description: "Largest planned dogleg severity",
  unit: "deg/30m",
  dataType: "number",
  category: "trajectory",
  objectTypes: ["trajectory"],
} satisfies CatalogItemBody;

const projectBody = {
  name: "Volve F-21 A sidetrack",
  members: ["admin", "alpha"],
  values: {
    displayItems: { "well-name": "NO 15/9-F-21 A", "rig-name": "Maersk Inspirer" },
    keyParameters: { "total-depth-md": 3550, "planned-days": 48.5 },
  },
} satisfies ProjectBody;
const project = {
  projectId: "volve-f21a",
  ...projectBody,
  createdAt: "2026-11-28T02:39:59.673Z",
  updatedAt: "2026-11-28T02:39:59.673Z",
} satisfies Project;

/** The catalog, content and task examples of one kind (display items or key parameters). */
function catalogExamples(kind: "display-items" | "key-parameters"): Record<string, OperationExamples> {
  const display = kind === "display-items";
  const itemId = display ? "rig-contractor" : "max-dogleg";
  const body = display ? displayItem : keyParameter;
  const page = display
    ? ({
        items: [
          {
            id: "well-name",
            name: "Well name",
            description: "Official name of the well as registered with the regulator.",
            dataType: "string",
            category: "well",
            objectTypes: ["well"],
          },
          {
            id: "well-uwi",
            name: "Unique well identifier",
            description: "UWI/API number assigned to the well.",
            dataType: "string",
            category: "well",
            objectTypes: ["well"],
          },
        ],
        total: 33,
        offset: 0,
        limit: 2,
      } satisfies CatalogPage)
    : ({
        items: [
          {
            id: "total-depth-md",
            name: "Total depth (MD)",
            description: "Planned measured depth at TD.",
            unit: "m",
            dataType: "number",
            category: "trajectory",
            objectTypes: ["trajectory", "wellbore"],
          },
          {
            id: "total-depth-tvd",
            name: "Total depth (TVD)",
            description: "Planned true vertical depth at TD.",
            unit: "m",
            dataType: "number",
            category: "trajectory",
            objectTypes: ["trajectory", "wellbore"],
          },
        ],
        total: 31,
        offset: 0,
        limit: 2,
      } satisfies CatalogPage);
  const ids = display ? ["well-name", "rig-name"] : ["total-depth-md", "planned-days"];
  const items = display
    ? [
        { id: "well-name", name: "Well name", category: "well", dataType: "string", status: "set" as const, value: "NO 15/9-F-21 A" },
        { id: "rig-name", name: "Rig", category: "well", dataType: "string", status: "set" as const, value: "Maersk Inspirer" },
      ]
    : [
        {
          id: "total-depth-md",
          name: "Total depth (MD)",
          category: "trajectory",
          dataType: "number",
          unit: "m",
          status: "set" as const,
          value: 3550,
        },
        {
          id: "planned-days",
          name: "Planned duration",
          category: "schedule",
          dataType: "number",
          unit: "d",
          status: "set" as const,
          value: 48.5,
        },
      ];
  const content = {
    contentId: CONTENT_ID,
    taskId: TASK_ID,
    projectId: "volve-f21a",
    kind,
    createdAt: "2026-11-28T02:39:59.705Z",
    expiresAt: "2026-11-28T02:40:59.705Z",
    itemCount: 2,
    setCount: 2,
    size: display ? 227 : 263,
    items,
  } satisfies Content;
  const itemsText = JSON.stringify(items);
  const part = {
    contentPartId: `${CONTENT_ID}-0`,
    contentId: CONTENT_ID,
    projectId: "volve-f21a",
    kind,
    index: 0,
    count: 1,
    data: itemsText,
  } satisfies ContentPart;
  return {
    [`GET /v1/${kind}`]: { responses: { 200: page }, parameters: { limit: 2, category: display ? "well" : "trajectory" } },
    [`PUT /v1/${kind}/{itemId}`]: {
      request: body,
      responses: { 200: { id: itemId, ...body } satisfies CatalogItem, 201: { id: itemId, ...body } satisfies CatalogItem },
      parameters: { itemId },
    },
    [`POST /v1/projects/{projectId}/${kind}/content/requests`]: {
      request: { ids } satisfies ContentRequestBody,
      responses: { 202: { taskId: TASK_ID, contentId: CONTENT_ID } satisfies ContentAccepted },
    },
    [`GET /v1/projects/{projectId}/${kind}/content/{contentId}`]: { responses: { 200: content } },
    [`GET /v1/projects/{projectId}/${kind}/content-parts/{contentPartId}`]: { responses: { 200: part } },
  };
}

const REPORTING_IDS: Record<Collection, string> = {
  licenses: "pl-123",
  segmentanalyses: "seg-alpha-rogn",
  prospectanalyses: "pa-alpha-oil",
  fullcycleanalyses: "fc-alpha-mean",
  multiplescenarioanalyses: "msa-alpha",
};

/** PUT, GET and DELETE of one assessment entity: the demo item as sent, and as stored (id field and default status added). */
function entityExamples(collection: Collection): Record<string, OperationExamples> {
  const id = REPORTING_IDS[collection];
  const body = DEMO.find((item) => item.collection === collection && item.id === id)!.body;
  const stored = { status: "test", ...body, [ID_FIELD[collection]]: id };
  const path = `/assessments/v1/${collection}/{id}`;
  return {
    [`PUT ${path}`]: { request: body, responses: { 200: stored, 201: stored }, parameters: { id } },
    [`GET ${path}`]: { responses: { 200: stored }, parameters: { id } },
    [`DELETE ${path}`]: { parameters: { id } },
  };
}

const record = {
  id: RECORD_ID,
  kind: WELL_KIND,
  acl: { viewers: ["data.north.viewers@opendes.example.com"], owners: ["data.north.owners@opendes.example.com"] },
  legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
  data: { FacilityName: "NO 15/9-F-21", SpatialLocation: { Wgs84Coordinates: { type: "Point", coordinates: [1.887, 58.441] } } },
};

export const OPERATION_EXAMPLES: Readonly<Record<string, OperationExamples>> = {
  // system
  "GET /healthz": { responses: { 200: { status: "ok" } } },
  "GET /readyz": {
    responses: {
      200: {
        status: "ready",
        nats: "connected",
        actors: {
          system: true,
          identity: true,
          projects: true,
          "content-worker": true,
          twins: true,
          notifications: true,
          dispatcher: true,
          deliverer: true,
          "twin-mirror": true,
          search: true,
          storage: true,
          reporting: true,
        },
      },
    },
  },
  "GET /metrics": {
    responses: {
      200: '# HELP derrick_http_requests_total HTTP requests by route, method and status\n# TYPE derrick_http_requests_total counter\nderrick_http_requests_total{route="/healthz",method="GET",status="200"} 3\n',
    },
  },
  "GET /v1/system/info": {
    responses: {
      200: {
        name: "derrick",
        version: "0.1.0",
        commit: "0ba44d4ca5d33aae14627ae66f6ab3d4fb5b1688",
        runtime: "bun 1.4.5",
        startedAt: "2026-11-28T02:39:57.109Z",
      } satisfies BuildInfo,
    },
  },
  "POST /v1/system/echo": {
    request: { hello: "derrick", n: 1 } satisfies EchoBody,
    responses: { 200: { hello: "derrick", n: 1 } satisfies EchoBody },
  },
  "GET /v1/system/status": {
    responses: {
      200: {
        time: "2026-11-28T09:00:00.000Z",
        actors: [
          {
            name: "search",
            processes: [
              {
                id: "NGHQ3J6Y2DPAXZ7TQ4R2A1",
                state: "up",
                host: "rig-a",
                pid: 4211,
                version: "0.1.0",
                startedAt: "2026-11-28T08:00:00.000Z",
                uptimeSeconds: 3600,
                requests: 18250,
                errors: 3,
                averageProcessingMs: 1.8,
                inflight: 2,
                queued: 0,
                lastSeenAt: "2026-11-28T09:00:00.000Z",
                work: { appliedSeq: 120_400, records: 118_000 },
              },
            ],
          },
        ],
        streams: [
          {
            name: "DELIVERIES",
            messages: 12,
            bytes: 20_480,
            lastSeq: 9_310,
            consumers: [{ name: "deliverer", pending: 12, ackPending: 3, redelivered: 1, ackFloor: 9_296 }],
          },
        ],
        buckets: { count: 14, bytes: 1_048_576 },
        search: { replicas: [{ id: "NGHQ3J6Y2DPAXZ7TQ4R2A1", appliedSeq: 120_400, lagRecords: 0 }] },
        notifications: { deadLetters: 2, pausedSubscriptions: 1 },
        content: { tasksQueued: 0, tasksRunning: 0 },
      } satisfies FleetStatus,
    },
  },
  "GET /v1/system/whoami": {
    responses: {
      200: {
        principal: { clientId: "alpha", subject: "alpha", groups: ["users.datalake.viewers", "notifications.publishers"], kind: "service" },
        partition: "opendes",
      },
    },
  },

  // auth
  "POST /v2/token": {
    request: { grant_type: "client_credentials", client_id: "alpha", client_secret: "alpha-secret-1" },
    responses: {
      200: {
        access_token:
          "eyJhbGciOiJFUzI1NiIsImtpZCI6IkRvNXFyMngyTEF0eTlCRmF2N0pIeXFYQU4yTF91Qk0zTDRPeEN4eDRkR1UiLCJ0eXAiOiJKV1QifQ.eyJjbGllbnRfaWQiOiJhbHBoYSIsImF6cCI6ImFscGhhIiwiZ3JvdXBzIjpbInVzZXJzLmRhdGFsYWtlLnZpZXdlcnMiLCJub3RpZmljYXRpb25zLnB1Ymxpc2hlcnMiXSwic3ViIjoiYWxwaGEiLCJpc3MiOiJ1cm46ZGVycmljazppc3N1ZXIiLCJhdWQiOiJkZXJyaWNrIiwiaWF0IjoxNzk1ODMzNTk3LCJleHAiOjE3OTU4MzcxOTd9.780yEV3FumNzEMnjbiegQ5QHKE7lJspa69UdKWyv-BzHsg4Pd8OXIMjUzXSpiKr4pYNzLZJWkNUWwL2N0rSe4Q",
        token_type: "Bearer",
        expires_in: 3600,
      } satisfies TokenResponse,
    },
  },
  "GET /.well-known/jwks.json": {
    responses: {
      200: {
        keys: [
          {
            crv: "P-256",
            kty: "EC",
            x: "DkKJgxf5ozkdRGmixGjD0D6EkDK5L1KhG0674MG-eEA",
            y: "CJq-AakV1qAEhjrE3iVV8Z8DZgP7jr09j5mYplHzkzs",
            kid: "Do5qr2x2LAty9BFav7JHyqXAN2L_uBM3L4OxCxx4dGU",
            alg: "ES256",
            use: "sig",
          },
        ],
      } satisfies Jwks,
    },
  },

  // notifications
  "POST /v1/notifications/subscriptions/types/{subscritpionType}": { request: subscriptionBase, responses: { 200: subscription } },
  "GET /v1/notifications/subscriptions": { responses: { 200: [subscription] } },
  "DELETE /v1/notifications/subscriptions/{subscriptionId}": { responses: { 200: {} } },
  "GET /v1/notifications/subscriptions/{subscriptionId}/secret": {
    responses: { 200: secret("whsec_DKKexmbtpV9Gp67Fjd49ayuOXMTMlF5Wm95qfn0NEls=") },
  },
  "POST /v1/notifications/subscriptions/{subscriptionId}/secret/rotate": {
    responses: { 200: secret("whsec_H87AsovZ8dTKI86yQEeDhy/Kr9h6ML5ySAFrAOuIzpo=") },
  },
  "GET /v1/notifications/subscriptions/{subscriptionId}/deliveries": {
    responses: {
      200: {
        deliveries: [
          {
            event_id: EVENT_ID,
            attempt: 2,
            state: "succeeded",
            status_code: 204,
            duration_ms: 12,
            attempted_at: "2026-11-28T02:40:03.813Z",
          },
          {
            event_id: EVENT_ID,
            attempt: 1,
            state: "failed",
            status_code: 503,
            duration_ms: 5,
            attempted_at: "2026-11-28T02:39:58.000Z",
            next_attempt_at: "2026-11-28T02:40:03.813Z",
          },
        ],
      } satisfies DeliveryList,
    },
  },
  "POST /v1/notifications/subscriptions/{subscriptionId}/deliveries/{eventId}/retry": { responses: { 202: accepted } },
  "POST /v1/notifications/events/{type}": {
    request: { object_type: "/well/api/wells", data: { wellId: "well-7", plan: "NO 15/9-F-21 A", revision: 3 } } satisfies EventBody,
    responses: { 202: accepted },
  },

  // twin properties
  [`PUT ${twinPath}`]: {
    request: {
      group: "config",
      twins: [
        { name: "sampleRateHz", value: "10" },
        { name: "thresholds", value: '{"pressureBar":180,"temperatureC":95}' },
      ],
    } satisfies TwinUpdateBody,
    responses: {
      200: {
        group: "config",
        twins: [
          { name: "sampleRateHz", value: "10", version: 2 },
          { name: "thresholds", value: '{"pressureBar":180,"temperatureC":95}', version: 3 },
        ],
      } satisfies TwinPutReply,
    },
  },
  [`GET ${twinPath}`]: {
    responses: {
      200: {
        desired: {
          config: {
            sampleRateHz: { value: "10", version: 2, updated_at: "2026-11-28T02:39:59.620Z" },
            thresholds: { value: '{"pressureBar":180,"temperatureC":95}', version: 3, updated_at: "2026-11-28T02:39:59.621Z" },
          },
        },
        reported: {},
      } satisfies TwinGetReply,
    },
  },

  // display items, key parameters, projects, tasks
  ...catalogExamples("display-items"),
  ...catalogExamples("key-parameters"),
  "PUT /v1/projects/{projectId}": { request: projectBody, responses: { 200: project, 201: project } },
  "GET /v1/projects/{projectId}": { responses: { 200: project } },
  "GET /v2/projects/{projectId}/tasks": {
    responses: {
      200: {
        items: [
          SUCCEEDED_TASK,
          {
            taskId: "tsk_Qm2xV8rN4kL0pT7yW1cZ3a",
            projectId: "volve-f21a",
            kind: "key-parameters",
            state: "failed",
            createdAt: "2026-11-28T02:38:12.114Z",
            startedAt: "2026-11-28T02:38:12.120Z",
            completedAt: "2026-11-28T02:38:12.131Z",
            contentId: "cnt_Qm2xV8rN4kL0pT7yW1cZ3a",
            error: "project volve-f21a was deleted",
          },
        ],
        nextBefore: "tsk_Qm2xV8rN4kL0pT7yW1cZ3a",
      } satisfies TaskPage,
    },
  },
  "GET /v2/projects/{projectId}/tasks/{taskId}": {
    responses: {
      200: SUCCEEDED_TASK,
    },
  },

  // search and storage
  "GET /api/search/v2/info": {
    responses: {
      200: {
        groupId: "derrick",
        artifactId: "derrick-search",
        version: "0.1.0",
        buildTime: "2026-11-28T02:37:24.000Z",
        branch: "main",
        commitId: "0ba44d4ca5d33aae14627ae66f6ab3d4fb5b1688",
        commitMessage: "search: a record the replica cannot index is skipped and counted",
        connectedOuterServices: [
          { name: "sqlite", version: "3.54.1" },
          { name: "nats-server", version: "2.9.10" },
        ],
      } satisfies VersionInfo,
    },
  },
  "GET /api/search/v2/liveness_check": { responses: { 200: "Search Service is alive" } },
  "GET /api/search/v2/readiness_check": { responses: { 200: "Search Service is ready" } },
  "POST /api/search/v2/query": {
    request: {
      kind: WELL_KIND,
      query: 'data.FacilityName:"NO 15/9-F-21"',
      limit: 10,
      returnedFields: ["id", "kind", "data.FacilityName"],
      aggregateBy: "kind",
    } satisfies QueryRequest,
    responses: {
      200: {
        results: [{ id: RECORD_ID, kind: WELL_KIND, data: { FacilityName: "NO 15/9-F-21" } }],
        aggregations: [{ key: WELL_KIND, count: 1 }],
        phraseSuggestions: [],
        totalCount: 1,
      } satisfies QueryResponse,
    },
  },
  "POST /api/search/v2/query_with_cursor": {
    request: { kind: WELL_KIND, limit: 1, returnedFields: ["id", "data.FacilityName"] } satisfies CursorQueryRequest,
    responses: {
      200: {
        cursor: "89D7BB670FA7420679459DAD9388428A",
        results: [{ id: RECORD_ID, data: { FacilityName: "NO 15/9-F-21" } }],
        totalCount: 1,
      } satisfies CursorQueryResponse,
    },
  },
  "PUT /api/storage/v2/records": {
    request: [record] satisfies PutRecordsBody,
    responses: {
      201: {
        recordCount: 1,
        recordIds: [RECORD_ID],
        recordIdVersions: [`${RECORD_ID}:1795833601559000`],
        skippedRecordIds: [],
      } satisfies PutRecordsResponse,
    },
  },
  "GET /api/storage/v2/records/{id}": {
    responses: {
      200: { ...record, version: 1795833601559000, createUser: "writer", createTime: "2026-11-28T02:40:01.559Z" } satisfies StoredRecord,
    },
  },

  // assessments and reporting
  ...entityExamples("licenses"),
  ...entityExamples("segmentanalyses"),
  ...entityExamples("prospectanalyses"),
  ...entityExamples("fullcycleanalyses"),
  ...entityExamples("multiplescenarioanalyses"),
  "GET /assessments/v1/licenseaggregation/{id}": { responses: { 200: LICENSE_AGGREGATION }, parameters: { id: "pl-123" } },
  "GET /assessments/v1/prospectanalysisaggregation/{id}": {
    responses: { 200: PROSPECT_AGGREGATION, 202: { ...AGGREGATION_TASK_ACCEPTED, aggregation: "prospect", id: "pa-alpha-oil" } },
    parameters: { id: "pa-alpha-oil" },
  },
  "GET /assessments/v1/prospectanalysisaggregation/{id}/details": {
    responses: { 200: PROSPECT_DETAILS },
    parameters: { id: "pa-alpha-oil" },
  },
  "POST /assessments/v1/fullcycleanalysisaggregation": {
    request: {
      prospectAnalysisId: "pa-alpha-oil",
      levels: ["project", "workingInterest"],
      currency: "USD",
    } satisfies FullCycleAggregationBody,
    responses: { 200: FULL_CYCLE_AGGREGATION, 202: { ...AGGREGATION_TASK_ACCEPTED, aggregation: "fullcycle", id: "pa-alpha-oil" } },
  },
  "GET /assessments/v1/prospectmultiplescenarioanalysisaggregation/{id}": {
    responses: { 200: SCENARIO_AGGREGATION, 202: AGGREGATION_TASK_ACCEPTED },
    parameters: { id: "msa-alpha" },
  },
  "GET /assessments/v1/aggregationtasks/{taskId}": {
    responses: { 200: AGGREGATION_TASK_SUCCEEDED },
    parameters: { taskId: AGGREGATION_TASK_ACCEPTED.taskId },
  },
  "GET /assessments/v1/aggregationtasks/{taskId}/result": {
    responses: { 200: SCENARIO_AGGREGATION },
    parameters: { taskId: AGGREGATION_TASK_ACCEPTED.taskId },
  },
};
