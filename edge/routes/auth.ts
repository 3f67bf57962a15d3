/**
 * The embedded issuer's HTTP face: OAuth 2.0 client credentials (RFC 6749 §4.4) at `/v2/token`
 * and its public keys at `/.well-known/jwks.json`. Errors here follow RFC 6749 §5.2, not problem+json,
 * because OAuth clients parse that shape; refusals to try again later (429, 503, 504) are problem+json
 * like everywhere else, with Retry-After and RFC 6749's `error` member beside the problem fields.
 *
 * Each token request costs the identity actor a scrypt check, so the edge lets one remote address send at
 * most DERRICK_TOKEN_IP_RATE of them (token bucket, per edge process) before any reaches NATS; the actor's
 * own bounds: docs/authentication.md, "Token endpoint limits".
 */
import { Elysia } from "elysia";
import type { Config } from "../../config/index.ts";
import { DerrickError, Problem, notFound } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import { Jwks, OAuthError, TokenResponse, identityJwks, identityToken, type TokenRequest } from "../../subjects/identity.ts";
import { requestMeta } from "../request-state.ts";
import { createRateLimiter } from "../plugins/rate-limit.ts";

const oauthError = (status: number, error: string, description: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ error, error_description: description }), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", pragma: "no-cache", ...headers },
  });

/** Client credentials from HTTP Basic (RFC 6749 §2.3.1: form-urlencoded id and secret) or the body. */
function clientCredentials(authorization: string | undefined, form: Record<string, string>): { id?: string; secret?: string } | Response {
  if (authorization?.toLowerCase().startsWith("basic ")) {
    let decoded: string;
    try {
      decoded = atob(authorization.slice(6).trim());
    } catch {
      return oauthError(401, "invalid_client", "the Basic credentials are not valid base64", {
        "WWW-Authenticate": 'Basic realm="derrick"',
      });
    }
    const colon = decoded.indexOf(":");
    if (colon < 0)
      return oauthError(401, "invalid_client", "the Basic credentials must be id:secret", { "WWW-Authenticate": 'Basic realm="derrick"' });
    let id: string;
    let secret: string;
    try {
      id = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " "));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " "));
    } catch {
      return oauthError(401, "invalid_client", "the Basic credentials are not form-urlencoded (RFC 6749 §2.3.1)", {
        "WWW-Authenticate": 'Basic realm="derrick"',
      });
    }
    if (form.client_id && form.client_id !== id)
      return oauthError(400, "invalid_request", "client_id in the body differs from the Basic credentials");
    return { id, secret };
  }
  return { id: form.client_id, secret: form.client_secret };
}

/** The form Elysia parsed; RFC 6749 §3.2 forbids repeated parameters (they arrive as arrays). */
function readForm(request: Request, body: unknown): Record<string, string> | Response {
  const type = request.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/x-www-form-urlencoded") || typeof body !== "object" || body === null) {
    return oauthError(400, "invalid_request", "send the token request as application/x-www-form-urlencoded");
  }
  const form: Record<string, string> = {};
  for (const [key, value] of Object.entries(body)) {
    if (typeof value !== "string") return oauthError(400, "invalid_request", `the parameter ${key} appears more than once`);
    form[key] = value;
  }
  return form;
}

/** RFC 6749 error codes of the problems the token endpoint passes on (RFC 8628's slow_down for 429). */
const OAUTH_CODES: Record<number, string> = {
  429: "slow_down",
  500: "server_error",
  503: "temporarily_unavailable",
  504: "temporarily_unavailable",
};

/** The problem with RFC 6749's `error` and `error_description` members, when it has none yet. */
function withOAuthError(error: DerrickError): DerrickError {
  if (typeof error.extensions.error === "string") return error;
  const code = OAUTH_CODES[error.status] ?? (error.status >= 500 ? "server_error" : "invalid_request");
  return new DerrickError(error.status, error.detail, {
    type: error.type,
    title: error.title,
    errors: error.errors,
    retryable: error.retryable,
    headers: error.headers,
    extensions: { ...error.extensions, error: code, error_description: error.detail },
    cause: error,
  });
}

export const authRoutes = (cfg: Config, bus: Bus) => {
  const perAddress = createRateLimiter({ perSecond: cfg.auth.tokenEndpoint.addressRate, burst: cfg.auth.tokenEndpoint.addressBurst });
  return new Elysia({ name: "derrick-auth-routes" })
    .post(
      "/v2/token",
      async ({ request, body, server }): Promise<Response> => {
        if (cfg.auth.issuer) return oauthError(404, "unsupported_grant_type", `tokens are issued by ${cfg.auth.issuer}, not by derrick`);
        const form = readForm(request, body);
        if (form instanceof Response) return form;
        if (form.grant_type !== "client_credentials") {
          return oauthError(
            400,
            form.grant_type ? "unsupported_grant_type" : "invalid_request",
            form.grant_type ? `grant_type ${form.grant_type} is not supported` : "grant_type is required",
          );
        }
        const creds = clientCredentials(request.headers.get("authorization") ?? undefined, form);
        if (creds instanceof Response) return creds;
        if (!creds.id || !creds.secret)
          return oauthError(401, "invalid_client", "client_id and client_secret are required", {
            "WWW-Authenticate": 'Basic realm="derrick"',
          });
        // Without a socket (app.handle in-process) there is no address, and nothing to count.
        const address = server?.requestIP(request)?.address;
        const tokenRequest: TokenRequest = {
          client_id: creds.id,
          client_secret: creds.secret,
          ...(form.scope ? { scope: form.scope } : {}),
          ...(address ? { remote_address: address } : {}),
        };
        try {
          // Counted once the request is complete enough to cost a secret check.
          if (address) perAddress.take(address);
          const reply = await bus.request(identityToken, tokenRequest, requestMeta(request));
          return Response.json(reply.body, { headers: { "cache-control": "no-store", pragma: "no-cache" } });
        } catch (error) {
          if (error instanceof DerrickError && error.status === 401) {
            return oauthError(401, "invalid_client", "client authentication failed", { "WWW-Authenticate": 'Basic realm="derrick"' });
          }
          if (error instanceof DerrickError && error.status === 400) return oauthError(400, "invalid_request", error.detail);
          throw error instanceof DerrickError ? withOAuthError(error) : error;
        }
      },
      {
        detail: {
          tags: ["auth"],
          summary: "OAuth 2.0 client credentials grant (RFC 6749 §4.4)",
          description:
            "Form fields grant_type=client_credentials, client_id, client_secret, optional scope; or HTTP Basic client authentication (id and secret form-urlencoded, RFC 6749 §2.3.1). Errors are RFC 6749 §5.2 bodies: invalid_request, unsupported_grant_type (400; 404 when an external issuer is configured), invalid_client (401). Refusals to try later are problem+json with Retry-After and an RFC 6749 `error` member: 429 slow_down (too many token requests from this address, DERRICK_TOKEN_IP_RATE, or too many failed authentications for this client id from this address, DERRICK_TOKEN_MAX_FAILURES per DERRICK_TOKEN_FAILURE_WINDOW; no secret is checked then), 503 temporarily_unavailable (every secret check slot and the queue behind them are busy, DERRICK_TOKEN_CONCURRENCY and DERRICK_TOKEN_QUEUE).",
          requestBody: {
            required: true,
            content: {
              "application/x-www-form-urlencoded": {
                schema: {
                  type: "object",
                  required: ["grant_type"],
                  properties: {
                    grant_type: { type: "string", enum: ["client_credentials"] },
                    client_id: { type: "string", description: "required unless sent with HTTP Basic" },
                    client_secret: { type: "string", description: "required unless sent with HTTP Basic" },
                    scope: { type: "string", description: "echoed in the token's scope claim" },
                  },
                },
              },
            },
          },
        },
        response: { 200: TokenResponse, 400: OAuthError, 401: OAuthError, 404: OAuthError, 429: Problem, 503: Problem, 504: Problem },
      },
    )
    .get(
      "/.well-known/jwks.json",
      async ({ set, request }) => {
        if (cfg.auth.issuer) throw notFound(`keys are published by ${cfg.auth.issuer}`);
        set.headers["cache-control"] = "public, max-age=60";
        return (await bus.request(identityJwks, undefined, requestMeta(request))).body;
      },
      { detail: { tags: ["auth"], summary: "Public keys of the embedded issuer (JWKS)" }, response: Jwks },
    );
};
