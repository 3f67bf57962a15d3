/** Wiring of the `identity` actor: signing key, registry bucket, seed clients, endpoints. */
import type { NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { AppCreate, AppDelete, AppkeyCheck, KeyRevoke, TokenRequest } from "../../subjects/identity.ts";
import type { Config } from "../../config/index.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { KEY_HEARTBEAT_MS, createApp, deleteApp, issueToken, listApps, listKeys, publishedJwks, revokeKey, seedClients, verifyAppkey, type IdentityDeps } from "./handlers.ts";
import { loadOrCreateSigningKey, replaceSigningKey } from "./keys.ts";
import { openRegistry } from "./registry.ts";
import { FailureThrottle } from "./throttle.ts";
import { AdmissionGate } from "../runtime/limiter.ts";
import type { Logger } from "../../platform/logger.ts";
import { reply } from "../../subjects/reply.ts";

export async function startIdentityActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const registry = await openRegistry(nc);
  const key = await loadOrCreateSigningKey(cfg.dataDir);
  if (cfg.clients) {
    const { written, removed } = await seedClients(cfg.clients, { registry });
    if (written || removed.length) options.log.info({ written, removed }, "seeded clients from DERRICK_CLIENTS");
  }
  const limits = cfg.auth.tokenEndpoint;
  const guard = {
    checks: new AdmissionGate(limits.concurrency, limits.queue),
    failures: new FailureThrottle({ maxFailures: limits.maxFailures, windowMs: limits.failureWindowMs }),
  };
  const deps: IdentityDeps = { registry, key, audience: cfg.auth.audience, tokenTtlSeconds: cfg.auth.tokenTtlSeconds, guard };
  const signing = await keepSigningKey(deps, cfg.dataDir, options.log.child({ actor: "identity" }));
  const names = subjects.identity;
  return serveActor(
    nc,
    {
      name: "identity",
      description: "embedded OAuth 2.0 issuer and app registry",
      endpoints: [
        endpoint({ name: "token", subject: names.token(), input: TokenRequest, handler: (input, ctx) => issueToken(input, deps, ctx.deadline) }),
        endpoint({ name: "jwks", subject: names.jwks(), handler: () => publishedJwks(deps) }),
        endpoint({ name: "appkey-verify", subject: names["appkey.verify"](), input: AppkeyCheck, handler: (input) => verifyAppkey(input, deps) }),
        endpoint({ name: "apps-create", subject: names["apps.create"](), input: AppCreate, handler: async (input) => reply(await createApp(input, deps), 201) }),
        endpoint({ name: "apps-list", subject: names["apps.list"](), handler: () => listApps(deps) }),
        endpoint({ name: "apps-delete", subject: names["apps.delete"](), input: AppDelete, handler: async (input) => reply(await deleteApp(input, deps), 204) }),
        endpoint({ name: "keys-list", subject: names["keys.list"](), handler: () => listKeys(deps) }),
        endpoint({ name: "keys-revoke", subject: names["keys.revoke"](), input: KeyRevoke, handler: async (input) => reply(await revokeKey(input, deps), 204) }),
      ],
    },
    options,
    () => signing.stop(),
  );
}

/**
 * Publishes this process's signing key and keeps it published (a heartbeat, so keys of issuers
 * gone for good drop out of the JWKS); when the key is revoked (`derrick keys revoke`), switches to
 * a new one at once: tokens it signed from then on verify, the revoked key's do not. Revocations
 * are followed on their tombstones (never overwritten, unlike the key's entry a heartbeat may put
 * back), and checked again at every heartbeat in case the watch missed one (a reconnect).
 */
async function keepSigningKey(deps: IdentityDeps, dataDir: string, log: Logger): Promise<{ stop(): void }> {
  let stopped = false;
  let chain: Promise<void> = Promise.resolve();
  let retry: ReturnType<typeof setTimeout> | undefined;
  // One check at a time: replace the key if it was revoked (a restored key file too), then publish.
  const check = () =>
    (chain = chain.then(async () => {
      if (stopped) return;
      try {
        if (await deps.registry.isRevoked(deps.key.kid)) {
          const revoked = deps.key.kid;
          deps.key = await replaceSigningKey(dataDir, revoked);
          log.warn({ revoked, kid: deps.key.kid }, "signing key was revoked: signing with a new key");
        }
        await deps.registry.publishKey(deps.key.publicJwk);
      } catch (error) {
        log.error({ err: error, kid: deps.key.kid }, "signing key not checked or published; retrying in 5 s");
        clearTimeout(retry);
        retry = setTimeout(() => void check(), 5_000);
        retry.unref();
      }
    }));
  const stopWatch = await deps.registry.watchRevocations((kid) => {
    if (kid === deps.key.kid) void check();
  }, (error) => log.error({ err: error }, "watch of key revocations ended; heartbeats still check every 10 min"));
  await check();
  const heartbeat = setInterval(() => void check(), KEY_HEARTBEAT_MS);
  heartbeat.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(heartbeat);
      clearTimeout(retry);
      stopWatch();
    },
  };
}
