/**
 * Boots derrick in-process against a test nats-server: the edge on a random loopback port and the
 * chosen actors, with test clients seeded. Helpers get tokens and call the edge.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type ActorName, type Config } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { boot, type Booted } from "../../bin/boot.ts";
import type { TestNats } from "./nats.ts";
import type { TokenResponse } from "../../subjects/identity.ts";

/** A client a test deployment seeds: its secret and appkey derived from its id. */
export const testClient = (client_id: string, groups: string[]) => {
  const name = client_id.toLowerCase();
  return { client_id, client_secret: `${name}-secret-1`, appkey: `${name}-appkey-1`, groups };
};

/** Clients every test deployment knows. */
export const TEST_CLIENTS = {
  alpha: testClient("alpha", ["users.datalake.viewers", "notifications.publishers"]),
  beta: testClient("beta", ["users.datalake.viewers"]),
  admin: testClient("admin", [
    "users.datalake.admins",
    "twins.writers",
    "projects.admins",
    "assessments.editors",
    "users.datalake.editors",
  ]),
};
export type TestClient = keyof typeof TEST_CLIENTS;

/** A client-credentials token from an edge's embedded issuer. */
export async function clientToken(edgeUrl: string, client: { client_id: string; client_secret: string }): Promise<string> {
  const res = await fetch(`${edgeUrl}/v2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: client.client_id, client_secret: client.client_secret }),
  });
  if (res.status !== 200) throw new Error(`token for ${client.client_id}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as TokenResponse).access_token;
}

export type CallInit = RequestInit & { as?: TestClient | null; partition?: string | null };

/** Calls an edge as the test clients: tokens fetched once per client, appkey and partition set. */
export type EdgeClient = {
  token(client?: TestClient): Promise<string>;
  /** fetch against the edge with a client's token, appkey and partition unless overridden. */
  call(path: string, init?: CallInit): Promise<Response>;
};

/** A client for an edge at `url`, in this process or another one (benches run derrick apart). */
export function edgeClient(url: string): EdgeClient {
  const tokens = new Map<TestClient, string>();
  const token = async (client: TestClient = "alpha") => {
    const cached = tokens.get(client);
    if (cached) return cached;
    const value = await clientToken(url, TEST_CLIENTS[client]);
    tokens.set(client, value);
    return value;
  };
  return {
    token,
    async call(path, init = {}) {
      const { as = "alpha", partition = "opendes", ...rest } = init;
      const headers = new Headers(rest.headers);
      if (as) {
        if (!headers.has("authorization")) headers.set("authorization", `Bearer ${await token(as)}`);
        if (!headers.has("appkey")) headers.set("appkey", TEST_CLIENTS[as].appkey);
      }
      if (partition && !headers.has("slb-partition-id") && !headers.has("data-partition-id")) headers.set("slb-partition-id", partition);
      if (rest.body !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
      return fetch(`${url}${path}`, { ...rest, headers });
    },
  };
}

export type TestDerrick = Booted &
  EdgeClient & {
    url: string;
    cfg: Config;
    dataDir: string;
    cleanup(): Promise<void>;
  };

export async function startDerrick(
  nats: Pick<TestNats, "url">,
  options: { env?: Record<string, string>; actors?: ActorName[]; edge?: boolean; dataDir?: string } = {},
): Promise<TestDerrick> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "derrick-data-"));
  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_HTTP_PORT: "0",
    DERRICK_DATA_DIR: dataDir,
    DERRICK_LOG_LEVEL: process.env.DERRICK_TEST_LOG_LEVEL ?? "silent",
    DERRICK_PARTITIONS: "opendes,other",
    DERRICK_CLIENTS: JSON.stringify(Object.values(TEST_CLIENTS)),
    ...options.env,
  });
  const booted = await boot({
    cfg,
    natsUrl: nats.url,
    natsAuth: cfg.natsUser ? { user: cfg.natsUser, pass: cfg.natsPassword ?? "" } : undefined,
    log: createLogger(cfg.logLevel),
    edge: options.edge ?? true,
    actors: options.actors ?? cfg.actors,
    processMetrics: false,
  });
  const url = booted.edge?.url ?? "";
  return {
    ...booted,
    ...edgeClient(url),
    url,
    cfg,
    dataDir,
    async cleanup() {
      await booted.stop();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
