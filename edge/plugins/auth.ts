/**
 * Credentials and partition, as route options:
 *   { auth: true }                    bearer token required
 *   { auth: { appkey: true } }        bearer token and an `appkey` registered to the token's client
 *   { partition: true }               `slb-partition-id` / `data-partition-id` required and known
 * Checks run in Elysia's transform phase, before body validation, so an unauthenticated caller
 * learns nothing about a route's body rules.
 */
import { Elysia, type DocumentDecoration } from "elysia";
import type { Config } from "../../config/index.ts";
import { badRequest, forbidden, isToken, unauthorized, type Principal } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import { APPKEY_CACHE_MS, identityAppkeyVerify } from "../../subjects/identity.ts";
import type { Verified, Verifier } from "../verifier.ts";
import { createRateLimiter } from "./rate-limit.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";

export type AuthOptions = true | { appkey?: boolean };

const PARTITION_HEADERS = ["slb-partition-id", "data-partition-id"] as const;
const APPKEY_CACHE_MAX = 10_000;

const BEARER_ONLY = [{ bearer: [] }];
const BEARER_AND_APPKEY = [{ bearer: [], appkey: [] }];
/**
 * The partition header parameters. @elysiajs/openapi replaces a route's `detail.parameters` with
 * those of its path and query schemas, so the macro also marks the operation (PARTITION_MARK) and
 * the OpenAPI plugin adds these where they went missing (openapi.ts).
 */
export const PARTITION_PARAMETERS = [
  {
    name: "slb-partition-id",
    in: "header",
    required: false,
    description: "Data partition (this or data-partition-id is required; both must agree when both are sent)",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,128}$" },
  },
  {
    name: "data-partition-id",
    in: "header",
    required: false,
    description: "OSDU name of the partition header",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,128}$" },
  },
];

/** Operation extension set on routes that need the partition header; removed from the served document. */
export const PARTITION_MARK = "x-derrick-partition";

const principals = new WeakMap<Request, Principal>();

/** The caller a request was authenticated as, if it was (the access log names its client). */
export const principalOf = (request: Request): Principal | undefined => principals.get(request);
const partitions = new WeakMap<Request, string>();

/** The partition a request named, once a route that takes one checked it. */
export const requestPartition = (request: Request): string | undefined => partitions.get(request);

export function bearerToken(header: string | null | undefined): string {
  if (!header) throw unauthorized("an Authorization: Bearer token is required");
  const match = /^Bearer\s+([A-Za-z0-9._~+/=-]+)\s*$/i.exec(header);
  if (!match) throw unauthorized("the Authorization header must be `Bearer <token>`", 'Bearer error="invalid_request"');
  return match[1]!;
}

/** Reads the partition headers (either; both must agree) and checks it is served here. */
function partitionOf(request: Request, known: readonly string[]): string {
  const given = PARTITION_HEADERS.map((name) => ({ name, value: request.headers.get(name)?.trim() })).filter(
    (h): h is { name: (typeof PARTITION_HEADERS)[number]; value: string } => !!h.value,
  );
  if (given.length === 0)
    throw badRequest("the header slb-partition-id (or data-partition-id) is required", [
      { pointer: "/headers/slb-partition-id", message: "is required" },
    ]);
  if (given.length === 2 && given[0]!.value !== given[1]!.value) {
    throw badRequest("slb-partition-id and data-partition-id name different partitions", [
      { pointer: "/headers/data-partition-id", message: "differs from slb-partition-id" },
    ]);
  }
  const { name, value: partition } = given[0]!;
  if (!isToken(partition))
    throw badRequest("the partition id must be letters, digits, '_' or '-'", [
      { pointer: `/headers/${name}`, message: "is not a valid partition id" },
    ]);
  if (!known.includes(partition)) throw forbidden(`partition ${partition} is not served by this deployment (DERRICK_PARTITIONS)`);
  return partition;
}

function appkeyChecker(bus: Bus) {
  const cache = new BoundedCache<string, true>({ max: APPKEY_CACHE_MAX, ttlMs: APPKEY_CACHE_MS });
  /** Checks under way: a client's first requests at once share one (its answer holds APPKEY_CACHE_MS either way). */
  const checking = new Map<string, Promise<void>>();
  return async (appkey: string | undefined, { principal, clientClaimed }: Verified, requestId?: string) => {
    if (!appkey) throw unauthorized("the appkey header is required");
    // The `sub` fallback identifies a caller, not a client: no appkey can belong to such a token.
    if (!clientClaimed)
      throw unauthorized("the token names no client (client_id or azp), so no appkey can belong to it", 'Bearer error="invalid_token"');
    const cacheKey = `${principal.clientId}\u0000${appkey}`;
    // Read with peek: the oldest check goes first when full, and each lives APPKEY_CACHE_MS from its check.
    if (cache.peek(cacheKey)) return;
    let check = checking.get(cacheKey);
    if (!check) {
      check = bus
        .request(identityAppkeyVerify, { appkey, client_id: principal.clientId }, { requestId })
        .then(() => void cache.set(cacheKey, true))
        .finally(() => checking.delete(cacheKey));
      checking.set(cacheKey, check);
    }
    await check;
  };
}

export const authPlugin = (cfg: Config, bus: Bus, verifier: Verifier) => {
  const checkAppkey = appkeyChecker(bus);
  const limiter = createRateLimiter({ perSecond: cfg.http.rateLimit, burst: cfg.http.rateBurst });
  return new Elysia({ name: "derrick-auth" }).macro({
    auth: (options: AuthOptions) => ({
      // Documents the credentials in OpenAPI: both schemes in one requirement = both needed.
      detail: { security: options !== true && options.appkey ? BEARER_AND_APPKEY : BEARER_ONLY } as DocumentDecoration,
      // Headers read from the request: `headers` in a hook makes Elysia copy every header into an object per request.
      async transform({ request }) {
        const verified = await verifier.verify(bearerToken(request.headers.get("authorization")));
        const { principal } = verified;
        // Counted once the client is known and before any other work (appkey lookup, body, NATS).
        limiter.take(principal.clientId);
        if (options !== true && options.appkey) await checkAppkey(request.headers.get("appkey") ?? undefined, verified);
        principals.set(request, principal);
      },
      resolve({ request }) {
        return { principal: principals.get(request)! };
      },
    }),
    partition: (enabled: boolean) => ({
      detail: (enabled ? { parameters: PARTITION_PARAMETERS, [PARTITION_MARK]: true } : {}) as DocumentDecoration,
      transform({ request }) {
        if (enabled) partitions.set(request, partitionOf(request, cfg.partitions));
      },
      resolve({ request }) {
        return { partition: partitions.get(request)! };
      },
    }),
  });
};

export type AuthPlugin = ReturnType<typeof authPlugin>;
