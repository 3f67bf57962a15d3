/**
 * Reads configuration once: defaults, then an optional JSON file (`DERRICK_CONFIG`, keyed by the same
 * variable names as the environment), then the environment. Every value is parsed and validated
 * against config/schema.ts; the first problem stops start-up with a message naming the variable.
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { Value, type ValueError } from "@sinclair/typebox/value";
import { ACTOR_NAMES, type ClientSeed, Config } from "./schema.ts";
import { parseDuration } from "./duration.ts";

export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(
    /** The environment variable (or file key) at fault. */
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

type Source = Record<string, string | undefined>;
type Parser = (raw: string, variable: string) => unknown;

const text: Parser = (raw) => raw.trim();
const integer: Parser = (raw, variable) => {
  if (!/^\s*\d+\s*$/.test(raw)) throw new ConfigError(variable, `"${raw}" is not a whole number`);
  return Number(raw);
};
const duration: Parser = (raw, variable) => {
  try {
    return parseDuration(raw);
  } catch (error) {
    throw new ConfigError(variable, (error as Error).message);
  }
};
const list: Parser = (raw) =>
  raw
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
const json: Parser = (raw, variable) => {
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw new ConfigError(variable, `not valid JSON (${(error as Error).message})`);
  }
};
const boolean: Parser = (raw, variable) => {
  const value = raw.trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(value)) return true;
  if (["false", "0", "no", "off", ""].includes(value)) return false;
  throw new ConfigError(variable, `"${raw}" is not a boolean (true or false)`);
};
/** A request rate: `200`, `200/s`, `6000/m` or `50/100ms` → requests per second; `0` turns the limit off. */
const rate: Parser = (raw, variable) => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(\d*)\s*(ms|s|m|h))?\s*$/.exec(raw);
  if (!match) throw new ConfigError(variable, `"${raw}" is not a rate (e.g. 200/s, 6000/m, 0 = off)`);
  const per = { ms: 0.001, s: 1, m: 60, h: 3600 }[(match[3] ?? "s") as "ms" | "s" | "m" | "h"] * Number(match[2] || 1);
  if (per === 0) throw new ConfigError(variable, `"${raw}" is not a rate: its period is zero (e.g. 200/s, 6000/m, 0 = off)`);
  return Number(match[1]) / per;
};
/** One or more NATS server URLs (comma list; `host:port` means nats://host:port), as nats.js takes them. */
const natsUrls: Parser = (raw, variable) => {
  const servers = list(raw, variable) as string[];
  for (const server of servers) {
    let url: URL | undefined;
    try {
      url = new URL(server.includes("://") ? server : `nats://${server}`);
    } catch {
      // reported below
    }
    if (!url?.hostname || !["nats:", "tls:", "ws:", "wss:"].includes(url.protocol)) {
      throw new ConfigError(variable, `"${server}" is not a NATS server URL (nats://host:port, tls://…, ws://…, or host:port)`);
    }
  }
  return servers.join(",");
};
const httpUrl: Parser = (raw, variable) => {
  let url: URL | undefined;
  try {
    url = new URL(raw.trim());
  } catch {
    // reported below
  }
  if (!url?.hostname || !["http:", "https:"].includes(url.protocol)) throw new ConfigError(variable, `"${raw}" is not an http(s) URL`);
  return url.href;
};
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
/** An address or host name to listen on (IPv6 with or without brackets). */
const host: Parser = (raw, variable) => {
  const value = raw.trim().replace(/^\[(.*)\]$/, "$1");
  if (isIP(value) || HOSTNAME.test(value)) return value;
  throw new ConfigError(variable, `"${raw}" is not an IP address or host name`);
};
/** Addresses or CIDRs (`127.0.0.1/32`, `10.0.0.0/8`, `::1`): each checked here, so a typo stops every process at start, not only the delivering ones. */
const cidrList: Parser = (raw, variable) => {
  const entries = list(raw, variable) as string[];
  for (const entry of entries) {
    const [address = "", prefix, extra] = entry.split("/");
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (!family || !prefixOk || extra !== undefined)
      throw new ConfigError(variable, `"${entry}" is not an IP address or CIDR (e.g. 127.0.0.1/32, 10.0.0.0/8, ::1/128)`);
  }
  return entries;
};
const decimal: Parser = (raw, variable) => {
  if (!/^\s*\d+(?:\.\d+)?\s*$/.test(raw)) throw new ConfigError(variable, `"${raw}" is not a number (e.g. 0.25)`);
  return Number(raw);
};
/** OTLP transports derrick's exporters speak; gRPC would need a gRPC stack beside them. */
const OTLP_PROTOCOLS = ["http/protobuf", "http/json"];
const otlpProtocol: Parser = (raw, variable) => {
  const value = raw.trim();
  if (OTLP_PROTOCOLS.includes(value)) return value;
  throw new ConfigError(variable, `"${raw}" is not supported; use ${OTLP_PROTOCOLS.join(" or ")} (gRPC is not)`);
};
/** OpenTelemetry's `key=value,key2=value2` list with percent-encoded values (the W3C Baggage form). */
const keyValues: Parser = (raw, variable) => {
  const pairs: Record<string, string> = {};
  for (const item of list(raw, variable) as string[]) {
    const at = item.indexOf("=");
    const key = at > 0 ? item.slice(0, at).trim() : "";
    if (!key) throw new ConfigError(variable, `"${item}" is not a key=value pair`);
    try {
      pairs[key] = decodeURIComponent(item.slice(at + 1).trim());
    } catch {
      throw new ConfigError(variable, `the value of ${key} is not percent-encoded text`);
    }
  }
  return pairs;
};
/** The Standard Webhooks example schedule; jitter applies only to it (docs/contract.md). */
const DEFAULT_DELIVERY_SCHEDULE = "0,5s,5m,30m,2h,5h,10h,14h,20h,24h";
const actorList: Parser = (raw, variable) => {
  const names = list(raw, variable) as string[];
  if (names.length === 1 && (names[0] === "all" || names[0] === "*")) return [...ACTOR_NAMES];
  for (const name of names) {
    if (!(ACTOR_NAMES as readonly string[]).includes(name)) {
      throw new ConfigError(variable, `unknown actor "${name}" (known: ${ACTOR_NAMES.join(", ")})`);
    }
  }
  return names;
};

/** Each variable, where it lands in Config, how it is parsed, and its default. */
type Variable = {
  name: string;
  path: string;
  parse: Parser;
  fallback?: string;
  /** Set on durations: the parsed value counts units of this many ms, and its bounds are told as durations ("at most 10m"), not as bare numbers. */
  durationUnitMs?: number;
};

const VARIABLES: ReadonlyArray<Variable> = [
  { name: "NATS_URL", path: "natsUrl", parse: natsUrls },
  { name: "NATS_USER", path: "natsUser", parse: text },
  { name: "NATS_PASSWORD", path: "natsPassword", parse: text },
  { name: "DERRICK_NATS_PORT", path: "natsPort", parse: integer, fallback: "4222" },
  { name: "DERRICK_HTTP_HOST", path: "http.host", parse: host, fallback: "127.0.0.1" },
  { name: "DERRICK_HTTP_PORT", path: "http.port", parse: integer, fallback: "8080" },
  { name: "DERRICK_BODY_LIMIT", path: "http.bodyLimit", parse: integer, fallback: String(1024 * 1024) },
  { name: "DERRICK_HTTP_REUSE_PORT", path: "http.reusePort", parse: boolean, fallback: "false" },
  { name: "DERRICK_METRICS_PORT", path: "http.metricsPort", parse: integer, fallback: "0" },
  { name: "DERRICK_RATE_LIMIT", path: "http.rateLimit", parse: rate, fallback: "0" },
  { name: "DERRICK_RATE_BURST", path: "http.rateBurst", parse: integer, fallback: "100" },
  { name: "DERRICK_DATA_DIR", path: "dataDir", parse: text, fallback: ".derrick" },
  { name: "DERRICK_PARTITIONS", path: "partitions", parse: list, fallback: "opendes" },
  { name: "DERRICK_CLIENTS", path: "clients", parse: json },
  { name: "ACTORS", path: "actors", parse: actorList, fallback: "all" },
  { name: "DERRICK_AUTH_ISSUER", path: "auth.issuer", parse: text },
  { name: "DERRICK_AUTH_JWKS_URL", path: "auth.jwksUrl", parse: httpUrl },
  { name: "DERRICK_AUTH_AUDIENCE", path: "auth.audience", parse: text, fallback: "derrick" },
  {
    name: "DERRICK_TOKEN_TTL",
    path: "auth.tokenTtlSeconds",
    parse: (raw, v) => Math.round((duration(raw, v) as number) / 1000),
    fallback: "1h",
    durationUnitMs: 1000,
  },
  { name: "DERRICK_AUTH_JWKS_MAX_AGE", path: "auth.jwksMaxAgeMs", parse: duration, fallback: "10m", durationUnitMs: 1 },
  { name: "DERRICK_TOKEN_CONCURRENCY", path: "auth.tokenEndpoint.concurrency", parse: integer, fallback: "2" },
  { name: "DERRICK_TOKEN_QUEUE", path: "auth.tokenEndpoint.queue", parse: integer, fallback: "32" },
  { name: "DERRICK_TOKEN_MAX_FAILURES", path: "auth.tokenEndpoint.maxFailures", parse: integer, fallback: "10" },
  { name: "DERRICK_TOKEN_FAILURE_WINDOW", path: "auth.tokenEndpoint.failureWindowMs", parse: duration, fallback: "5m", durationUnitMs: 1 },
  { name: "DERRICK_TOKEN_IP_RATE", path: "auth.tokenEndpoint.addressRate", parse: rate, fallback: "5/s" },
  { name: "DERRICK_TOKEN_IP_BURST", path: "auth.tokenEndpoint.addressBurst", parse: integer, fallback: "20" },
  { name: "DERRICK_REQUEST_TIMEOUT", path: "requestTimeoutMs", parse: duration, fallback: "5s", durationUnitMs: 1 },
  { name: "DERRICK_ACTOR_CONCURRENCY", path: "actorConcurrency", parse: integer, fallback: "256" },
  { name: "DERRICK_ACTOR_QUEUE", path: "actorQueue.requests", parse: integer, fallback: "4096" },
  { name: "DERRICK_ACTOR_QUEUE_BYTES", path: "actorQueue.bytes", parse: integer, fallback: String(64 * 1024 * 1024) },
  { name: "DERRICK_JETSTREAM_REPLICAS", path: "jetstreamReplicas", parse: integer, fallback: "1" },
  { name: "DERRICK_CATALOG_FILE", path: "content.catalogFile", parse: text },
  { name: "DERRICK_CONTENT_CONCURRENCY", path: "content.workerConcurrency", parse: integer, fallback: "64" },
  { name: "DERRICK_CONTENT_ACK_WAIT", path: "content.ackWaitMs", parse: duration, fallback: "30s", durationUnitMs: 1 },
  { name: "DERRICK_CONTENT_TASK_DELAY", path: "content.taskDelayMs", parse: duration, fallback: "0", durationUnitMs: 1 },
  { name: "DERRICK_CONTENT_MAX_UNFINISHED", path: "content.queueLimits.perRequester", parse: integer, fallback: "1000" },
  { name: "DERRICK_CONTENT_QUEUE_MAX", path: "content.queueLimits.total", parse: integer, fallback: "100000" },
  {
    name: "DERRICK_DELIVERY_SCHEDULE",
    path: "delivery.scheduleMs",
    parse: (raw, v) => (list(raw, v) as string[]).map((d) => duration(d, v)),
    fallback: DEFAULT_DELIVERY_SCHEDULE,
    durationUnitMs: 1,
  },
  {
    name: "DERRICK_DELIVERY_SCHEDULE",
    path: "delivery.scheduleJitter",
    parse: (raw) => raw.replace(/\s+/g, "") === DEFAULT_DELIVERY_SCHEDULE,
    fallback: DEFAULT_DELIVERY_SCHEDULE,
  },
  { name: "DERRICK_DELIVERY_TIMEOUT", path: "delivery.timeoutMs", parse: duration, fallback: "15s", durationUnitMs: 1 },
  { name: "DERRICK_DELIVERY_PAUSE_AFTER", path: "delivery.pauseAfterMs", parse: duration, fallback: "5d", durationUnitMs: 1 },
  { name: "DERRICK_DELIVERY_CONCURRENCY", path: "delivery.concurrency", parse: integer, fallback: "1024" },
  { name: "DERRICK_DELIVERY_PER_SUBSCRIPTION", path: "delivery.perSubscription", parse: integer, fallback: "32" },
  { name: "DERRICK_CALLBACK_ALLOW_CIDRS", path: "delivery.allowCidrs", parse: cidrList },
  { name: "DERRICK_CALLBACK_ALLOW_HTTP", path: "delivery.allowHttp", parse: boolean, fallback: "false" },
  { name: "DERRICK_TWIN_MIRRORS", path: "twinMirrors", parse: json, fallback: "[]" },
  { name: "DERRICK_TWINS_MAX", path: "twins.maxTwins", parse: integer, fallback: "5000" },
  { name: "DERRICK_TWIN_MAX_BYTES", path: "twins.maxBytes", parse: integer, fallback: String(64 * 1024 * 1024) },
  { name: "DERRICK_TWIN_VIEWS", path: "twins.views", parse: integer, fallback: "1000" },
  { name: "DERRICK_SEARCH_INDEX_FILE", path: "search.indexFile", parse: text },
  { name: "DERRICK_SEARCH_CURSOR_LIMIT", path: "search.cursorLimit", parse: integer, fallback: "500" },
  { name: "DERRICK_SEARCH_CURSOR_PRINCIPAL_LIMIT", path: "search.cursorPrincipalLimit", parse: integer, fallback: "50" },
  { name: "DERRICK_SEARCH_CURSOR_TTL", path: "search.cursorTtlMs", parse: duration, fallback: "90s", durationUnitMs: 1 },
  { name: "DERRICK_SEARCH_MMAP_BYTES", path: "search.mmapBytes", parse: integer, fallback: String(512 * 1024 * 1024) },
  { name: "DERRICK_LOG_LEVEL", path: "logLevel", parse: text, fallback: "info" },
  { name: "DERRICK_ACCESS_LOG", path: "accessLog", parse: boolean, fallback: "on" },
  { name: "OTEL_SDK_DISABLED", path: "tracing.disabled", parse: boolean, fallback: "false" },
  { name: "OTEL_EXPORTER_OTLP_ENDPOINT", path: "tracing.endpoint", parse: httpUrl },
  { name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", path: "tracing.tracesEndpoint", parse: httpUrl },
  { name: "OTEL_EXPORTER_OTLP_PROTOCOL", path: "tracing.protocol", parse: otlpProtocol, fallback: "http/protobuf" },
  // Listed after the general one: when given, it wins.
  { name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", path: "tracing.protocol", parse: otlpProtocol },
  { name: "OTEL_EXPORTER_OTLP_HEADERS", path: "tracing.headers", parse: keyValues, fallback: "" },
  { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", path: "tracing.tracesHeaders", parse: keyValues, fallback: "" },
  { name: "OTEL_SERVICE_NAME", path: "tracing.serviceName", parse: text, fallback: "derrick" },
  { name: "OTEL_TRACES_SAMPLER", path: "tracing.sampler", parse: text, fallback: "parentbased_always_on" },
  { name: "OTEL_TRACES_SAMPLER_ARG", path: "tracing.samplerRatio", parse: decimal, fallback: "1" },
  { name: "OTEL_BSP_SCHEDULE_DELAY", path: "tracing.batchDelayMs", parse: integer, fallback: "5000" },
];

/** The documented variables, for the CLI's help and the README. */
export const CONFIG_VARIABLES = VARIABLES.map(({ name, fallback }) => ({ name, fallback }));

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let node = target;
  for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
  node[keys.at(-1)!] = value;
}

function readFileSource(path: string): Source {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ConfigError("DERRICK_CONFIG", `cannot read ${path}: ${(error as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError("DERRICK_CONFIG", `${path} must hold a JSON object keyed by variable names`);
  }
  const byName = new Map(VARIABLES.map((v) => [v.name, v]));
  const source: Source = {};
  for (const [key, value] of Object.entries(parsed)) {
    const variable = byName.get(key);
    if (!variable) throw new ConfigError(key, `unknown setting in ${path}`);
    // A JSON array is the natural way to write a list in a JSON file: for a comma-list variable
    // (ACTORS, DERRICK_PARTITIONS, …) it means that list, not the text '["a","b"]'.
    const isCommaList =
      Array.isArray(value) && variable.parse !== json && value.every((item) => typeof item === "string" || typeof item === "number");
    source[key] = typeof value === "string" ? value : isCommaList ? (value as unknown[]).join(",") : JSON.stringify(value);
  }
  return source;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object") {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

const given = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value);

/** Builds the frozen configuration from an environment (default: the process's). */
export function loadConfig(env: Source = process.env): Config {
  const file = env.DERRICK_CONFIG ? readFileSource(env.DERRICK_CONFIG) : {};
  const draft: Record<string, unknown> = {};
  const givenRaw: Map<string, string> = new Map();
  for (const variable of VARIABLES) {
    // Empty counts as unset (a blank `VAR=` line in a compose or env file), so the file or the default applies.
    const raw = given(env[variable.name]) ?? given(file[variable.name]) ?? variable.fallback;
    if (raw === undefined) continue;
    givenRaw.set(variable.name, raw);
    setPath(draft, variable.path, variable.parse(raw, variable.name));
  }
  validate(draft, givenRaw);
  return deepFreeze(draft as Config);
}

/** A duration as written in configuration: the largest unit that states it exactly (600000 → "10m"). */
function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** TypeBox's message, or one in the variable's own terms where TypeBox's would puzzle an operator. */
function describeError(error: ValueError, variable: Variable | undefined, raw: string | undefined): string {
  const schema = error.schema as Record<string, unknown>;
  // A choice of literals (DERRICK_LOG_LEVEL): name the choices, not "Expected union value".
  const choices = Array.isArray(schema.anyOf) ? (schema.anyOf as Array<{ const?: unknown }>).map((option) => option.const) : [];
  if (choices.length && choices.every((choice) => typeof choice === "string"))
    return `${JSON.stringify(error.value)} is not one of ${choices.join(", ")}`;
  // A duration out of range: its bounds as durations ("at most 10m"), not in the unit it is held in.
  if (variable?.durationUnitMs && typeof error.value === "number") {
    const unit = variable.durationUnitMs;
    const given = raw === undefined ? "" : ` (got ${JSON.stringify(raw.trim())})`;
    if (typeof schema.maximum === "number" && error.value > schema.maximum)
      return `must be at most ${formatDuration(schema.maximum * unit)}${given}`;
    if (typeof schema.minimum === "number" && error.value < schema.minimum)
      return `must be at least ${formatDuration(schema.minimum * unit)}${given}`;
  }
  return error.message;
}

function validate(draft: Record<string, unknown>, raws: ReadonlyMap<string, string>): void {
  const byPath = new Map(VARIABLES.map((v) => [`/${v.path.replaceAll(".", "/")}`, v]));
  const first = Value.Errors(Config, draft).First();
  if (first) {
    // Map the JSON pointer back to the variable that produced it (clients/0/appkey → DERRICK_CLIENTS).
    const owner = [...byPath.entries()].find(([pointer]) => first.path === pointer || first.path.startsWith(`${pointer}/`));
    const variable = owner?.[1].name ?? first.path;
    const where = owner && first.path !== owner[0] ? ` at ${first.path.slice(owner[0].length)}` : "";
    throw new ConfigError(variable, `${describeError(first, owner?.[1], raws.get(variable))}${where}`);
  }
  const auth = draft.auth as Config["auth"];
  if (Boolean(auth.issuer) !== Boolean(auth.jwksUrl)) {
    throw new ConfigError(
      auth.issuer ? "DERRICK_AUTH_JWKS_URL" : "DERRICK_AUTH_ISSUER",
      "an external issuer needs both DERRICK_AUTH_ISSUER and DERRICK_AUTH_JWKS_URL",
    );
  }
  const clients = (draft.clients ?? []) as ClientSeed[];
  const seen = new Set<string>();
  const appkeys = new Set<string>();
  for (const client of clients) {
    if (seen.has(client.client_id)) throw new ConfigError("DERRICK_CLIENTS", `client_id "${client.client_id}" appears twice`);
    // An appkey identifies one client: shared, the last seeded would take it from the others.
    if (appkeys.has(client.appkey))
      throw new ConfigError("DERRICK_CLIENTS", `client "${client.client_id}" has an appkey another client has`);
    seen.add(client.client_id);
    appkeys.add(client.appkey);
  }
}
