/**
 * OSDU Search v2 and the Storage-compatible record routes over HTTP. Queries need a bearer token
 * (no appkey) and the partition header; /info and the OSDU health checks are public. Each route is
 * one request to the `search` or `storage` actor, which applies OSDU's rules and messages.
 * Bodies are read as OSDU reads them: null = absent, unknown fields ignored (subjects/search.ts).
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { notFound, unavailable } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  CursorQueryRequest,
  CursorRef,
  PutRecordsBody,
  QueryRequest,
  RecordRef,
  checkRecordDepth,
  invalidParameters,
  searchCursorDelete,
  searchCursorQuery,
  searchHealth,
  searchInfo,
  searchQuery,
  storageHealth,
  storageRecordsDelete,
  storageRecordsGet,
  storageRecordsPurge,
  storageRecordsPut,
} from "../../subjects/search.ts";
import type { AuthPlugin } from "../plugins/auth.ts";
import { problemResponse, toEdgeError } from "../plugins/errors.ts";
import { problems, relayOn, type RelayContext } from "../relay.ts";
import { requestMeta } from "../request-state.ts";

const errors = problems(400, 401, 403, 404, 413, 429, 503, 504);
const healthResponse = { 200: t.String(), ...problems(503, 504) };
const SEARCH = ["search"];
const STORAGE = ["storage"];
/** Every query and record route: bearer token and partition header. */
const searchGuard = { auth: true as const, partition: true, detail: { tags: SEARCH } };
const storageGuard = { auth: true as const, partition: true, detail: { tags: STORAGE } };

/**
 * OSDU answers a query body it cannot read (Jackson) or of wrong types with its rules' 400, "Invalid parameters
 * were given on search request"; so do the query routes, each field still named in `errors`. A mapResponse hook:
 * a route's onError would run after the edge's global one, which answers first (docs/search.md, "Endpoints").
 */
function osduBadRequest({
  request,
  set,
  code,
  error,
}: {
  request: Request;
  set: { status?: number | string };
  // Elysia sets both on the error path only; its hook types do not declare them.
  code?: unknown;
  error?: unknown;
}): Response | undefined {
  if (code !== "VALIDATION" && code !== "PARSE") return undefined;
  const problem = toEdgeError(code, error);
  if (problem.status !== 400) return undefined;
  set.status = 400;
  return problemResponse(invalidParameters(problem.errors), request);
}

/** One OSDU service's public health checks: under `base`, and hidden under each of `hiddenBases`. */
type OsduHealth = {
  base: string;
  hiddenBases?: string[];
  tags: string[];
  alive: string;
  ready: string;
  readyWhen: string;
  /** Throws (a 503) while the service is not ready. */
  check(request: Request): Promise<void>;
};

function osduHealthChecks(health: OsduHealth) {
  const alive = () => health.alive;
  const ready = async ({ request }: { request: Request }) => {
    await health.check(request);
    return health.ready;
  };
  return (app: Elysia) => {
    app
      .get(`${health.base}/liveness_check`, alive, {
        detail: { tags: health.tags, summary: `OSDU liveness check (public) → 200 "${health.alive}"` },
        response: { 200: t.String() },
      })
      .get(`${health.base}/readiness_check`, ready, {
        detail: { tags: health.tags, summary: `OSDU readiness check (public) → 200 "${health.ready}" ${health.readyWhen}, else 503` },
        response: healthResponse,
      });
    for (const base of health.hiddenBases ?? [])
      app
        .get(`${base}/liveness_check`, alive, { detail: { hide: true } })
        .get(`${base}/readiness_check`, ready, { detail: { hide: true } });
    return app;
  };
}

export const searchRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const relay = relayOn(bus);
  const info = ({ set, request }: RelayContext) => relay({ set, request }, searchInfo, undefined);
  // Ready when a search actor answers (no responders → 503, as every other route would meet) and its
  // replica follows the RECORDS stream: one restarting its consumer answers from a frozen index.
  const searchHealthChecks = osduHealthChecks({
    base: "/api/search/v2",
    // The paths OSDU's HealthCheckApi maps (under /health) answer the same.
    hiddenBases: ["/api/search/v2/health"],
    tags: SEARCH,
    alive: "Search Service is alive",
    ready: "Search Service is ready",
    readyWhen: "once a search actor answers and its index follows the record stream",
    async check(request) {
      const { body } = await bus.request(searchHealth, undefined, requestMeta(request));
      if (!body.following)
        throw unavailable(
          `the search index is not following the record stream (restarting; results are as of stream sequence ${body.appliedSeq})`,
          5,
        );
    },
  });
  // Storage holds nothing of its own: ready when a storage actor answers and JetStream answers it for RECORDS.
  const storageHealthChecks = osduHealthChecks({
    base: "/api/storage/v2",
    tags: STORAGE,
    alive: "Storage service is alive.",
    ready: "Storage service is ready.",
    readyWhen: "once a storage actor answers and reaches the RECORDS stream",
    async check(request) {
      await bus.request(storageHealth, undefined, requestMeta(request));
    },
  });
  return new Elysia({ name: "derrick-search-routes", normalize: false })
    .use(auth)
    .get("/api/search/v2/info", info, {
      detail: { tags: SEARCH, summary: "Build and source-control information of this search service (public)" },
      response: { 200: searchInfo.reply, ...problems(503) },
    })
    .get("/api/search/v2/info/", info, { detail: { hide: true } })
    .use(searchHealthChecks)
    .guard(searchGuard, (app) =>
      app
        .post("/api/search/v2/query", ({ set, request, body }) => relay({ set, request }, searchQuery, { body }), {
          body: QueryRequest,
          mapResponse: osduBadRequest,
          detail: {
            summary: "Query records: Lucene query string, ranges, spatial filter, sort, aggregation (a users.datalake.* role; 401 without)",
          },
          response: { 200: searchQuery.reply, ...errors },
        })
        .post("/api/search/v2/query_with_cursor", ({ set, request, body }) => relay({ set, request }, searchCursorQuery, { body }), {
          body: CursorQueryRequest,
          mapResponse: osduBadRequest,
          detail: {
            summary:
              "Query with a cursor: first call without cursor, then {cursor} until a page comes back empty without one (cursor lives 90 s after each use)",
          },
          response: { 200: searchCursorQuery.reply, ...errors },
        })
        .delete(
          "/api/search/v2/query_with_cursor/:cursor",
          ({ set, request, params }) => relay({ set, request }, searchCursorDelete, params),
          {
            params: CursorRef,
            detail: { summary: "Close a cursor (its issuer only) → 200 with an empty body" },
            response: { 200: searchCursorDelete.reply, ...errors },
          },
        ),
    )
    .guard(storageGuard, (app) =>
      app.put(
        "/api/storage/v2/records",
        ({ set, request, body }) => {
          // Checked here too: a body nested ~45,000 levels deep cannot even be serialized for NATS.
          checkRecordDepth(body);
          return relay({ set, request }, storageRecordsPut, { body });
        },
        {
          body: PutRecordsBody,
          detail: {
            summary:
              "Create or update records (group users.datalake.editors) → 201; searchable within a second. Null fields are absent; version, createUser, createTime, modifyUser, modifyTime and unknown fields are ignored (OSDU)",
          },
          response: { 201: storageRecordsPut.reply, ...errors },
        },
      ),
    )
    .use(storageHealthChecks)
    .guard(storageGuard, (app) =>
      app
        .get("/api/storage/v2/records/:id", ({ set, request, params }) => relay({ set, request }, storageRecordsGet, params), {
          params: RecordRef,
          detail: { summary: "The latest version of a record (its ACL must share a group with the caller)" },
          response: { 200: storageRecordsGet.reply, ...errors },
        })
        .post(
          "/api/storage/v2/records/:action",
          ({ set, request, params }) => {
            // OSDU's `{id}:delete`: the id itself holds colons, so the verb is split off here.
            if (!params.action.endsWith(":delete")) throw notFound("no such route");
            return relay({ set, request }, storageRecordsDelete, { id: params.action.slice(0, -":delete".length) });
          },
          {
            params: t.Object({ action: t.String({ maxLength: 1100, description: "<record id>:delete" }) }),
            detail: {
              summary: "POST /api/storage/v2/records/{id}:delete — delete a record (editors, and an owner of the record) → 204",
            },
            response: { 204: t.Void(), ...errors },
          },
        )
        .delete("/api/storage/v2/records/:id", ({ set, request, params }) => relay({ set, request }, storageRecordsPurge, params), {
          params: RecordRef,
          detail: {
            summary:
              "Purge a record: it and every version are gone from storage and search (users.datalake.ops, and an owner of the record, deleted or not) → 204",
          },
          response: { 204: t.Void(), ...errors },
        }),
    );
};
