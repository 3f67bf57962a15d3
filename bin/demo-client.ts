/**
 * The demo client of a first `npm start`: with no DERRICK_CLIENTS, derrick's own issuer and an edge
 * on loopback, `derrick start` creates one client holding every group, once (kept in the data dir,
 * mode 0600), and prints how to use it. Never on another address or with an external issuer: there
 * a client that can do everything would be a way in.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { ClientSeed, Config } from "../config/index.ts";
import { ALL_GROUPS } from "../subjects/groups.ts";

const FILE = "demo-client.json";

export const isLoopback = (host: string) => host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);

/** The demo client a start made in this data dir, if any. */
export function readDemoClient(dataDir: string): ClientSeed | undefined {
  const file = join(dataDir, FILE);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as ClientSeed) : undefined;
}

/** The demo client for this configuration, made on first use; undefined when it must not exist. */
export function demoClient(cfg: Config): ClientSeed | undefined {
  if (cfg.clients !== undefined || cfg.auth.issuer !== undefined || !isLoopback(cfg.http.host)) return undefined;
  const kept = readDemoClient(cfg.dataDir);
  if (kept) return { ...kept, groups: [...ALL_GROUPS] };
  const file = join(cfg.dataDir, FILE);
  const seed: ClientSeed = {
    client_id: "demo",
    client_secret: randomBytes(18).toString("base64url"),
    appkey: randomBytes(12).toString("base64url"),
    groups: [...ALL_GROUPS],
  };
  mkdirSync(cfg.dataDir, { recursive: true });
  writeFileSync(file, JSON.stringify(seed, null, 2), { mode: 0o600 });
  return seed;
}

/** What a person sees on a first start: the client, a token request, the docs and the console. */
export function demoWelcome(seed: ClientSeed, edgeUrl: string, partition: string): string {
  return [
    "",
    "derrick is up, with a demo client that holds every group (only on loopback; set DERRICK_CLIENTS to use your own):",
    `  client id:     ${seed.client_id}`,
    `  client secret: ${seed.client_secret}`,
    `  appkey:        ${seed.appkey}`,
    `  partition:     ${partition}`,
    "get a token:",
    `  curl -s -d grant_type=client_credentials -d client_id=${seed.client_id} -d client_secret=${seed.client_secret} ${edgeUrl}/v2/token`,
    `the API and how to call it: ${edgeUrl}/docs`,
    `the console (sign in with the client above): ${edgeUrl}/console`,
    "",
  ].join("\n");
}
