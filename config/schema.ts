/**
 * The one schema for all derrick configuration. Every process reads it once at start-up
 * (config/load.ts), validates it, freezes it and passes it down by argument.
 */
import { Type, type Static } from "@sinclair/typebox";

/** Every actor a process can run; `ACTORS` picks a subset. */
export const ACTOR_NAMES = [
  "system",
  "identity",
  "projects",
  "content-worker",
  "twins",
  "notifications",
  "dispatcher",
  "deliverer",
  "twin-mirror",
  "search",
  "storage",
  "reporting",
] as const;
export type ActorName = (typeof ACTOR_NAMES)[number];

/** Subject-safe token: partitions, client ids and the like travel inside NATS subjects. */
export const SUBJECT_TOKEN_PATTERN = "^[A-Za-z0-9_-]{1,128}$";

export const ClientSeed = Type.Object(
  {
    client_id: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }),
    client_secret: Type.String({ minLength: 8, maxLength: 256 }),
    appkey: Type.String({ minLength: 8, maxLength: 256 }),
    groups: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 256 })),
  },
  { additionalProperties: false },
);
export type ClientSeed = Static<typeof ClientSeed>;

export const Config = Type.Object({
  /** External NATS server; when absent `derrick start` runs an embedded nats-server. */
  natsUrl: Type.Optional(Type.String({ minLength: 1 })),
  /** Credentials for NATS_URL; unset → none, or the embedded server's internal user from the data dir. */
  natsUser: Type.Optional(Type.String({ minLength: 1 })),
  natsPassword: Type.Optional(Type.String({ minLength: 1 })),
  /** Client port of the embedded nats-server. Not 0: the CLI's admin commands and local devices find the server on it. */
  natsPort: Type.Integer({ minimum: 1, maximum: 65535 }),
  http: Type.Object({
    host: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 0, maximum: 65535 }),
    /** Largest request body the edge accepts, in bytes (→ 413 beyond). */
    bodyLimit: Type.Integer({ minimum: 1024 }),
    /** SO_REUSEPORT: several edge processes on one host share the port and the kernel spreads connections. */
    reusePort: Type.Boolean(),
    /** Requests per second one client (token client id) may make; 0 = no limit (→ 429 with Retry-After beyond). */
    rateLimit: Type.Number({ minimum: 0 }),
    /** Requests a client may make at once above the steady rate (token bucket size). */
    rateBurst: Type.Integer({ minimum: 1 }),
    /** Where a process without the edge serves `/metrics` (on http.host); 0 = none. */
    metricsPort: Type.Integer({ minimum: 0, maximum: 65535 }),
  }),
  dataDir: Type.String({ minLength: 1 }),
  partitions: Type.Array(Type.String({ pattern: SUBJECT_TOKEN_PATTERN }), { minItems: 1 }),
  /**
   * Unset (no DERRICK_CLIENTS): the registry's seeded clients are left as they are. Set (even `[]`):
   * the seeded clients become exactly these; ones no longer listed are removed, stale appkeys dropped.
   */
  clients: Type.Optional(Type.Array(ClientSeed)),
  /** Set by `derrick start` alone (bin/demo-client.ts), never read from the environment: added to the registry without touching other clients. */
  demoClient: Type.Optional(ClientSeed),
  actors: Type.Array(Type.Union(ACTOR_NAMES.map((name) => Type.Literal(name)))),
  auth: Type.Object({
    /** External issuer (`iss`); unset → derrick's embedded issuer. */
    issuer: Type.Optional(Type.String({ minLength: 1 })),
    jwksUrl: Type.Optional(Type.String({ pattern: "^https?://" })),
    audience: Type.String({ minLength: 1 }),
    /** Lifetime of tokens minted by the embedded issuer. */
    tokenTtlSeconds: Type.Integer({ minimum: 60, maximum: 86_400 }),
    /** How long the external issuer's JWKS (and tokens verified with it) are trusted before a refetch: bounds how long a removed key still works. */
    jwksMaxAgeMs: Type.Integer({ minimum: 1_000, maximum: 86_400_000 }),
    /** Defences of the embedded issuer's token endpoint (`POST /v2/token`): each client-secret check is a costly scrypt. */
    tokenEndpoint: Type.Object({
      /** Secret checks one identity process runs at once (→ the CPU token requests can take). */
      concurrency: Type.Integer({ minimum: 1, maximum: 256 }),
      /** Token requests one identity process lets wait for a check; beyond → 503 with Retry-After. */
      queue: Type.Integer({ minimum: 0, maximum: 100_000 }),
      /** Failed client authentications per client id within `failureWindowMs` before → 429 without a check; 0 = no throttling. */
      maxFailures: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
      /** The window failures are counted in (from the first failure); a locked client id is free again when it ends. */
      failureWindowMs: Type.Integer({ minimum: 1_000, maximum: 86_400_000 }),
      /** Token requests per second one remote address may send to one edge; 0 = no limit (→ 429 with Retry-After beyond). */
      addressRate: Type.Number({ minimum: 0 }),
      /** Token requests one remote address may send at once above that rate (token bucket size). */
      addressBurst: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    }),
  }),
  /** How long the edge waits for an actor's reply before answering 504. */
  // Bounded: above 2^31 - 1 ms setTimeout fires at once, so a huge value would time out every request.
  requestTimeoutMs: Type.Integer({ minimum: 10, maximum: 600_000 }),
  /** Most requests one actor handles at once in one process. */
  actorConcurrency: Type.Integer({ minimum: 1, maximum: 100_000 }),
  /** What may wait behind them, per actor and process; beyond either bound a request is answered 503 with Retry-After, unrun. */
  actorQueue: Type.Object({
    requests: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
    /** Request body bytes the waiting requests may hold together. */
    bytes: Type.Integer({ minimum: 0, maximum: 2 ** 40 }),
  }),
  /** Display items, key parameters and content tasks (docs/content.md). */
  content: Type.Object({
    /** Catalog JSON file loaded at start; absent → the one shipped in actors/projects/catalog.json. */
    catalogFile: Type.Optional(Type.String({ minLength: 1 })),
    /** Tasks one content-worker process runs at once. */
    workerConcurrency: Type.Integer({ minimum: 1, maximum: 10_000 }),
    /** How long JetStream waits for a worker's ack before redelivering a task (a killed worker's task). */
    ackWaitMs: Type.Integer({ minimum: 500, maximum: 3_600_000 }),
    /** Extra time every task is held before completing (drills and demos of the task states); 0 in production. */
    taskDelayMs: Type.Integer({ minimum: 0, maximum: 600_000 }),
    /** Work-queue limits (0 = none): unfinished tasks per requester and partition → 429; in all → 503. */
    queueLimits: Type.Object({
      perRequester: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
      total: Type.Integer({ minimum: 0, maximum: 100_000_000 }),
    }),
  }),
  /** Webhook delivery of notifications (docs/notifications.md). */
  delivery: Type.Object({
    /** Delay before each attempt (ms), counted from the previous attempt's end; the first from acceptance. */
    // A retry later than EVENTS' 7-day retention could never find its event.
    scheduleMs: Type.Array(Type.Integer({ minimum: 0, maximum: 7 * 86_400_000 }), { minItems: 1, maxItems: 100 }),
    /** ±20% jitter on each delay: only for the default schedule; a configured one is used as given. */
    scheduleJitter: Type.Boolean(),
    /** Time allowed for one attempt (connect to last byte of the response head). */
    timeoutMs: Type.Integer({ minimum: 100, maximum: 300_000 }),
    /** A subscription failing for this long without any success is paused. */
    pauseAfterMs: Type.Integer({ minimum: 1_000 }),
    /** Deliveries one deliverer process holds at once (running or waiting for their subscription's turn). */
    concurrency: Type.Integer({ minimum: 1, maximum: 100_000 }),
    /** Attempts one deliverer process runs at once for one subscription. */
    perSubscription: Type.Integer({ minimum: 1, maximum: 10_000 }),
    /** CIDRs callbacks may resolve to despite the SSRF rules (e.g. 127.0.0.1/32 for local demos and tests). */
    allowCidrs: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    /** Accept plain http:// callbacks. */
    allowHttp: Type.Boolean(),
  }),
  /** Search and the record store that feeds it (docs/search.md). */
  search: Type.Object({
    /** The local index replica of this search actor; absent → <dataDir>/search/index.sqlite. */
    indexFile: Type.Optional(Type.String({ minLength: 1 })),
    /** Open cursors allowed per partition (→ 429 beyond). */
    cursorLimit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    /** Open cursors allowed per principal in a partition (→ 429 beyond), so one caller cannot take the partition's whole quota. */
    cursorPrincipalLimit: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    /** How long a cursor lives after each use. */
    cursorTtlMs: Type.Integer({ minimum: 1_000, maximum: 86_400_000 }),
    /**
     * How much of each index file is memory-mapped for reads; mapped pages count in the RSS (0: none, reads go through
     * SQLite's page cache). At most SQLite's own cap (SQLITE_MAX_MMAP_SIZE, 0x7fff0000), which it would apply silently.
     */
    mmapBytes: Type.Integer({ minimum: 0, maximum: 0x7fff0000 }),
  }),
  /** Device twins' storage bounds (docs/twins.md). */
  twins: Type.Object({
    /** Most twins (one JetStream stream each) the twins actor creates; 0 = no cap. */
    maxTwins: Type.Integer({ minimum: 0, maximum: 10_000_000 }),
    /** What one twin's bucket may hold, history included. */
    maxBytes: Type.Integer({ minimum: 64 * 1024, maximum: 2 ** 40 }),
    /** Most twins the twins actor reads from memory at once (a watch each); the least recently read go first. */
    views: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
  }),
  /** Redis-backed devices whose twin the twin-mirror actor copies: desired JetStream → Redis, reported back (docs/twins.md). */
  twinMirrors: Type.Array(
    Type.Object(
      {
        organization: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }),
        environment: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }),
        twinId: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }),
        redis: Type.String({ pattern: "^redis://" }),
      },
      { additionalProperties: false },
    ),
  ),
  /** Replicas of every stream and KV bucket derrick creates (R3 on a JetStream cluster; 1 on one server). */
  jetstreamReplicas: Type.Integer({ minimum: 1, maximum: 5 }),
  logLevel: Type.Union(["fatal", "error", "warn", "info", "debug", "trace", "silent"].map((l) => Type.Literal(l))),
  /** One info line per HTTP request (method, route, status, duration, request id, client id). */
  accessLog: Type.Boolean(),
  /** Span export over OTLP/HTTP, by the standard OpenTelemetry variables (docs/operations.md#exporting-spans-otlp). */
  tracing: Type.Object({
    /** OTEL_SDK_DISABLED: no export even with an endpoint set. */
    disabled: Type.Boolean(),
    /** OTEL_EXPORTER_OTLP_ENDPOINT: the base URL; traces go to `<endpoint>/v1/traces`. */
    endpoint: Type.Optional(Type.String({ pattern: "^https?://" })),
    /** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the traces URL as given (wins over `endpoint`). */
    tracesEndpoint: Type.Optional(Type.String({ pattern: "^https?://" })),
    protocol: Type.Union([Type.Literal("http/protobuf"), Type.Literal("http/json")]),
    /** OTEL_EXPORTER_OTLP_HEADERS, then OTEL_EXPORTER_OTLP_TRACES_HEADERS over it: sent with every export (credentials). */
    headers: Type.Record(Type.String(), Type.String()),
    tracesHeaders: Type.Record(Type.String(), Type.String()),
    serviceName: Type.String({ minLength: 1 }),
    /** OTEL_TRACES_SAMPLER: which traces are recorded; parent-based ones follow the caller's sampled flag. */
    sampler: Type.Union(
      ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"].map(
        (name) => Type.Literal(name),
      ),
    ),
    /** OTEL_TRACES_SAMPLER_ARG: the share of traces a ratio sampler records. */
    samplerRatio: Type.Number({ minimum: 0, maximum: 1 }),
    /** OTEL_BSP_SCHEDULE_DELAY: how long finished spans wait to be exported together. */
    batchDelayMs: Type.Integer({ minimum: 1, maximum: 600_000 }),
  }),
});
export type Config = Static<typeof Config>;
