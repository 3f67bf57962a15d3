/**
 * OSDU Search v2 and the Storage-compatible record routes over HTTP. Queries need a bearer token
 * (no appkey) and the partition header; /info and the OSDU health checks are public. Each route is
 * one request to the `search` or `storage` actor, which applies OSDU's rules and messages.
 * Bodies are read as OSDU reads them: null = absent, unknown fields ignored (subjects/search.ts).
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { Problem, notFound, subjects, unavailable, type DerrickError } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  CursorQueryRequest,
  CursorQueryResponse,
  PutRecordsBody,
  PutRecordsResponse,
  QueryRequest,
  QueryResponse,
  StoredRecord,
  VersionInfo,
  checkRecordDepth,
  invalidParameters,
  type SearchHealth,
  type StorageHealth,
} from "../../subjects/search.ts";
import { forward } from "../forward.ts";
import type { BadRequestFraming } from "../plugins/errors.ts";
import type { AuthPlugin } from "../plugins/auth.ts";
import { requestMeta } from "../request-state.ts";

const errors = { 400: Problem, 401: Problem, 403: Problem, 404: Problem, 413: Problem, 429: Problem, 503: Problem, 504: Problem };
const credentials = { auth: true, partition: true } as const;
const search = subjects.search;
const storage = subjects.storage;
const SEARCH = ["search"];
const STORAGE = ["storage"];

/**
 * OSDU answers a query body it cannot read (Jackson) or whose types are wrong with the same 400 as
 * its own rules: "Invalid parameters were given on search request". The edge's schema failures on
 * the query routes say so too, each field still named in `errors`.
 */
const osduBadRequest = (problem: DerrickError) => invalidParameters(problem.errors);
export const searchBadRequestFraming: BadRequestFraming = {
  "/api/search/v2/query": osduBadRequest,
  "/api/search/v2/query_with_cursor": osduBadRequest,
};

export const searchRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const info = async ({
    set,
    request,
  }: {
    set: { status?: number | string; headers: Record<string, string | number> };
    request: Request;
  }) => forward<VersionInfo>(set, await bus.request(search.info(), undefined, requestMeta(request)));
  const alive = () => "Search Service is alive";
  // Ready when a search actor answers (no responders → 503, as every other route would meet) and its
  // replica follows the RECORDS stream: one restarting its consumer answers from a frozen index.
  const ready = async ({ request }: { request: Request }) => {
    const { body } = await bus.request<SearchHealth>(search.health(), undefined, requestMeta(request));
    if (!body.following)
      throw unavailable(
        `the search index is not following the record stream (restarting; results are as of stream sequence ${body.appliedSeq})`,
        5,
      );
    return "Search Service is ready";
  };
  const health = { 200: t.String(), 503: Problem, 504: Problem };
  // Storage holds nothing of its own: ready when a storage actor answers and JetStream answers it for RECORDS.
  const storageAlive = () => "Storage service is alive.";
  const storageReady = async ({ request }: { request: Request }) => {
    await bus.request<StorageHealth>(storage.health(), undefined, requestMeta(request));
    return "Storage service is ready.";
  };
  const recordId = t.Object({ id: t.String({ maxLength: 1024 }) });
  return (
    new Elysia({ name: "derrick-search-routes", normalize: false })
      .use(auth)
      .get("/api/search/v2/info", info, {
        detail: { tags: SEARCH, summary: "Build and source-control information of this search service (public)" },
        response: { 200: VersionInfo, 503: Problem },
      })
      .get("/api/search/v2/info/", info, { detail: { hide: true } })
      .get("/api/search/v2/liveness_check", alive, {
        detail: { tags: SEARCH, summary: 'OSDU liveness check (public) → 200 "Search Service is alive"' },
        response: { 200: t.String() },
      })
      .get("/api/search/v2/readiness_check", ready, {
        detail: {
          tags: SEARCH,
          summary:
            'OSDU readiness check (public) → 200 "Search Service is ready" once a search actor answers and its index follows the record stream, else 503',
        },
        response: health,
      })
      // The paths OSDU's HealthCheckApi maps (under /health) answer the same.
      .get("/api/search/v2/health/liveness_check", alive, { detail: { hide: true } })
      .get("/api/search/v2/health/readiness_check", ready, { detail: { hide: true } })
      .post(
        "/api/search/v2/query",
        async ({ body, set, request, principal, partition }) =>
          forward<QueryResponse>(set, await bus.request(search.query(), { body }, requestMeta(request, principal, partition))),
        {
          ...credentials,
          body: QueryRequest,
          detail: {
            tags: SEARCH,
            summary: "Query records: Lucene query string, ranges, spatial filter, sort, aggregation (a users.datalake.* role; 401 without)",
          },
          response: { 200: QueryResponse, ...errors },
        },
      )
      .post(
        "/api/search/v2/query_with_cursor",
        async ({ body, set, request, principal, partition }) =>
          forward<CursorQueryResponse>(
            set,
            await bus.request(search["cursor.query"](), { body }, requestMeta(request, principal, partition)),
          ),
        {
          ...credentials,
          body: CursorQueryRequest,
          detail: {
            tags: SEARCH,
            summary:
              "Query with a cursor: first call without cursor, then {cursor} until a page comes back empty without one (cursor lives 90 s after each use)",
          },
          response: { 200: CursorQueryResponse, ...errors },
        },
      )
      .delete(
        "/api/search/v2/query_with_cursor/:cursor",
        async ({ params, set, request, principal, partition }) =>
          forward<void>(set, await bus.request(search["cursor.delete"](), params, requestMeta(request, principal, partition))),
        {
          ...credentials,
          params: t.Object({ cursor: t.String({ maxLength: 256 }) }),
          detail: { tags: SEARCH, summary: "Close a cursor (its issuer only) → 200 with an empty body" },
          response: { 200: t.Void(), ...errors },
        },
      )
      .put(
        "/api/storage/v2/records",
        async ({ body, set, request, principal, partition }) => {
          // Checked here too: a body nested ~45,000 levels deep cannot even be serialized for NATS.
          checkRecordDepth(body);
          return forward<PutRecordsResponse>(
            set,
            await bus.request(storage["records.put"](), { body }, requestMeta(request, principal, partition)),
          );
        },
        {
          ...credentials,
          body: PutRecordsBody,
          detail: {
            tags: STORAGE,
            summary:
              "Create or update records (group users.datalake.editors) → 201; searchable within a second. Null fields are absent; version, createUser, createTime, modifyUser, modifyTime and unknown fields are ignored (OSDU)",
          },
          response: { 201: PutRecordsResponse, ...errors },
        },
      )
      .get("/api/storage/v2/liveness_check", storageAlive, {
        detail: { tags: STORAGE, summary: 'OSDU liveness check (public) → 200 "Storage service is alive."' },
        response: { 200: t.String() },
      })
      .get("/api/storage/v2/readiness_check", storageReady, {
        detail: {
          tags: STORAGE,
          summary:
            'OSDU readiness check (public) → 200 "Storage service is ready." once a storage actor answers and reaches the RECORDS stream, else 503',
        },
        response: health,
      })
      .get(
        "/api/storage/v2/records/:id",
        async ({ params, set, request, principal, partition }) =>
          forward<StoredRecord>(set, await bus.request(storage["records.get"](), params, requestMeta(request, principal, partition))),
        {
          ...credentials,
          params: recordId,
          detail: { tags: STORAGE, summary: "The latest version of a record (its ACL must share a group with the caller)" },
          response: { 200: StoredRecord, ...errors },
        },
      )
      .post(
        "/api/storage/v2/records/:action",
        async ({ params, set, request, principal, partition }) => {
          // OSDU's `{id}:delete`: the id itself holds colons, so the verb is split off here.
          if (!params.action.endsWith(":delete")) throw notFound("no such route");
          const id = params.action.slice(0, -":delete".length);
          return forward(set, await bus.request(storage["records.delete"](), { id }, requestMeta(request, principal, partition)));
        },
        {
          ...credentials,
          params: t.Object({ action: t.String({ maxLength: 1100, description: "<record id>:delete" }) }),
          detail: {
            tags: STORAGE,
            summary: "POST /api/storage/v2/records/{id}:delete — delete a record (editors, and an owner of the record) → 204",
          },
          response: { 204: t.Void(), ...errors },
        },
      )
      .delete(
        "/api/storage/v2/records/:id",
        async ({ params, set, request, principal, partition }) =>
          forward(set, await bus.request(storage["records.purge"](), params, requestMeta(request, principal, partition))),
        {
          ...credentials,
          params: recordId,
          detail: {
            tags: STORAGE,
            summary:
              "Purge a record: it and every version are gone from storage and search (users.datalake.ops, and an owner of the record, deleted or not) → 204",
          },
          response: { 204: t.Void(), ...errors },
        },
      )
  );
};
