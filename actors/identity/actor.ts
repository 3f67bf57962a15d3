/** Wiring of the `identity` actor: signing key, registry bucket, configured clients, deleted clients' cleanup, endpoints. */
import type { NatsConnection } from "@nats-io/nats-core";
import { Bus } from "../../platform/transport/index.ts";
import {
  identityAppkeyVerify,
  identityAppsCreate,
  identityAppsDelete,
  identityAppsList,
  identityJwks,
  identityKeysList,
  identityKeysRevoke,
  identityToken,
} from "../../subjects/identity.ts";
import { notificationsClientForget, type ClientForget } from "../../subjects/notifications.ts";
import type { Config } from "../../config/index.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import {
  KEY_HEARTBEAT_MS,
  createApp,
  deleteApp,
  forgetDeletedClients,
  issueToken,
  listApps,
  listKeys,
  publishedJwks,
  revokeKey,
  seedClient,
  seedClients,
  verifyAppkey,
  type IdentityDeps,
} from "./handlers.ts";
import { loadOrCreateSigningKey, replaceSigningKey } from "./keys.ts";
import { openRegistry, type Registry } from "./registry.ts";
import { FailureThrottle } from "./throttle.ts";
import { AdmissionGate } from "../runtime/limiter.ts";
import type { Logger } from "../../platform/logger.ts";
import { reply } from "../../subjects/reply.ts";
import { tokenMetrics } from "./metrics.ts";

export async function startIdentityActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: "identity" });
  // Set once the signing key is kept: a registry deleted at runtime is made again with the configured clients
  // and this process's key put back, so tokens keep being issued and verified without a restart.
  let restore: () => Promise<unknown> = async () => undefined;
  const registry = await openRegistry(nc, options.storage, { log, onRecreated: () => restore() });
  const key = await loadOrCreateSigningKey(cfg.dataDir);
  const seed = async () => {
    if (cfg.demoClient && (await seedClient(cfg.demoClient, { registry })))
      log.info({ client: cfg.demoClient.client_id }, "created the demo client");
    if (!cfg.clients) return;
    const { written, removed } = await seedClients(cfg.clients, { registry, tokenTtlSeconds: cfg.auth.tokenTtlSeconds });
    if (written || removed.length) log.info({ written, removed }, "seeded clients from DERRICK_CLIENTS");
  };
  await seed();
  // Also finishes what an earlier run left pending (a notifications actor that was down).
  const forgetting = keepForgettingDeletedClients(nc, registry, log);
  const limits = cfg.auth.tokenEndpoint;
  const guard = {
    checks: new AdmissionGate(limits.concurrency, limits.queue),
    failures: new FailureThrottle({ maxFailures: limits.maxFailures, windowMs: limits.failureWindowMs }),
  };
  const deps: IdentityDeps = { registry, key, audience: cfg.auth.audience, tokenTtlSeconds: cfg.auth.tokenTtlSeconds, guard };
  const signing = await keepSigningKey(deps, cfg.dataDir, log);
  const tokens = options.metrics ? tokenMetrics(options.metrics) : undefined;
  restore = async () => {
    await seed();
    await signing.publish();
  };
  return serveActor(
    nc,
    {
      name: "identity",
      description: "embedded OAuth 2.0 issuer and app registry",
      endpoints: [
        endpoint(identityToken, (input, ctx) =>
          issueToken(input, deps, ctx.deadline).then(
            (token) => {
              tokens?.issued();
              return token;
            },
            (error: unknown) => {
              tokens?.failed(error);
              throw error;
            },
          ),
        ),
        endpoint(identityJwks, () => publishedJwks(deps)),
        endpoint(identityAppkeyVerify, (input) => verifyAppkey(input, deps)),
        endpoint(identityAppsCreate, async (input) => reply(await createApp(input, deps), 201)),
        endpoint(identityAppsList, () => listApps(deps)),
        endpoint(identityAppsDelete, async (input) => {
          await deleteApp(input, deps);
          // Usually the subscriptions are gone when this answers; if not, the next passes remove them.
          await forgetting.now(FORGET_WAIT_MS);
          return reply(undefined, 204);
        }),
        endpoint(identityKeysList, () => listKeys(deps)),
        endpoint(identityKeysRevoke, async (input) => reply(await revokeKey(input, deps), 204)),
      ],
    },
    options,
    async () => {
      registry.close();
      forgetting.stop();
      await signing.stop();
    },
  );
}

/** How long `apps delete` waits for the notifications actor before answering anyway. */
const FORGET_WAIT_MS = 2_000;
/** How soon a pass runs again while a deleted client's subscriptions are pending. */
const FORGET_RETRY_MS = 5_000;
/** Otherwise: the records of deleted clients are dropped when their ids become reusable. */
const FORGET_IDLE_MS = 10 * 60_000;

/**
 * Runs forgetDeletedClients now and then: at once, after every deletion, every 5 s while a deleted
 * client's subscriptions are not confirmed removed, else every 10 min. One pass at a time. A
 * notifications actor that does not answer is logged once per client (warn), not at every pass.
 */
function keepForgettingDeletedClients(
  nc: NatsConnection,
  registry: Registry,
  log: Logger,
): { now(waitMs: number): Promise<void>; stop(): void } {
  const bus = new Bus(nc, { timeoutMs: FORGET_WAIT_MS });
  const forget = (request: ClientForget) => bus.request(notificationsClientForget, request);
  const warned = new Set<string>();
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let chain: Promise<void> = Promise.resolve();
  const run = () =>
    (chain = chain.then(async () => {
      if (stopped) return;
      clearTimeout(timer);
      let again = FORGET_IDLE_MS;
      try {
        const pass = await forgetDeletedClients({ registry, forget });
        for (const { client_id, error } of pass.failed) {
          if (warned.has(client_id)) continue;
          warned.add(client_id);
          log.warn(
            { err: error, client_id },
            "a deleted client's notification subscriptions are not removed yet (the notifications actor did not answer); retrying every 5 s",
          );
        }
        const failing = new Set(pass.failed.map((f) => f.client_id));
        for (const client_id of warned) if (!failing.has(client_id)) warned.delete(client_id);
        if (pass.pending) again = FORGET_RETRY_MS;
      } catch (error) {
        if (stopped) return; // the connection is draining
        log.error({ err: error }, "deleted clients not checked; retrying in 5 s");
        again = FORGET_RETRY_MS;
      }
      if (stopped) return;
      timer = setTimeout(() => void run(), again);
      timer.unref();
    }));
  void run();
  return {
    async now(waitMs) {
      let timeout: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([run(), new Promise<void>((resolve) => (timeout = setTimeout(resolve, waitMs)))]);
      clearTimeout(timeout);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      bus.close();
    },
  };
}

/**
 * Publishes this process's signing key and keeps it published (a heartbeat, so keys of issuers gone for good leave the
 * JWKS), switching to a new key at once when it is revoked (docs/authentication.md). Revocations are followed on their
 * tombstones, which a heartbeat never overwrites, and checked again at each heartbeat in case the watch missed one.
 */
async function keepSigningKey(
  deps: IdentityDeps,
  dataDir: string,
  log: Logger,
): Promise<{ publish(): Promise<void>; stop(): Promise<void> }> {
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
  // Idempotent: a revocation seen twice checks the key twice.
  const stopWatch = await deps.registry.watchRevocations((kid) => {
    if (kid === deps.key.kid) void check();
  }, log);
  await check();
  const heartbeat = setInterval(() => void check(), KEY_HEARTBEAT_MS);
  heartbeat.unref();
  return {
    publish: check,
    async stop() {
      stopped = true;
      clearInterval(heartbeat);
      clearTimeout(retry);
      await stopWatch();
    },
  };
}
