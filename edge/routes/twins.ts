/**
 * Twin properties over HTTP: PUT/GET `/api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties`
 * and DELETE `…/twin-properties/{group}/{name}`. Bearer token only (no partition header); the twins
 * actor checks the groups (twins.writers, twins.readers) and does the work.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { contentTooLarge } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  TWIN_NAME_PATTERN,
  TWIN_REQUEST_MAX_BYTES,
  TwinPath,
  TwinPropertyPath,
  TwinUpdateBody,
  parseIfMatch,
  twinsDelete,
  twinsGet,
  twinsPut,
} from "../../subjects/twins.ts";
import type { AuthPlugin } from "../plugins/auth.ts";
import type { RouteBodyLimits } from "../plugins/body.ts";
import { problems, relayOn } from "../relay.ts";

const BASE = "/api/twin-properties/v1/:organization/:environment/:twinId/twin-properties";
const errors = problems(400, 401, 403, 409, 412, 413, 503, 504);
/** Writes also meet the storage bounds: the twin's bucket full, or no room for another twin. */
const writeErrors = { ...errors, ...problems(507) };

/** A PUT is at most 1 MiB (docs/contract.md), whatever DERRICK_BODY_LIMIT allows the other routes; checked before the body is read. */
export const twinBodyLimits: RouteBodyLimits = {
  [BASE]: {
    bytes: TWIN_REQUEST_MAX_BYTES,
    tooLarge: (size) =>
      contentTooLarge(
        size === undefined
          ? `the request body is over ${TWIN_REQUEST_MAX_BYTES} bytes, the most a twin properties PUT may hold`
          : `the request body is ${size} bytes; a twin properties PUT may hold at most ${TWIN_REQUEST_MAX_BYTES}`,
      ),
  },
};

export const twinRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const relay = relayOn(bus);
  return new Elysia({ name: "derrick-twin-routes", normalize: false })
    .use(auth)
    .guard({ auth: true, detail: { tags: ["twin-properties"] } }, (app) =>
      app
        .put(
          BASE,
          ({ set, request, body, params }) => {
            const ifMatch = parseIfMatch(request.headers.get("if-match"));
            return relay({ set, request }, twinsPut, { ...params, ...body, ...(ifMatch !== undefined ? { ifMatch } : {}) });
          },
          {
            params: TwinPath,
            body: TwinUpdateBody,
            detail: { summary: "Set desired twin properties of one group; all land together or none do (If-Match → 412)" },
            response: { 200: twinsPut.reply, ...writeErrors },
          },
        )
        .get(
          BASE,
          ({ set, request, params, query }) =>
            relay({ set, request }, twinsGet, { ...params, ...(query.group !== undefined ? { group: query.group } : {}) }),
          {
            params: TwinPath,
            query: t.Object({ group: t.Optional(t.String({ pattern: TWIN_NAME_PATTERN })) }),
            detail: { summary: "Desired and reported twin properties with versions and times (group filter; ETag with a group)" },
            response: { 200: twinsGet.reply, ...errors },
          },
        )
        .delete(`${BASE}/:group/:name`, ({ set, request, params }) => relay({ set, request }, twinsDelete, params), {
          params: TwinPropertyPath,
          detail: { summary: "Delete one twin property (desired and reported)" },
          response: { 204: t.Void(), ...writeErrors },
        }),
    );
};
