/**
 * The device SDK 3.0 configuration file (AEA.json): loading, validation and environment overrides.
 * One JSON file: `Name`, then a runtime section under the original product key `AEA2` or the
 * neutral alias `Runtime` (not both), holding the key-value store client and the BusClient.
 * Every problem is an SdkConfigError naming the key in the original SDK's colon notation
 * (`AEA2:BusClient:Server`), so a bad file is fixed at the right line.
 */
import { readFileSync } from "node:fs";
import { TOKEN_PATTERN } from "../subjects/tokens.ts";
import type { TwinAddress } from "../subjects/twins.ts";

export const RUNTIME_KEYS = ["AEA2", "Runtime"] as const;
export const INPUT_KINDS = ["DataIn", "RequestIn", "EventIn"] as const;
export const OUTPUT_KINDS = ["DataOut", "RequestOut", "EventOut"] as const;
export type InputKind = (typeof INPUT_KINDS)[number];
export type OutputKind = (typeof OUTPUT_KINDS)[number];

export class SdkConfigError extends Error {
  override name = "SdkConfigError";
  constructor(
    /** The offending key, e.g. `AEA2:BusClient:Subscriptions:0`. */
    readonly key: string,
    message: string,
  ) {
    super(`${key}: ${message}`);
  }
}

export type KvClientConfig =
  /** Twin properties in the twin's JetStream KV bucket, on the bus server unless Server/Port say otherwise. */
  | { kind: "jetstream"; servers?: string[]; twin: TwinAddress }
  /** Twin properties in a Redis on the device (the original 3.0 layout), mirrored by derrick. */
  | { kind: "redis"; host: string; port: number; password?: string };

export type AppConfig = {
  name: string;
  /** Which runtime key the file used (`AEA2` or `Runtime`). */
  runtimeKey: (typeof RUNTIME_KEYS)[number];
  bus: {
    servers: string[];
    user?: string;
    password?: string;
    deviceId: string;
    subscriptions: Record<InputKind, string[]>;
    targets: Record<OutputKind, string[]>;
  };
  kv: KvClientConfig;
  /** The whole file as read (application sections such as `AppConfig` live here). */
  raw: Record<string, unknown>;
};

/** Environment overrides of the original SDK. */
export type SdkEnv = { NATS_ADDRESS?: string; NATS_USER?: string; NATS_PASSWORD?: string; REDIS_ADDRESS?: string };

const SUBJECT_RE = /^[^\s.*>]+(\.[^\s.*>]+)*$/;
const NATS_URL_RE = /^(nats|tls):\/\/[^\s/:]+(:\d{1,5})?$/;

type Obj = Record<string, unknown>;
const isObject = (value: unknown): value is Obj => typeof value === "object" && value !== null && !Array.isArray(value);

function requireObject(value: unknown, key: string): Obj {
  if (!isObject(value)) throw new SdkConfigError(key, "must be an object");
  return value;
}

function optionalString(value: unknown, key: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.trim() === "") throw new SdkConfigError(key, "must be a non-empty string");
  return value.trim();
}

function port(value: unknown, key: string): number {
  const n = typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 65535)
    throw new SdkConfigError(key, "must be a port number (1-65535, a number or a string of digits)");
  return n;
}

function natsUrl(value: string, key: string): string {
  if (!NATS_URL_RE.test(value)) throw new SdkConfigError(key, `"${value}" must look like nats://host:port`);
  return value;
}

/** `[{DataIn: [..]}, {RequestIn: [..]}]` → `{DataIn: [..], RequestIn: [..], EventIn: []}`. */
function kindLists<K extends string>(value: unknown, key: string, kinds: readonly K[]): Record<K, string[]> {
  const out = Object.fromEntries(kinds.map((k) => [k, [] as string[]])) as Record<K, string[]>;
  if (value === undefined) return out;
  if (!Array.isArray(value)) throw new SdkConfigError(key, `must be an array of objects such as {"${kinds[0]}": ["subject"]}`);
  value.forEach((item, i) => {
    const itemKey = `${key}:${i}`;
    for (const [kind, subjects] of Object.entries(requireObject(item, itemKey))) {
      if (!(kinds as readonly string[]).includes(kind))
        throw new SdkConfigError(`${itemKey}:${kind}`, `unknown kind; use one of ${kinds.join(", ")}`);
      if (!Array.isArray(subjects)) throw new SdkConfigError(`${itemKey}:${kind}`, "must be an array of subjects");
      subjects.forEach((subject, j) => {
        if (typeof subject !== "string" || !SUBJECT_RE.test(subject)) {
          throw new SdkConfigError(
            `${itemKey}:${kind}:${j}`,
            `${JSON.stringify(subject)} is not a NATS subject (dot-separated tokens, no spaces or wildcards)`,
          );
        }
        if (!out[kind as K].includes(subject)) out[kind as K].push(subject);
      });
    }
  });
  return out;
}

function twinAddress(value: unknown, key: string): TwinAddress {
  const twin = requireObject(value, key);
  const token = (field: string) => {
    const v = twin[field];
    if (typeof v !== "string" || !TOKEN_PATTERN.test(v)) throw new SdkConfigError(`${key}:${field}`, `must match ${TOKEN_PATTERN.source}`);
    return v;
  };
  return { organization: token("Organization"), environment: token("Environment"), twinId: token("Id") };
}

/** Validates a parsed config document; `env` overrides server, user and password. */
export function parseAppConfig(document: unknown, env: SdkEnv = {}): AppConfig {
  const root = requireObject(document, "(file)");
  const name = root.Name;
  if (typeof name !== "string" || !TOKEN_PATTERN.test(name))
    throw new SdkConfigError("Name", `must be the application name (${TOKEN_PATTERN.source})`);
  const present = RUNTIME_KEYS.filter((k) => root[k] !== undefined);
  if (present.length === 0) throw new SdkConfigError("AEA2", `the runtime section is missing (key "AEA2" or its alias "Runtime")`);
  if (present.length > 1) throw new SdkConfigError("Runtime", `give the runtime section once: "AEA2" or "Runtime", not both`);
  const runtimeKey = present[0]!;
  const runtime = requireObject(root[runtimeKey], runtimeKey);
  const busKey = `${runtimeKey}:BusClient`;
  const busSection = requireObject(runtime.BusClient, busKey);

  const server = env.NATS_ADDRESS?.trim() || optionalString(busSection.Server, `${busKey}:Server`) || "nats://127.0.0.1:4222";
  const servers = server
    .split(",")
    .map((s, i) => natsUrl(s.trim(), env.NATS_ADDRESS ? "NATS_ADDRESS" : `${busKey}:Server${i ? `:${i}` : ""}`));
  const user = env.NATS_USER?.trim() || optionalString(busSection.NatsUser, `${busKey}:NatsUser`);
  const password = env.NATS_PASSWORD?.trim() || optionalString(busSection.NatsPassword, `${busKey}:NatsPassword`);
  const deviceIdRaw = busSection.DeviceId ?? "999";
  if (typeof deviceIdRaw !== "string" && typeof deviceIdRaw !== "number")
    throw new SdkConfigError(`${busKey}:DeviceId`, "must be a string or a number");

  let kv: KvClientConfig;
  if (runtime.RedisClient !== undefined) {
    const key = `${runtimeKey}:RedisClient`;
    const redis = requireObject(runtime.RedisClient, key);
    const override = env.REDIS_ADDRESS?.trim();
    const [host, portText] = override ? override.replace(/^redis:\/\//, "").split(":") : [];
    kv = {
      kind: "redis",
      host: host || optionalString(redis.Server, `${key}:Server`) || "127.0.0.1",
      port: portText ? port(portText, "REDIS_ADDRESS") : redis.Port === undefined ? 6379 : port(redis.Port, `${key}:Port`),
      ...(optionalString(redis.Password, `${key}:Password`) ? { password: String(redis.Password) } : {}),
    };
  } else {
    const key = `${runtimeKey}:KvClient`;
    const section = runtime.KvClient === undefined ? {} : requireObject(runtime.KvClient, key);
    const kvServer = optionalString(section.Server, `${key}:Server`);
    const kvServers = kvServer
      ? [
          natsUrl(
            section.Port !== undefined
              ? `${kvServer.includes("://") ? kvServer : `nats://${kvServer}`}:${port(section.Port, `${key}:Port`)}`
              : kvServer,
            `${key}:Server`,
          ),
        ]
      : undefined;
    if (runtime.Twin === undefined)
      throw new SdkConfigError(
        `${runtimeKey}:Twin`,
        'the JetStream key-value store needs the twin: {"Organization", "Environment", "Id"} (or configure RedisClient)',
      );
    kv = { kind: "jetstream", ...(kvServers ? { servers: kvServers } : {}), twin: twinAddress(runtime.Twin, `${runtimeKey}:Twin`) };
  }

  return {
    name,
    runtimeKey,
    bus: {
      servers,
      ...(user ? { user } : {}),
      ...(password ? { password } : {}),
      deviceId: String(deviceIdRaw),
      subscriptions: kindLists(busSection.Subscriptions, `${busKey}:Subscriptions`, INPUT_KINDS),
      targets: kindLists(busSection.Targets, `${busKey}:Targets`, OUTPUT_KINDS),
    },
    kv,
    raw: root,
  };
}

/** Parses JSON text; invalid JSON is an SdkConfigError on the file. */
export function parseAppConfigText(text: string, env: SdkEnv = {}): AppConfig {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new SdkConfigError("(file)", `not valid JSON (${(error as Error).message})`);
  }
  return parseAppConfig(document, env);
}

/** Reads and validates the config file; env defaults to the process environment. */
export function loadAppConfig(path: string, env: SdkEnv = process.env as SdkEnv): AppConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new SdkConfigError("(file)", `cannot read ${path}: ${(error as Error).message}`);
  }
  return parseAppConfigText(text, env);
}
