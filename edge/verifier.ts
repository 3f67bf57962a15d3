/**
 * Bearer token verification with jose: an external issuer's JWKS over HTTP, or the embedded
 * issuer's keys fetched from the identity actor over NATS (refreshed when a token names an unknown
 * key, and once older than DERRICK_AUTH_JWKS_MAX_AGE, so a revoked key stops working). Verified tokens are cached until they expire so the hot path skips the signature check.
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  errors as joseErrors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
} from "jose";
import type { Config } from "../config/index.ts";
import { toDerrickError, unauthorized, unavailable, type Principal, TokenKind, DerrickError } from "../subjects/index.ts";
import type { Bus } from "../platform/transport/index.ts";
import { EMBEDDED_ISSUER, identityJwks } from "../subjects/identity.ts";
import { BoundedCache } from "../platform/bounded-cache.ts";

const CACHE_MAX = 10_000;
const JWKS_REFRESH_MS = 5_000;

/**
 * A verified token: its principal, and whether a client claim (`client_id`, else `azp`) named the client.
 * Without one the client id falls back to `sub`, which identifies the caller but names no client an appkey
 * could belong to (docs/contract.md: the appkey belongs to the token's client).
 */
export type Verified = { principal: Principal; clientClaimed: boolean };

export type Verifier = { verify(token: string): Promise<Verified> };

const nonEmpty = (value: unknown): value is string => typeof value === "string" && value.length > 0;

export function principalFromClaims(claims: JWTPayload): Principal {
  const sub = typeof claims.sub === "string" ? claims.sub : undefined;
  const clientId = [claims.client_id, claims.azp, sub].find(nonEmpty);
  if (!sub || !clientId) throw unauthorized("the token names no subject", 'Bearer error="invalid_token"');
  const groups = Array.isArray(claims.groups) ? claims.groups.filter((g): g is string => typeof g === "string") : [];
  return { clientId, subject: sub, groups, kind: sub === clientId ? TokenKind.service : TokenKind.user };
}

/** Whether the token names its client in `client_id` or `azp` (not only through the `sub` fallback). */
export const claimsNameClient = (claims: JWTPayload) => nonEmpty(claims.client_id) || nonEmpty(claims.azp);

export function createVerifier(cfg: Config, bus: Bus): Verifier {
  const issuer = cfg.auth.issuer ?? EMBEDDED_ISSUER;
  const maxAge = cfg.auth.jwksMaxAgeMs;
  const { keys, fetchedAt } = cfg.auth.jwksUrl ? remoteKeys(new URL(cfg.auth.jwksUrl), maxAge) : embeddedKeys(bus, maxAge);
  // Read with peek: when full, the token verified longest ago goes first.
  const cache = new BoundedCache<string, { verified: Verified; until: number }>({ max: CACHE_MAX });

  return {
    async verify(token) {
      const hit = cache.peek(token);
      if (hit && hit.until > Date.now()) return hit.verified;
      if (hit) cache.delete(token);
      // Read before the check: keys refreshed while it ran (a key withdrawn) must not lend their
      // fresh fetch time to a token the older keys verified. A refresh during the check makes this
      // older, so at worst the token is not cached and is checked again with the new keys.
      const keysAsOf = fetchedAt();
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer,
          audience: cfg.auth.audience,
          algorithms: ["ES256", "RS256", "PS256", "EdDSA", "ES384"],
          requiredClaims: ["exp"],
        }));
      } catch (error) {
        if (error instanceof DerrickError) throw error;
        throw unauthorized(describeJoseError(error), 'Bearer error="invalid_token"');
      }
      const verified: Verified = { principal: principalFromClaims(payload), clientClaimed: claimsNameClient(payload) };
      // A verified token is trusted no longer than the keys that verified it (rotation, removal):
      // until those keys are due for a refetch, not a full max age from now.
      const until = Math.min(payload.exp! * 1000, keysAsOf + maxAge);
      if (until > Date.now()) cache.set(token, { verified, until });
      return verified;
    },
  };
}

type KeySource = { keys: JWTVerifyGetKey /** When the keys in use were fetched (a lower bound). */; fetchedAt(): number };

/** An external issuer's JWKS, fetched by jose (timeouts, size and content checks), held like the embedded issuer's keys. */
function remoteKeys(url: URL, maxAgeMs: number): KeySource {
  const remote = createRemoteJWKSet(url, { cacheMaxAge: maxAgeMs });
  return heldKeys(
    async () => {
      await remote.reload();
      return remote.jwks()!;
    },
    maxAgeMs,
    (error) =>
      unavailable(
        `the token issuer's keys cannot be fetched from ${url.origin} (${(error as Error)?.message ?? String(error)}); try again shortly`,
        5,
      ),
  );
}

function embeddedKeys(bus: Bus, maxAgeMs: number): KeySource {
  return heldKeys(async () => (await bus.request(identityJwks, undefined)).body as JSONWebKeySet, maxAgeMs, toDerrickError);
}

/**
 * Keys refetched once older than maxAge (a withdrawn key stops working) and for an unknown key (a new one
 * works at once, at most every JWKS_REFRESH_MS). An unreachable source leaves the held keys in use: an outage
 * must not turn into 401 "invalid token", on which clients drop credentials; with no keys yet it is 503.
 */
function heldKeys(fetchJwks: () => Promise<JSONWebKeySet>, maxAgeMs: number, unreachable: (error: unknown) => DerrickError): KeySource {
  let local: JWTVerifyGetKey | undefined;
  let fetchedAt = 0;
  /** The last fetch failed: the source is down, and requests must not wait for each new try. */
  let failing = false;
  let inFlight: Promise<void> | undefined;
  // One fetch at a time, however many requests find the keys stale.
  const refresh = () =>
    (inFlight ??= (async () => {
      try {
        local = createLocalJWKSet(await fetchJwks());
        fetchedAt = Date.now();
        failing = false;
      } catch (error) {
        if (!local) throw error instanceof DerrickError ? error : unreachable(error);
        fetchedAt = Date.now() - maxAgeMs + JWKS_REFRESH_MS;
        failing = true;
      } finally {
        inFlight = undefined;
      }
    })());
  const keys: JWTVerifyGetKey = async (header, token) => {
    if (!local) await refresh();
    else if (Date.now() - fetchedAt > maxAgeMs) {
      // Normally the request waits for fresh keys (a withdrawn key stops working on time); while the
      // source is down it goes on with the keys held and the next try runs in the background.
      const fresh = refresh();
      if (failing) void fresh.catch(() => undefined);
      else await fresh;
    }
    try {
      return await local!(header, token);
    } catch (error) {
      // A new key may have been published since: refresh, but not on every bad token.
      if (error instanceof joseErrors.JWKSNoMatchingKey && Date.now() - fetchedAt > JWKS_REFRESH_MS) {
        await refresh();
        return local!(header, token);
      }
      throw error;
    }
  };
  return { keys, fetchedAt: () => fetchedAt };
}

function describeJoseError(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return "the token has expired";
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `the token's ${error.claim} claim is not accepted`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "the token's signature is not valid";
  if (error instanceof joseErrors.JWKSNoMatchingKey) return "the token was not signed by a known key";
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return "the token's algorithm is not accepted";
  if (error instanceof joseErrors.JWTInvalid || error instanceof joseErrors.JWSInvalid) return "the token is malformed";
  return "the token is not valid";
}
