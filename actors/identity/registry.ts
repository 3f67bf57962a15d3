/**
 * The app registry in JetStream KV (bucket `derrick_registry`):
 *   clients.<client_id>   → { client_id, secret_hash, groups, created_at }
 *   appkeys.<sha256 hex>  → { client_id }
 *   jwks.<kid>            → public JWK of an embedded-issuer process, with `seen_at` (last republished)
 *   revoked_keys.<kid>    → { revoked_at }: never published again
 *   deleted_clients.<client_id> → DeletedClient: a deleted client whose subscriptions are (being) removed
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import type { JWK } from "jose";
import { casPut, encodeJson, isLive, isWrongRevision, readJson, readKv, type Versioned } from "../runtime/kv.ts";
import { followBucket } from "../runtime/follow.ts";
import { guardedKv, recreateOnDeletion, recreatingBucket, unguarded, type Guard } from "../runtime/recreate.ts";
import { jetstreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";

export const REGISTRY_BUCKET = "derrick_registry";

/** `seeded`: written from DERRICK_CLIENTS (and removed when no longer listed there); else made with `derrick apps create`. */
export type ClientRecord = { client_id: string; secret_hash: string; groups: string[]; created_at: string; seeded?: boolean };

/**
 * What is left of a deleted client until its traces are gone: its subscriptions are asked removed until an answer comes
 * when the client can make none (`forgotten_at`); `apps create` may not take its id before `reusable_at` (tokens expired).
 */
export type DeletedClient = { client_id: string; deleted_at: string; reusable_at: string; forgotten_at?: string };

export interface Registry {
  getClient(clientId: string): Promise<ClientRecord | undefined>;
  putClient(record: ClientRecord): Promise<void>;
  /** Creates only when absent; false when the id is taken. */
  createClient(record: ClientRecord): Promise<boolean>;
  deleteClient(clientId: string): Promise<void>;
  listClients(): Promise<ClientRecord[]>;
  appkeyOwner(digest: string): Promise<string | undefined>;
  putAppkey(digest: string, clientId: string): Promise<void>;
  /** Every appkey (by digest) and its client. */
  listAppkeys(): Promise<Array<{ digest: string; clientId: string }>>;
  deleteAppkey(digest: string): Promise<void>;
  deleteAppkeysOf(clientId: string): Promise<void>;
  /** Writes (or rewrites, for a client deleted again) the record of a deleted client. */
  putDeletedClient(record: DeletedClient): Promise<void>;
  getDeletedClient(clientId: string): Promise<DeletedClient | undefined>;
  listDeletedClients(): Promise<Array<Versioned<DeletedClient>>>;
  /** Compare-and-set; false when the record changed since `revision` (the client was deleted again). */
  updateDeletedClient(record: DeletedClient, revision: number): Promise<boolean>;
  /** Removes the record unless it changed since `revision`. */
  dropDeletedClient(clientId: string, revision: number): Promise<void>;
  /** Publishes (or republishes: `seen_at` becomes now) a public signing key. */
  publishKey(jwk: JWK): Promise<void>;
  publishedKeys(): Promise<PublishedKey[]>;
  /** Marks the key revoked for good, then withdraws it from the JWKS. */
  revokeKey(kid: string): Promise<void>;
  isRevoked(kid: string): Promise<boolean>;
  /**
   * Calls `onRevoked` with each key revoked from now on (a key may come twice: be idempotent), for as
   * long as the process runs (a watch that ends is re-opened and logged on `log`); returns the stop.
   */
  watchRevocations(onRevoked: (kid: string) => void, log: Logger): Promise<() => Promise<void>>;
}

/** `seen_at` is absent on keys published before it existed. */
export type PublishedKey = { jwk: JWK; seen_at?: string };

/**
 * The registry bucket, made again when deleted at runtime as every store of derrick is; `onRecreated` puts back what
 * the process owns (the configured clients, its signing key), while clients created since and revocations are gone
 * (docs/operations.md#reliability). `close` stops following the advisories.
 */
export async function openRegistry(
  nc: NatsConnection,
  policy: StoragePolicy = SINGLE_NODE,
  options: { log?: Logger; onRecreated?: () => Promise<unknown> } = {},
): Promise<Registry & { close(): void }> {
  const kvm = new Kvm(nc);
  const bucketConfig = bucketOptions(policy, { history: 1 });
  const kv = await kvm.create(REGISTRY_BUCKET, bucketConfig);
  const recovery = recreatingBucket(await jetstreamManager(nc), kvm, REGISTRY_BUCKET, bucketConfig, options.log, {
    after: options.onRecreated,
  });
  const advisories = recreateOnDeletion(nc, { [REGISTRY_BUCKET]: recovery }, options.log);
  return Object.assign(new KvRegistry(guardedKv(kv, recovery.guard), recovery.guard), { close: () => advisories.unsubscribe() });
}

class KvRegistry implements Registry {
  constructor(
    private readonly kv: KV,
    private readonly guard: Guard = unguarded,
  ) {}

  private read<T>(key: string): Promise<T | undefined> {
    return readJson<T>(this.kv, key);
  }

  private async values<T>(prefix: string): Promise<Array<{ key: string; value: T }>> {
    return (await this.guard(() => readKv(this.kv, { key: `${prefix}.>` })))
      .filter(isLive)
      .map((entry) => ({ key: entry.key, value: entry.json<T>() }));
  }

  getClient(clientId: string) {
    return this.read<ClientRecord>(`clients.${clientId}`);
  }

  async putClient(record: ClientRecord) {
    await this.kv.put(`clients.${record.client_id}`, encodeJson(record));
  }

  async createClient(record: ClientRecord) {
    try {
      await this.kv.create(`clients.${record.client_id}`, encodeJson(record));
      return true;
    } catch (error) {
      if (await this.getClient(record.client_id)) return false;
      throw error;
    }
  }

  async deleteClient(clientId: string) {
    await this.kv.delete(`clients.${clientId}`);
  }

  async listClients() {
    return (await this.values<ClientRecord>("clients")).map((e) => e.value);
  }

  async appkeyOwner(digest: string) {
    return (await this.read<{ client_id: string }>(`appkeys.${digest}`))?.client_id;
  }

  async putAppkey(digest: string, clientId: string) {
    await this.kv.put(`appkeys.${digest}`, encodeJson({ client_id: clientId }));
  }

  async listAppkeys() {
    return (await this.values<{ client_id: string }>("appkeys")).map((e) => ({
      digest: e.key.slice("appkeys.".length),
      clientId: e.value.client_id,
    }));
  }

  async deleteAppkey(digest: string) {
    await this.kv.delete(`appkeys.${digest}`);
  }

  async deleteAppkeysOf(clientId: string) {
    for (const { digest } of (await this.listAppkeys()).filter((e) => e.clientId === clientId)) await this.deleteAppkey(digest);
  }

  async putDeletedClient(record: DeletedClient) {
    await this.kv.put(`deleted_clients.${record.client_id}`, encodeJson(record));
  }

  getDeletedClient(clientId: string) {
    return this.read<DeletedClient>(`deleted_clients.${clientId}`);
  }

  async listDeletedClients() {
    return (await this.guard(() => readKv(this.kv, { key: "deleted_clients.>" })))
      .filter(isLive)
      .map((entry) => ({ value: entry.json<DeletedClient>(), revision: entry.revision }));
  }

  updateDeletedClient(record: DeletedClient, revision: number) {
    return casPut(this.kv, `deleted_clients.${record.client_id}`, record, revision, true);
  }

  async dropDeletedClient(clientId: string, revision: number) {
    try {
      await this.kv.delete(`deleted_clients.${clientId}`, { previousSeq: revision });
    } catch (error) {
      if (!isWrongRevision(error)) throw error;
    }
  }

  async publishKey(jwk: JWK) {
    await this.kv.put(`jwks.${jwk.kid}`, encodeJson({ ...jwk, seen_at: new Date().toISOString() }));
  }

  async publishedKeys() {
    return (await this.values<JWK & { seen_at?: string }>("jwks")).map(({ value: { seen_at, ...jwk } }) => ({
      jwk,
      ...(seen_at ? { seen_at } : {}),
    }));
  }

  async revokeKey(kid: string) {
    await this.kv.put(`revoked_keys.${kid}`, encodeJson({ revoked_at: new Date().toISOString() }));
    await this.kv.delete(`jwks.${kid}`);
  }

  async isRevoked(kid: string) {
    return (await this.read(`revoked_keys.${kid}`)) !== undefined;
  }

  async watchRevocations(onRevoked: (kid: string) => void, log: Logger) {
    const followed = await followBucket(
      this.kv,
      { what: "key revocations", key: "revoked_keys.>", from: "updates" },
      (entry) => {
        if (entry.operation === "PUT") onRevoked(entry.key.slice("revoked_keys.".length));
      },
      log,
    );
    return () => followed.stop();
  }
}
