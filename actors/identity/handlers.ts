/** The embedded OAuth 2.0 issuer (client credentials) and the app registry operations. */
import { DerrickError, conflict, gatewayTimeout, notFound, unauthorized } from "../../subjects/index.ts";
import {
  APPKEY_CACHE_MS,
  type AppCreate,
  type AppCredentials,
  type AppDelete,
  type AppList,
  type AppkeyCheck,
  type AppkeyCheckReply,
  type Jwks,
  type KeyRevoke,
  type SigningKeyList,
  type TokenRequest,
  type TokenResponse,
} from "../../subjects/identity.ts";
import type { ClientForget } from "../../subjects/notifications.ts";
import type { ClientSeed } from "../../config/index.ts";
import { SUBJECT_TOKEN_PATTERN } from "../../config/schema.ts";
import type { DeletedClient, PublishedKey, Registry } from "./registry.ts";
import { mintToken, type SigningKey } from "./keys.ts";
import { appkeyDigest, hashSecret, newCredential, verifySecret } from "./secrets.ts";
import type { AdmissionGate } from "../runtime/limiter.ts";
import type { FailureThrottle } from "./throttle.ts";

const CLIENT_ID = new RegExp(SUBJECT_TOKEN_PATTERN);
/** Stands in for the hash of an unknown client: same scheme and cost, so the check takes as long. */
const UNKNOWN_CLIENT_HASH = "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAA";

/** What bounds the token endpoint's work: secret checks at once (and waiting), failures per client id. */
export type TokenGuard = { checks: AdmissionGate; failures: FailureThrottle };

export type IdentityDeps = { registry: Registry; key: SigningKey; audience: string; tokenTtlSeconds: number; guard: TokenGuard };

/** Every identity process republishes its key this often, so a key nobody uses any more can be told apart. */
export const KEY_HEARTBEAT_MS = 10 * 60_000;

/**
 * A key not republished for a token lifetime plus two heartbeats belongs to no running issuer and
 * signed no token still valid: it leaves the JWKS. (Keys published before `seen_at` existed stay
 * until revoked.)
 */
export function isRetired(key: PublishedKey, tokenTtlSeconds: number, now = Date.now()): boolean {
  return key.seen_at !== undefined && now - Date.parse(key.seen_at) > tokenTtlSeconds * 1000 + 2 * KEY_HEARTBEAT_MS;
}

/** RFC 6749 §5.2: the edge renders `error` as the OAuth error body. */
const invalidClient = () =>
  new DerrickError(401, "client authentication failed", {
    type: "invalid_client",
    extensions: { error: "invalid_client" },
    headers: { "WWW-Authenticate": 'Basic realm="derrick"' },
  });

/** RFC 6749-style `error` beside the problem fields: OAuth clients read that member. */
const tokenProblem = (status: 429 | 503, error: string, detail: string, retryAfterSeconds: number) =>
  new DerrickError(status, detail, {
    extensions: { error, error_description: detail },
    headers: { "Retry-After": String(retryAfterSeconds) },
  });

/**
 * Client credentials grant. A checked attempt costs the same whether the id exists or not (a stand-in hash for unknown
 * ids), and the refusals before a check (429 failures per id and address, 503 checks and queue full, 504 caller gone)
 * are alike for both: nothing tells which ids exist (docs/authentication.md, "Token endpoint limits").
 */
export async function issueToken(input: TokenRequest, deps: IdentityDeps, deadline?: number): Promise<TokenResponse> {
  const failureKey = `${input.client_id}\u0000${input.remote_address ?? ""}`;
  const locked = deps.guard.failures.retryAfter(failureKey);
  if (locked) {
    throw tokenProblem(
      429,
      "slow_down",
      `too many failed authentications for this client id from this address; retry after ${locked} s`,
      locked,
    );
  }
  const checked = deps.guard.checks.tryRun(async () => {
    if (deadline !== undefined && deadline <= Date.now())
      throw gatewayTimeout("the caller's deadline passed while the token request waited for a secret check");
    // An id that cannot be a registered one (registry keys are subject tokens) is an unknown client.
    const client = CLIENT_ID.test(input.client_id) ? await deps.registry.getClient(input.client_id) : undefined;
    // Verify even for unknown clients so timing does not reveal which ids exist.
    const ok = await verifySecret(input.client_secret, client?.secret_hash ?? UNKNOWN_CLIENT_HASH);
    return ok ? client : undefined;
  });
  if (!checked) throw tokenProblem(503, "temporarily_unavailable", "too many token requests are being checked; try again shortly", 1);
  const client = await checked;
  if (!client) {
    deps.guard.failures.failed(failureKey);
    throw invalidClient();
  }
  deps.guard.failures.succeeded(failureKey);
  const access_token = await mintToken(
    deps.key,
    { sub: client.client_id, client_id: client.client_id, groups: client.groups, scope: input.scope },
    deps.audience,
    deps.tokenTtlSeconds,
  );
  return { access_token, token_type: "Bearer", expires_in: deps.tokenTtlSeconds, ...(input.scope ? { scope: input.scope } : {}) };
}

/** Published, not retired, not revoked (a heartbeat racing a revocation may have put one back). */
async function liveKeys(deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">): Promise<PublishedKey[]> {
  const keys = (await deps.registry.publishedKeys()).filter((k) => !isRetired(k, deps.tokenTtlSeconds));
  const revoked = await Promise.all(keys.map((k) => deps.registry.isRevoked(String(k.jwk.kid))));
  return keys.filter((_, i) => !revoked[i]);
}

export async function publishedJwks(deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">): Promise<Jwks> {
  return { keys: (await liveKeys(deps)).map((k) => k.jwk) };
}

export async function listKeys(deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">): Promise<SigningKeyList> {
  const keys = await liveKeys(deps);
  return { keys: keys.map((k) => ({ kid: String(k.jwk.kid), ...(k.seen_at ? { seen_at: k.seen_at } : {}) })) };
}

/** Withdraws a key from the JWKS at once; the issuer using it switches to a new key (identity actor). */
export async function revokeKey(input: KeyRevoke, deps: Pick<IdentityDeps, "registry">): Promise<void> {
  if (!(await deps.registry.publishedKeys()).some((k) => k.jwk.kid === input.kid) || (await deps.registry.isRevoked(input.kid)))
    throw notFound(`no signing key ${input.kid} is published`);
  await deps.registry.revokeKey(input.kid);
}

export async function verifyAppkey(input: AppkeyCheck, deps: Pick<IdentityDeps, "registry">): Promise<AppkeyCheckReply> {
  const owner = await deps.registry.appkeyOwner(appkeyDigest(input.appkey));
  if (owner !== input.client_id) throw unauthorized("the appkey is not registered for this client", "Bearer");
  return { client_id: owner };
}

export async function createApp(input: AppCreate, deps: Pick<IdentityDeps, "registry">): Promise<AppCredentials> {
  if (input.client_id) await refuseRecentlyDeleted(input.client_id, deps);
  const client_id =
    input.client_id ??
    `app-${newCredential("")
      .slice(0, 12)
      .replace(/[^A-Za-z0-9]/g, "x")}`;
  const client_secret = newCredential("");
  const appkey = newCredential("ak_");
  const groups = input.groups ?? [];
  const created = await deps.registry.createClient({
    client_id,
    secret_hash: await hashSecret(client_secret),
    groups,
    created_at: new Date().toISOString(),
  });
  if (!created) throw conflict(`client ${client_id} already exists`);
  await deps.registry.putAppkey(appkeyDigest(appkey), client_id);
  return { client_id, client_secret, appkey, groups };
}

/**
 * A deleted client's id is not handed out again while tokens issued to it may still be valid (they
 * name the client by id, so they would act as the new client) or while its subscriptions are not
 * yet removed (the new client would find them).
 */
async function refuseRecentlyDeleted(clientId: string, deps: Pick<IdentityDeps, "registry">, now = Date.now()): Promise<void> {
  const deleted = await deps.registry.getDeletedClient(clientId);
  if (!deleted) return;
  if (!deleted.forgotten_at) {
    throw conflict(
      `client ${clientId} was deleted at ${deleted.deleted_at} and its notification subscriptions are not removed yet (no notifications actor has answered); its id can be reused once they are, and not before ${deleted.reusable_at}`,
    );
  }
  if (now < Date.parse(deleted.reusable_at)) {
    throw conflict(
      `client ${clientId} was deleted at ${deleted.deleted_at}; tokens issued to it are valid until ${deleted.reusable_at}, so its id cannot be reused before then`,
    );
  }
}

export async function listApps(deps: Pick<IdentityDeps, "registry">): Promise<AppList> {
  const clients = await deps.registry.listClients();
  return {
    apps: clients
      .map(({ client_id, groups, created_at }) => ({ client_id, groups, created_at }))
      .sort((a, b) => a.client_id.localeCompare(b.client_id)),
  };
}

/**
 * A client may make subscriptions until this long after its deletion (an edge's cached appkey check),
 * plus room for clock differences between processes: the subscriptions to remove are those created
 * before deletion + this, and the notifications actor is asked again once that time has passed.
 */
export const FORGET_GRACE_MS = APPKEY_CACHE_MS + 30_000;

/**
 * Deletes a client: first the record that makes its subscriptions go (forgetDeletedClients) and
 * keeps its id from being reused while its tokens are valid, so a crash part-way leaves nothing
 * behind unnoticed; then its appkeys, then the client (no more tokens).
 */
async function removeClient(clientId: string, deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">, now = Date.now()): Promise<void> {
  const reusable = now + Math.max(deps.tokenTtlSeconds * 1000, FORGET_GRACE_MS);
  await deps.registry.putDeletedClient({
    client_id: clientId,
    deleted_at: new Date(now).toISOString(),
    reusable_at: new Date(reusable).toISOString(),
  });
  await deps.registry.deleteAppkeysOf(clientId);
  await deps.registry.deleteClient(clientId);
}

export async function deleteApp(input: AppDelete, deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">): Promise<void> {
  if (!(await deps.registry.getClient(input.client_id))) throw notFound(`client ${input.client_id} does not exist`);
  await removeClient(input.client_id, deps);
}

export type ForgetDeps = {
  registry: Registry;
  /** Asks the notifications actor to remove the client's subscriptions; throws when nobody answered. */
  forget: (request: ClientForget) => Promise<unknown>;
  now?: () => number;
};

export type ForgetPass = {
  /** Deleted clients whose subscriptions still have to be (re)checked: the pass should run again soon. */
  pending: number;
  failed: Array<{ client_id: string; error: unknown }>;
};

/**
 * One pass over the deleted clients: asks the notifications actor to remove each one's subscriptions until it answered
 * past the grace, and drops the record once the id may be reused. Repeated while anything is pending, so a notifications
 * actor that is down only delays it; any identity process may run it (docs/notifications.md#deleted-clients).
 */
export async function forgetDeletedClients(deps: ForgetDeps): Promise<ForgetPass> {
  const now = deps.now ?? Date.now;
  const pass: ForgetPass = { pending: 0, failed: [] };
  for (const { value: deleted, revision } of await deps.registry.listDeletedClients()) {
    const startedAt = now();
    if (deleted.forgotten_at) {
      if (startedAt >= Date.parse(deleted.reusable_at)) await deps.registry.dropDeletedClient(deleted.client_id, revision);
      continue;
    }
    const createdBefore = Date.parse(deleted.deleted_at) + FORGET_GRACE_MS;
    try {
      await deps.forget({ client_id: deleted.client_id, created_before: new Date(createdBefore).toISOString() });
    } catch (error) {
      pass.failed.push({ client_id: deleted.client_id, error });
      pass.pending++;
      continue;
    }
    // Asked before the grace ended: the client might still have made one since; ask again later.
    if (startedAt < createdBefore) pass.pending++;
    else if (
      !(await deps.registry.updateDeletedClient(
        { ...deleted, forgotten_at: new Date(startedAt).toISOString() } satisfies DeletedClient,
        revision,
      ))
    )
      pass.pending++;
  }
  return pass;
}

/** Writes one seeded client and its appkey unless they are stored as given; true when written. */
export async function seedClient(
  seed: ClientSeed,
  deps: Pick<IdentityDeps, "registry">,
  appkeys?: Array<{ digest: string; clientId: string }>,
): Promise<boolean> {
  const groups = [...(seed.groups ?? [])];
  const existing = await deps.registry.getClient(seed.client_id);
  const same =
    existing?.seeded === true &&
    JSON.stringify(existing.groups) === JSON.stringify(groups) &&
    (await verifySecret(seed.client_secret, existing.secret_hash));
  if (!same) {
    await deps.registry.putClient({
      client_id: seed.client_id,
      secret_hash: await hashSecret(seed.client_secret),
      groups,
      created_at: existing?.created_at ?? new Date().toISOString(),
      seeded: true,
    });
  }
  const digest = appkeyDigest(seed.appkey);
  const known = appkeys ?? (await deps.registry.listAppkeys());
  if (!known.some((a) => a.digest === digest && a.clientId === seed.client_id)) await deps.registry.putAppkey(digest, seed.client_id);
  return !same;
}

/**
 * Makes the configured clients exactly DERRICK_CLIENTS, idempotently: a matching client is left alone (no new hash per
 * start), others are (re)written, other appkeys dropped, unlisted ones deleted as `apps delete` does; `apps create`
 * clients only when listed, and a just-deleted id when listed again (docs/authentication.md, "Deleting a client").
 */
export async function seedClients(
  seeds: readonly ClientSeed[],
  deps: Pick<IdentityDeps, "registry" | "tokenTtlSeconds">,
): Promise<{ written: number; removed: string[] }> {
  let written = 0;
  const appkeys = await deps.registry.listAppkeys();
  // Every listed appkey, by digest: one that moved from a client to another is reassigned, never dropped.
  const wanted = new Set(seeds.map((s) => appkeyDigest(s.appkey)));
  const stale = (clientId: string) => appkeys.filter((a) => a.clientId === clientId && !wanted.has(a.digest));
  for (const seed of seeds) {
    if (await seedClient(seed, deps, appkeys)) written++;
    for (const old of stale(seed.client_id)) await deps.registry.deleteAppkey(old.digest);
  }
  const listed = new Set(seeds.map((s) => s.client_id));
  const removed: string[] = [];
  for (const client of await deps.registry.listClients()) {
    if (!client.seeded || listed.has(client.client_id)) continue;
    // Its subscriptions go too, and its id is held as after `apps delete` (removeClient).
    await removeClient(client.client_id, deps);
    removed.push(client.client_id);
  }
  return { written, removed };
}
