/** Wiring of the `identity` actor: signing key, registry bucket, seed clients, endpoints. */
import type { NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { AppCreate, AppDelete, AppkeyCheck, TokenRequest } from "../../subjects/identity.ts";
import type { Config } from "../../config/index.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { createApp, deleteApp, issueToken, listApps, publishedJwks, seedClients, verifyAppkey, type IdentityDeps } from "./handlers.ts";
import { loadOrCreateSigningKey } from "./keys.ts";
import { openRegistry } from "./registry.ts";
import { reply } from "../../subjects/reply.ts";

export async function startIdentityActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const registry = await openRegistry(nc);
  const key = await loadOrCreateSigningKey(cfg.dataDir);
  await registry.publishKey(key.publicJwk);
  if (cfg.clients) {
    const { written, removed } = await seedClients(cfg.clients, { registry });
    if (written || removed.length) options.log.info({ written, removed }, "seeded clients from DERRICK_CLIENTS");
  }
  const deps: IdentityDeps = { registry, key, audience: cfg.auth.audience, tokenTtlSeconds: cfg.auth.tokenTtlSeconds };
  const names = subjects.identity;
  return serveActor(
    nc,
    {
      name: "identity",
      description: "embedded OAuth 2.0 issuer and app registry",
      endpoints: [
        endpoint({ name: "token", subject: names.token(), input: TokenRequest, handler: (input) => issueToken(input, deps) }),
        endpoint({ name: "jwks", subject: names.jwks(), handler: () => publishedJwks(deps) }),
        endpoint({ name: "appkey-verify", subject: names["appkey.verify"](), input: AppkeyCheck, handler: (input) => verifyAppkey(input, deps) }),
        endpoint({ name: "apps-create", subject: names["apps.create"](), input: AppCreate, handler: async (input) => reply(await createApp(input, deps), 201) }),
        endpoint({ name: "apps-list", subject: names["apps.list"](), handler: () => listApps(deps) }),
        endpoint({ name: "apps-delete", subject: names["apps.delete"](), input: AppDelete, handler: async (input) => reply(await deleteApp(input, deps), 204) }),
      ],
    },
    options,
  );
}
