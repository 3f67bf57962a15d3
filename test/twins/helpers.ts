/** Shared steps of the twins tests: a twin's REST path, PUTs and reads as the admin, a Redis mirror's settings. */
import type { CallInit, EdgeClient } from "../harness/derrick.ts";
import { getJson } from "../harness/json.ts";
import type { TwinGetReply } from "../../subjects/twins.ts";

/** The REST path of twin `twinId` of acme/prod. */
export const twinPath = (twinId: string) => `/api/twin-properties/v1/acme/prod/${twinId}/twin-properties`;

/** PUTs a body to a twin, as the admin unless `init` says otherwise (twin routes take no partition). */
export const putTwin = (derrick: EdgeClient, twinId: string, body: unknown, init: CallInit = {}) =>
  derrick.call(twinPath(twinId), { method: "PUT", body: JSON.stringify(body), as: "admin", partition: null, ...init });

/** A twin's desired and reported values as the admin reads them (200): one group, or all. */
export const twinState = (derrick: EdgeClient, twinId: string, group?: string) =>
  getJson<TwinGetReply>(derrick, group ? `${twinPath(twinId)}?group=${group}` : twinPath(twinId), { as: "admin", partition: null });

/** Settings that mirror twin `twinId` of acme/prod into the Redis at `redis.url`. */
export const mirrorTo = (twinId: string, redis: { url: string }) => ({
  DERRICK_TWIN_MIRRORS: JSON.stringify([{ organization: "acme", environment: "prod", twinId, redis: redis.url }]),
});
