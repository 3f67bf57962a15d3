/**
 * The identity actor's series in its process's registry: tokens issued by the embedded issuer, and token requests
 * refused, by reason, so a credential-stuffing run or an overloaded issuer shows on a dashboard.
 */
import { Counter, type Registry } from "prom-client";
import { toDerrickError } from "../../subjects/index.ts";

/** Why a token request got no token: a failed client authentication, or a refusal before the check. */
export const TOKEN_FAILURE_REASONS = ["invalid_client", "throttled", "overloaded", "timeout", "error"] as const;
export type TokenFailureReason = (typeof TOKEN_FAILURE_REASONS)[number];

export type TokenMetrics = { issued(): void; failed(error: unknown): void };

const byRegistry = new WeakMap<Registry, TokenMetrics>();

/** The token series of `registry`, made once per registry (a test process may run several identity actors). */
export function tokenMetrics(registry: Registry): TokenMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  const issued = new Counter({
    name: "derrick_tokens_issued_total",
    help: "Access tokens issued by the embedded issuer (POST /v2/token)",
    registers: [registry],
  });
  const failures = new Counter({
    name: "derrick_token_failures_total",
    help: "Token requests answered without a token, by reason: invalid_client (bad id or secret), throttled (too many failures), overloaded, timeout, error",
    labelNames: ["reason"],
    registers: [registry],
  });
  // Every reason is exported from the start (at 0), so a rate over it exists before the first failure.
  for (const reason of TOKEN_FAILURE_REASONS) failures.inc({ reason }, 0);
  const metrics: TokenMetrics = {
    issued: () => issued.inc(),
    failed: (error) => failures.inc({ reason: failureReason(error) }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}

/** The reason label of a token request's refusal, from the status it is answered with. */
export function failureReason(error: unknown): TokenFailureReason {
  switch (toDerrickError(error).status) {
    case 401:
      return "invalid_client";
    case 429:
      return "throttled";
    case 503:
      return "overloaded";
    case 504:
      return "timeout";
    default:
      return "error";
  }
}
