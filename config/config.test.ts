import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ConfigError,
  loadConfig,
  maskedConfig,
  parseDuration,
  ACTOR_NAMES,
  RECOMMENDED_RUNTIME_ENV,
  unsetRuntimeVariables,
} from "./index.ts";
import { otlpTracesUrl } from "../platform/tracing.ts";

function errorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

/** A DERRICK_CONFIG file of its own holding `values`. */
function configFile(values: Record<string, unknown>): string {
  const file = join(mkdtempSync(join(tmpdir(), "derrick-cfg-")), "derrick.json");
  writeFileSync(file, JSON.stringify(values));
  return file;
}

describe("config", () => {
  it("config - the delivery schedule: the default jitters, a configured one is used as given (docs/contract.md)", () => {
    const defaults = loadConfig({}).delivery;
    expect(defaults.scheduleMs).toEqual([
      0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000,
    ]);
    expect(defaults.scheduleJitter).toBe(true);
    // `0,1s,1s,1s` = at most 4 attempts, each delay counted from the previous attempt's end, no jitter.
    const configured = loadConfig({ DERRICK_DELIVERY_SCHEDULE: "0,1s,1s,1s" }).delivery;
    expect(configured.scheduleMs).toEqual([0, 1_000, 1_000, 1_000]);
    expect(configured.scheduleJitter).toBe(false);
  });

  it("config - defaults match the documented ones", () => {
    const cfg = loadConfig({});
    expect(cfg.http).toEqual({
      host: "127.0.0.1",
      port: 8080,
      bodyLimit: 1024 * 1024,
      rateLimit: 0,
      rateBurst: 100,
      reusePort: false,
      metricsPort: 0,
    });
    expect(cfg.twins.views).toBe(1000);
    expect(loadConfig({ DERRICK_METRICS_PORT: "9464" }).http.metricsPort).toBe(9464);
    expect(cfg.dataDir).toBe(".derrick");
    expect(cfg.partitions).toEqual(["opendes"]);
    expect(cfg.actors).toEqual([...ACTOR_NAMES]);
    expect(cfg.natsUrl).toBeUndefined();
    expect(cfg.auth.issuer).toBeUndefined();
    expect(cfg.requestTimeoutMs).toBe(5000);
    // The token endpoint's defences are on by default.
    expect(cfg.auth.tokenEndpoint).toEqual({
      concurrency: 2,
      queue: 32,
      maxFailures: 10,
      failureWindowMs: 300_000,
      addressRate: 5,
      addressBurst: 20,
    });
    expect(cfg.search).toEqual({ cursorLimit: 500, cursorPrincipalLimit: 50, cursorTtlMs: 90_000, mmapBytes: 512 * 1024 * 1024 });
    // An overloaded actor refuses beyond a bounded queue instead of holding everything it reads.
    expect(cfg.actorQueue).toEqual({ requests: 4096, bytes: 64 * 1024 * 1024 });
    expect(loadConfig({ DERRICK_ACTOR_QUEUE: "0", DERRICK_ACTOR_QUEUE_BYTES: "1024" }).actorQueue).toEqual({ requests: 0, bytes: 1024 });
    expect(loadConfig({ DERRICK_SEARCH_CURSOR_PRINCIPAL_LIMIT: "7" }).search.cursorPrincipalLimit).toBe(7);
    expect(loadConfig({ DERRICK_SEARCH_MMAP_BYTES: "0" }).search.mmapBytes).toBe(0);
    expect(() => loadConfig({ DERRICK_SEARCH_MMAP_BYTES: "-1" })).toThrow(/DERRICK_SEARCH_MMAP_BYTES/);
    // Past SQLite's own cap, which it would apply without a word.
    expect(() => loadConfig({ DERRICK_SEARCH_MMAP_BYTES: String(2 ** 31) })).toThrow(/DERRICK_SEARCH_MMAP_BYTES/);
    // Unset is not `[]`: a process started without the list leaves the seeded clients as they are.
    expect(cfg.clients).toBeUndefined();
    expect(loadConfig({ DERRICK_CLIENTS: "[]" }).clients).toEqual([]);
  });

  it("config - the result is frozen all the way down", () => {
    const cfg = loadConfig({ DERRICK_PARTITIONS: "a,b" });
    expect(Object.isFrozen(cfg)).toBe(true);
    expect(Object.isFrozen(cfg.http)).toBe(true);
    expect(() => (cfg.partitions as string[]).push("c")).toThrow();
  });

  it.each([
    ["DERRICK_HTTP_PORT", "abc"],
    ["DERRICK_HTTP_PORT", "70000"],
    ["DERRICK_PARTITIONS", "open.des"],
    ["ACTORS", "system,unknown"],
    ["DERRICK_CLIENTS", "not json"],
    ["DERRICK_CLIENTS", '[{"client_id":"a","client_secret":"short","appkey":"12345678"}]'],
    ["DERRICK_REQUEST_TIMEOUT", "soon"],
    ["DERRICK_HTTP_REUSE_PORT", "yes please"],
    ["DERRICK_LOG_LEVEL", "loud"],
    ["DERRICK_AUTH_JWKS_URL", "ftp://x"],
    ["DERRICK_AUTH_JWKS_URL", "http://"],
    ["DERRICK_REQUEST_TIMEOUT", "25d"],
    ["DERRICK_DELIVERY_SCHEDULE", "0,5s,30d"],
    ["NATS_URL", "not a url"],
    ["NATS_URL", "nats://127.0.0.1:4222,http://x:1"],
    ["DERRICK_HTTP_HOST", "not a host!"],
    ["DERRICK_TOKEN_CONCURRENCY", "0"],
    ["DERRICK_TOKEN_QUEUE", "-1"],
    ["DERRICK_TOKEN_MAX_FAILURES", "many"],
    ["DERRICK_TOKEN_FAILURE_WINDOW", "500ms"],
    ["DERRICK_TOKEN_IP_RATE", "fast"],
    ["DERRICK_TOKEN_IP_BURST", "0"],
  ])("config - a bad %s (%s) stops start-up naming the variable", (name, value) => {
    const error = errorOf({ [name]: value });
    expect(error.variable).toBe(name);
    expect(error.message.startsWith(`${name}: `)).toBe(true);
  });

  it("config - an external issuer needs both its issuer and its JWKS URL", () => {
    expect(errorOf({ DERRICK_AUTH_ISSUER: "https://issuer.example" }).variable).toBe("DERRICK_AUTH_JWKS_URL");
    expect(errorOf({ DERRICK_AUTH_JWKS_URL: "https://issuer.example/jwks" }).variable).toBe("DERRICK_AUTH_ISSUER");
  });

  it("config - duplicate client ids are refused", () => {
    const seed = { client_id: "a", client_secret: "12345678", appkey: "12345678" };
    expect(errorOf({ DERRICK_CLIENTS: JSON.stringify([seed, seed]) }).message).toContain('"a" appears twice');
    expect(errorOf({ DERRICK_CLIENTS: JSON.stringify([seed, { ...seed, client_id: "b" }]) }).message).toContain(
      "appkey another client has",
    );
  });

  it("config - NATS URLs, listen hosts and JWKS URLs in their usual forms are accepted", () => {
    const cfg = loadConfig({
      NATS_URL: "127.0.0.1:4222, nats://nats-1.internal:4222,tls://h:4443",
      DERRICK_HTTP_HOST: "[::1]",
      DERRICK_AUTH_ISSUER: "https://id.example",
      DERRICK_AUTH_JWKS_URL: "https://id.example/jwks",
    });
    expect(cfg.natsUrl).toBe("127.0.0.1:4222,nats://nats-1.internal:4222,tls://h:4443");
    expect(cfg.http.host).toBe("::1");
    for (const host of ["0.0.0.0", "localhost", "edge-1.example.com", "::"])
      expect(loadConfig({ DERRICK_HTTP_HOST: host }).http.host).toBe(host);
  });

  it("config - a file supplies values and the environment overrides them", () => {
    const file = configFile({ DERRICK_HTTP_PORT: 9000, DERRICK_PARTITIONS: "p1,p2" });
    const cfg = loadConfig({ DERRICK_CONFIG: file, DERRICK_PARTITIONS: "p3" });
    expect(cfg.http.port).toBe(9000);
    expect(cfg.partitions).toEqual(["p3"]);
    expect(errorOf({ DERRICK_CONFIG: configFile({ DERRICK_HTTP_PROT: 1 }) }).variable).toBe("DERRICK_HTTP_PROT");
  });

  it("config - in the file, a comma-list variable may be a JSON array; JSON variables keep their JSON", () => {
    const clients = [{ client_id: "c1", client_secret: "secret-c1-xx", appkey: "appkey-c1-xx" }];
    const file = configFile({
      ACTORS: ["search", "system"],
      DERRICK_PARTITIONS: ["p1", "p2"],
      DERRICK_DELIVERY_SCHEDULE: ["0", "1s"],
      DERRICK_CLIENTS: clients,
    });
    const cfg = loadConfig({ DERRICK_CONFIG: file });
    expect(cfg.actors).toEqual(["search", "system"]);
    expect(cfg.partitions).toEqual(["p1", "p2"]);
    expect(cfg.delivery.scheduleMs).toEqual([0, 1000]);
    expect(cfg.clients).toEqual(clients);
  });

  it("config - an empty variable counts as unset: the file's value or the default applies", () => {
    expect(loadConfig({ DERRICK_LOG_LEVEL: "", DERRICK_HTTP_PORT: "  " })).toMatchObject({ logLevel: "info", http: { port: 8080 } });
    expect(loadConfig({ DERRICK_CONFIG: configFile({ DERRICK_HTTP_PORT: 9000 }), DERRICK_HTTP_PORT: "" }).http.port).toBe(9000);
  });

  it("config - the printed configuration masks passwords, client secrets, appkeys and credentials in URLs", () => {
    const cfg = loadConfig({
      NATS_URL: "nats://derrick:n4ts-pass@10.0.0.5:4222,nats://10.0.0.6:4222,other:p@ss-at@10.0.0.8:4222",
      NATS_PASSWORD: "plain-pass",
      DERRICK_AUTH_ISSUER: "https://login.example.com",
      DERRICK_AUTH_JWKS_URL: "https://reader:jwks-pass@login.example.com/jwks.json",
      DERRICK_CLIENTS: JSON.stringify([{ client_id: "c1", client_secret: "client-secret-1", appkey: "appkey-secret-1" }]),
      DERRICK_TWIN_MIRRORS: JSON.stringify([
        { organization: "o", environment: "e", twinId: "t", redis: "redis://:redis-pass@10.0.0.7:6379" },
      ]),
    });
    const printed = JSON.stringify(maskedConfig(cfg));
    for (const secret of ["n4ts-pass", "p@ss-at", "ss-at", "plain-pass", "jwks-pass", "client-secret-1", "appkey-secret-1", "redis-pass"])
      expect(printed).not.toContain(secret);
    expect(maskedConfig(cfg)).toMatchObject({
      natsUrl: "nats://***@10.0.0.5:4222,nats://10.0.0.6:4222,***@10.0.0.8:4222",
      auth: { jwksUrl: "https://***@login.example.com/jwks.json", issuer: "https://login.example.com" },
      twinMirrors: [{ redis: "redis://***@10.0.0.7:6379", twinId: "t" }],
      clients: [{ client_id: "c1" }],
    });
  });

  it("config - an out-of-range duration is told in durations, a log level with its choices, a rate with a zero period as such", () => {
    expect(errorOf({ DERRICK_REQUEST_TIMEOUT: "20m" }).message).toBe('DERRICK_REQUEST_TIMEOUT: must be at most 10m (got "20m")');
    // Held in seconds: the bound is still told as a duration.
    expect(errorOf({ DERRICK_TOKEN_TTL: "30s" }).message).toBe('DERRICK_TOKEN_TTL: must be at least 1m (got "30s")');
    expect(errorOf({ DERRICK_TOKEN_FAILURE_WINDOW: "500ms" }).message).toBe(
      'DERRICK_TOKEN_FAILURE_WINDOW: must be at least 1s (got "500ms")',
    );
    expect(errorOf({ DERRICK_DELIVERY_SCHEDULE: "0,8d" }).message).toBe('DERRICK_DELIVERY_SCHEDULE: must be at most 7d (got "0,8d") at /1');
    expect(errorOf({ DERRICK_LOG_LEVEL: "verbose" }).message).toBe(
      'DERRICK_LOG_LEVEL: "verbose" is not one of fatal, error, warn, info, debug, trace, silent',
    );
    const rate = errorOf({ DERRICK_RATE_LIMIT: "5/0s" });
    expect(rate.variable).toBe("DERRICK_RATE_LIMIT");
    expect(rate.message).toContain("period is zero");
  });

  it("config - DERRICK_NATS_PORT cannot be 0: a random port would leave the admin commands and local devices unable to find the embedded server", () => {
    expect(errorOf({ DERRICK_NATS_PORT: "0" }).variable).toBe("DERRICK_NATS_PORT");
    expect(loadConfig({ DERRICK_NATS_PORT: "1" }).natsPort).toBe(1);
  });

  it("config - DERRICK_CALLBACK_ALLOW_CIDRS is checked at load: a bad address or prefix is named with the variable", () => {
    expect(loadConfig({ DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32, 10.0.0.0/8,::1" }).delivery.allowCidrs).toEqual([
      "127.0.0.1/32",
      "10.0.0.0/8",
      "::1",
    ]);
    for (const bad of ["localhost", "10.0.0.0/33", "10.0.0.0/abc", "::1/129", "10.0.0.0/8/1"]) {
      const error = errorOf({ DERRICK_CALLBACK_ALLOW_CIDRS: bad });
      expect(error.variable, bad).toBe("DERRICK_CALLBACK_ALLOW_CIDRS");
      expect(error.message).toContain(`"${bad}"`);
    }
  });

  it("config - durations accept units and bare milliseconds", () => {
    expect(parseDuration("0")).toBe(0);
    expect(parseDuration("250ms")).toBe(250);
    expect(parseDuration("5s")).toBe(5000);
    expect(parseDuration("5m")).toBe(300_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(() => parseDuration("5 minutes")).toThrow(/not a duration/);
  });

  it("config - the OpenTelemetry variables: the traces URL from either endpoint, headers merged and masked, gRPC and unknown samplers refused", () => {
    const off = loadConfig({});
    expect(off.tracing).toMatchObject({
      disabled: false,
      protocol: "http/protobuf",
      serviceName: "derrick",
      sampler: "parentbased_always_on",
    });
    expect(otlpTracesUrl(off.tracing)).toBeUndefined();
    expect(otlpTracesUrl(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing)).toBe(
      "http://collector:4318/v1/traces",
    );
    const both = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/base/",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example.com/otlp",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=general%20key,x-tenant=a",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-api-key=traces-key",
    });
    expect(otlpTracesUrl(both.tracing)).toBe("https://traces.example.com/otlp");
    expect(both.tracing.protocol).toBe("http/json");
    expect({ ...both.tracing.headers, ...both.tracing.tracesHeaders }).toEqual({ "x-api-key": "traces-key", "x-tenant": "a" });
    expect(both.tracing.headers["x-api-key"]).toBe("general key");
    expect(JSON.stringify(maskedConfig(both))).not.toContain("traces-key");
    expect(otlpTracesUrl(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).tracing)).toBeUndefined();
    expect(errorOf({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }).message).toBe(
      'OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported; use http/protobuf or http/json (gRPC is not)',
    );
    expect(errorOf({ OTEL_TRACES_SAMPLER: "sometimes" }).variable).toBe("OTEL_TRACES_SAMPLER");
    expect(errorOf({ OTEL_TRACES_SAMPLER_ARG: "1.5" }).variable).toBe("OTEL_TRACES_SAMPLER_ARG");
    expect(errorOf({ OTEL_EXPORTER_OTLP_HEADERS: "no-equals-sign" }).variable).toBe("OTEL_EXPORTER_OTLP_HEADERS");
    expect(errorOf({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }).variable).toBe("OTEL_EXPORTER_OTLP_ENDPOINT");
  });
});

describe("the runtime's own variables", () => {
  it("names the recommended allocator variables an environment leaves unset or empty, and keeps an operator's own value", () => {
    expect(unsetRuntimeVariables({})).toEqual(["MIMALLOC_PURGE_DELAY", "MIMALLOC_PURGE_HOLES"]);
    expect(unsetRuntimeVariables({ MIMALLOC_PURGE_DELAY: "", MIMALLOC_PURGE_HOLES: "1" })).toEqual(["MIMALLOC_PURGE_DELAY"]);
    expect(unsetRuntimeVariables({ MIMALLOC_PURGE_DELAY: "250", MIMALLOC_PURGE_HOLES: "0" })).toEqual([]);
  });

  it("recommends what the start script sets", () => {
    const start = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).scripts.start as string;
    for (const [name, value] of Object.entries(RECOMMENDED_RUNTIME_ENV)) expect(start).toContain(`${name}=\${${name}:-${value}}`);
  });
});
