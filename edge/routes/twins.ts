/**
 * Twin properties over HTTP: PUT/GET `/api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties`
 * and DELETE `…/twin-properties/{group}/{name}`. Bearer token only (no partition header); the twins
 * actor checks the groups (twins.writers, twins.readers) and does the work.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { Problem, contentTooLarge, subjects } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  TwinGetReply,
  TwinPath,
  TwinPutReply,
  TwinUpdateBody,
  TWIN_NAME_PATTERN,
  TWIN_REQUEST_MAX_BYTES,
  parseIfMatch,
} from "../../subjects/twins.ts";
import { forward } from "../forward.ts";
import type { AuthPlugin } from "../plugins/auth.ts";
import { requestMeta } from "../request-state.ts";

const BASE = "/api/twin-properties/v1/:organization/:environment/:twinId/twin-properties";
const errors = { 400: Problem, 401: Problem, 403: Problem, 409: Problem, 412: Problem, 413: Problem, 503: Problem, 504: Problem };
/** Writes also meet the storage bounds: the twin's bucket full, or no room for another twin. */
const writeErrors = { ...errors, 507: Problem };

/** A PUT is at most 1 MiB (docs/contract.md), whatever DERRICK_BODY_LIMIT allows the other routes. */
const requestTooLarge = (size: number) =>
  contentTooLarge(`the request body is ${size} bytes; a twin properties PUT may hold at most ${TWIN_REQUEST_MAX_BYTES}`);

export const twinRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) =>
  new Elysia({ name: "derrick-twin-routes", normalize: false })
    .use(auth)
    .put(
      BASE,
      async ({ params, body, set, request, principal }) => {
        // A chunked body has no declared length: measured as parsed (its JSON without whitespace).
        if (!request.headers.has("content-length")) {
          const size = Buffer.byteLength(JSON.stringify(body));
          if (size > TWIN_REQUEST_MAX_BYTES) throw requestTooLarge(size);
        }
        const ifMatch = parseIfMatch(request.headers.get("if-match"));
        const input = { ...params, group: body.group, twins: body.twins, ...(ifMatch !== undefined ? { ifMatch } : {}) };
        return forward<TwinPutReply>(set, await bus.request(subjects.twins.put(), input, requestMeta(request, principal)));
      },
      {
        auth: true,
        params: TwinPath,
        beforeHandle: ({ request }) => {
          const length = Number(request.headers.get("content-length"));
          if (Number.isFinite(length) && length > TWIN_REQUEST_MAX_BYTES) throw requestTooLarge(length);
        },
        body: TwinUpdateBody,
        detail: {
          tags: ["twin-properties"],
          summary: "Set desired twin properties of one group; all land together or none do (If-Match → 412)",
        },
        response: { 200: TwinPutReply, ...writeErrors },
      },
    )
    .get(
      BASE,
      async ({ params, query, set, request, principal }) =>
        forward<TwinGetReply>(
          set,
          await bus.request(
            subjects.twins.get(),
            { ...params, ...(query.group !== undefined ? { group: query.group } : {}) },
            requestMeta(request, principal),
          ),
        ),
      {
        auth: true,
        params: TwinPath,
        query: t.Object({ group: t.Optional(t.String({ pattern: TWIN_NAME_PATTERN })) }),
        detail: {
          tags: ["twin-properties"],
          summary: "Desired and reported twin properties with versions and times (group filter; ETag with a group)",
        },
        response: { 200: TwinGetReply, ...errors },
      },
    )
    .delete(
      `${BASE}/:group/:name`,
      async ({ params, set, request, principal }) =>
        forward(set, await bus.request(subjects.twins.delete(), params, requestMeta(request, principal))),
      {
        auth: true,
        params: t.Object({
          ...TwinPath.properties,
          group: t.String({ pattern: TWIN_NAME_PATTERN }),
          name: t.String({ pattern: TWIN_NAME_PATTERN }),
        }),
        detail: { tags: ["twin-properties"], summary: "Delete one twin property (desired and reported)" },
        response: { 204: t.Void(), ...writeErrors },
      },
    );
