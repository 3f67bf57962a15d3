/**
 * What the API document says beyond the route schemas, so that a client generator and a person can
 * use it: an introduction that says how to get a token, a description per tag, the security schemes
 * (OAuth 2.0 client credentials at /v2/token, a bearer JWT, the appkey header) with `security: []` on
 * public operations, a server, the partition headers as alternatives, whole numbers where a query
 * takes only those, the examples of edge/openapi/examples.ts, and every status an operation answers.
 * Applied to the document @elysiajs/openapi generates (edge/plugins/openapi.ts): route files stay as
 * they are, and anything new they declare is described by the same rules.
 */
import { Problem } from "../../subjects/errors.ts";
import { CATALOG_DEFAULT_LIMIT, CATALOG_MAX_LIMIT, TASK_PAGE_DEFAULT, TASK_PAGE_MAX } from "../../subjects/projects.ts";
import { JSON_MEDIA_TYPES } from "../plugins/body.ts";
import { OPERATION_EXAMPLES, PARAMETER_EXAMPLES } from "./examples.ts";

type Json = Record<string, unknown>;
type Parameter = { name: string; in: string; required?: boolean; description?: string; schema?: Json; example?: unknown };
type MediaType = { schema?: Json & { description?: string; $ref?: string }; example?: unknown };
type Response = { description?: string; content?: Record<string, MediaType>; headers?: Json };
export type Operation = {
  tags?: string[];
  summary?: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { description?: string; required?: boolean; content?: Record<string, MediaType> };
  responses?: Record<string, Response>;
  security?: Array<Record<string, string[]>>;
};
export type Document = {
  info: Json & { description?: string };
  servers?: Json[];
  tags?: Array<{ name: string; description: string }>;
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown>; securitySchemes?: Record<string, unknown> } & Json;
};

/**
 * The media types a JSON request body is listed with: the concrete ones the edge reads (body.ts), not
 * the pattern `application/<subtype>+json`, which the body's description states instead.
 */
export const JSON_REQUEST_MEDIA_TYPES: readonly string[] = JSON_MEDIA_TYPES.filter((type) => !type.includes("<"));
export const JSON_BODY_DESCRIPTION = `JSON, sent as ${JSON_REQUEST_MEDIA_TYPES.map((type) => `\`${type}\``).join(", ")} or any other \`application/<subtype>+json\` (e.g. \`application/vnd.api+json\`); another media type is refused with 415.`;

/** Where the introduction (and a newcomer) starts. */
export const INTRODUCTION = `One origin serves every derrick API: notifications, twin properties, display items and key parameters with projects and tasks, OSDU search and storage, and reporting (assessments).

## Getting a token

1. Get a client: an operator creates one with \`derrick apps create\` (or lists it in \`DERRICK_CLIENTS\`) and hands you its \`client_id\`, \`client_secret\` and \`appkey\`.
2. Ask the token endpoint, \`POST /v2/token\`, for a token (OAuth 2.0 client credentials, RFC 6749 §4.4):

   \`\`\`sh
   curl -s -d grant_type=client_credentials -d client_id=demo -d client_secret=demo-secret-1 http://localhost:8080/v2/token
   \`\`\`

   The answer is \`{"access_token": "eyJ…", "token_type": "Bearer", "expires_in": 3600}\`.
3. Send it on every call as \`Authorization: Bearer <access_token>\`, with \`appkey: <appkey>\` where an operation asks for it (notifications, display items, key parameters, projects, tasks, assessments, reporting).

On this page: under **Authentication** (**oauth2 & appkey**), enter the client id and secret, press **Authorize** (the page asks \`/v2/token\` for you) and enter the appkey; every **Test Request** then carries both. Tick the \`slb-partition-id\` header there (filled with \`opendes\`) where an operation needs a partition. When derrick verifies tokens of an external issuer (\`DERRICK_AUTH_ISSUER\`), get the token there and use the **bearer** scheme instead; \`/v2/token\` then answers 404.

## Partition

Most operations act in one data partition, named by the header \`slb-partition-id\` or its OSDU name \`data-partition-id\`: send either one (both only when they name the same partition). No partition → 400; one this deployment does not serve → 403. Twin properties take none (organization and environment in the path scope them).

## Answers

Errors are RFC 9457 \`application/problem+json\` (\`type\`, \`title\`, \`status\`, \`detail\`, \`instance\`, \`errors\` naming each field by JSON pointer) with OSDU's aliases \`code\`, \`reason\` and \`message\`; the token endpoint answers RFC 6749 errors (\`{"error", "error_description"}\`). A method a path does not have → 405 with an \`Allow\` header; a body over its size limit → 413; too many requests → 429 and a capability that is not running → 503, both with \`Retry-After\`.`;

/** One description per tag; a tag an operation uses without one here fails the document test. */
export const TAGS: ReadonlyArray<{ name: string; description: string }> = [
  {
    name: "system",
    description:
      "Liveness, readiness, metrics, build information and an echo, all public; `whoami` shows the caller as the edge sees it (token, appkey, partition).",
  },
  {
    name: "auth",
    description:
      "derrick's embedded OAuth 2.0 issuer: client-credentials tokens at `/v2/token` and the public keys that verify them (JWKS). Both answer 404 when an external issuer is configured.",
  },
  {
    name: "notifications",
    description:
      "Webhook subscriptions, one per partition, client and notification type. Events posted here (or published on NATS: docs/notifications.md) are delivered to each matching subscription's callback as CloudEvents signed with Standard Webhooks, retried on a schedule; the delivery log and replays are per subscription.",
  },
  {
    name: "twin-properties",
    description:
      "Desired and reported configuration of edge devices (device SDK 3.0), by group; a PUT lands all of its properties or none, and the device is notified. Bearer token with `twins.writers` / `twins.readers`; no partition header.",
  },
  {
    name: "display-items",
    description:
      "The catalog of display items, and content computed from a project's values (asynchronous: a task, then the content or its parts).",
  },
  {
    name: "key-parameters",
    description:
      "The catalog of key parameters, and content computed from a project's values (asynchronous: a task, then the content or its parts).",
  },
  {
    name: "projects",
    description:
      "Projects: name, members and values of display items and key parameters. Written by `projects.admins`; read by members and admins.",
  },
  {
    name: "tasks",
    description:
      "Content tasks: `queued` → `running` → `succeeded` (the content is then readable for 60 s) or `failed` (`error` says why).",
  },
  {
    name: "search",
    description:
      "OSDU Search v2: queries with Lucene syntax, spatial filters, sorting, aggregation and cursors, over the records written through storage. OSDU's rules and messages.",
  },
  {
    name: "storage",
    description: "OSDU Storage-compatible record writes, reads and deletes; what they write is searchable within a second.",
  },
  {
    name: "assessments",
    description:
      "The five inputs of reporting: licenses, segment analyses, prospect analyses, full cycle analyses and multiple scenario analyses. Written by `assessments.editors`; each write is versioned (ETag).",
  },
  {
    name: "reporting",
    description:
      "Aggregations over the assessments: licenses with their prospects, chance of success and resources, cash flows and economic indicators, scenario trees.",
  },
];

/**
 * The credentials. A bearer token is either one from /v2/token (oauth2: a generator or /docs can
 * fetch it) or one from an external issuer (bearer): the same header, so operations accept either.
 */
export const SECURITY_SCHEMES = {
  oauth2: {
    type: "oauth2",
    description:
      "A token from derrick's embedded issuer: OAuth 2.0 client credentials at `/v2/token`. Sent as `Authorization: Bearer <token>`.",
    flows: { clientCredentials: { tokenUrl: "/v2/token", scopes: {} } },
  },
  bearer: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description: "A JWT of the configured issuer (derrick's own, or `DERRICK_AUTH_ISSUER`), sent as `Authorization: Bearer <token>`.",
  },
  appkey: {
    type: "apiKey",
    in: "header",
    name: "appkey",
    description: "The application key registered to the token's client (`client_id`, else `azp`).",
  },
} as const;

/** The two partition headers, alternatives: either one, both only when equal. */
const PARTITION_HEADER_DOCS: Record<string, Omit<Parameter, "name" | "in">> = {
  "slb-partition-id": {
    required: false,
    description:
      "The data partition. Send this header or `data-partition-id` (either one; both only when they name the same partition, else 400). Neither → 400; a partition this deployment does not serve → 403.",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,128}$" },
  },
  "data-partition-id": {
    required: false,
    description: "OSDU's name of the partition header: an alternative to `slb-partition-id` (either one; both only when equal).",
    schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,128}$" },
  },
};

/** Query parameters that take only whole numbers; the schemas say string because the actors parse them (with their own messages). */
const WHOLE_NUMBER_QUERIES: Record<string, Record<string, Json>> = {
  offset: { catalog: { type: "integer", minimum: 0, default: 0, description: "items to skip" } },
  limit: {
    catalog: {
      type: "integer",
      minimum: 1,
      maximum: CATALOG_MAX_LIMIT,
      default: CATALOG_DEFAULT_LIMIT,
      description: `items per page (at most ${CATALOG_MAX_LIMIT})`,
    },
    tasks: {
      type: "integer",
      minimum: 1,
      maximum: TASK_PAGE_MAX,
      default: TASK_PAGE_DEFAULT,
      description: `tasks per page (at most ${TASK_PAGE_MAX})`,
    },
  },
  version: {
    entity: {
      type: "integer",
      minimum: 1,
      maximum: 9_999_999_999,
      description: "an earlier version (the ETag number); the last 16 are kept",
    },
  },
};
const queryKind = (path: string) =>
  /^\/v1\/(display-items|key-parameters)$/.test(path)
    ? "catalog"
    : /^\/assessments\/v1\/[a-z]+\/\{id\}$/.test(path)
      ? "entity"
      : path === "/v2/projects/{projectId}/tasks"
        ? "tasks"
        : undefined;

/** Operations that never wait on NATS, so never answer 503 or 504. */
const LOCAL_OPERATIONS = new Set([
  "GET /healthz",
  "GET /metrics",
  "GET /api/search/v2/liveness_check",
  "GET /api/storage/v2/liveness_check",
]);
/** Operations that wait on NATS with a bounded wait of their own (a ping), so never answer 504. */
const NO_TIMEOUT_OPERATIONS = new Set(["GET /readyz"]);

/** Statuses an operation's handler answers that no rule above implies. */
const EXTRA_STATUSES: Record<string, string[]> = {
  // An external issuer publishes the keys (DERRICK_AUTH_ISSUER).
  "GET /.well-known/jwks.json": ["404"],
};

/** What each problem status means, as the response's description. */
const PROBLEM_DESCRIPTIONS: Record<string, string> = {
  "400": "Bad request: `errors` names each field at fault by JSON pointer (body, path, query or header)",
  "401": "No valid bearer token, or (where the operation needs one) no appkey registered to the token's client",
  "403": "The partition is not served here, or the caller's groups do not allow this",
  "404": "Not found, or not the caller's",
  "405": "The path does not have this method; `Allow` lists those it has",
  "409": "Conflict with the current state (the problem says which)",
  "410": "Gone: no longer stored",
  "412": "If-Match names a version that is no longer current",
  "413": "The request body, or a value in it, is over its size limit",
  "415": "The request body's media type is not one the operation reads; `Accept` lists those it does",
  "429": "Too many requests; `Retry-After` says when to try again",
  "500": "Internal error",
  "503": "Not available now (no actor of the capability answered, or its queue is full); `Retry-After` says when to try again",
  "504": "The capability did not answer in time",
  "507": "A storage bound is reached (the problem names the setting)",
};
const SUCCESS_DESCRIPTIONS: Record<string, string> = { "200": "OK", "201": "Created", "202": "Accepted", "204": "No content" };
const OAUTH_DESCRIPTIONS: Record<string, string> = {
  "400": "RFC 6749 §5.2 error: invalid_request or unsupported_grant_type",
  "401": "RFC 6749 §5.2 error: invalid_client (with WWW-Authenticate: Basic)",
  "404": "RFC 6749 §5.2 error: tokens are issued by the configured external issuer, not here",
};

const PROBLEM_REF = { $ref: "#/components/schemas/Problem" };
const PROBLEM_EXAMPLE = {
  type: "urn:derrick:problem:validation",
  title: "Bad Request",
  status: 400,
  detail: "/body/callback_uri: must be an absolute http(s) URI",
  instance: "/v1/notifications/subscriptions/types/PlanShared",
  errors: [{ pointer: "/body/callback_uri", message: "must be an absolute http(s) URI" }],
  code: 400,
  reason: "Bad Request",
  message: "/body/callback_uri: must be an absolute http(s) URI",
};

const isProblem = (media: MediaType | undefined) =>
  media?.schema?.$ref === PROBLEM_REF.$ref || media?.schema?.description === Problem.description;
const PROBLEM_HEADERS: Record<string, Json> = {
  "415": { Accept: { description: "The media types the operation reads", schema: { type: "string" } } },
  "429": { "Retry-After": { description: "Seconds to wait before trying again", schema: { type: "integer", minimum: 0 } } },
  "503": { "Retry-After": { description: "Seconds to wait before trying again", schema: { type: "integer", minimum: 0 } } },
};
const problemResponse = (status: string): Response => ({
  description: PROBLEM_DESCRIPTIONS[status] ?? "Problem",
  ...(PROBLEM_HEADERS[status] ? { headers: PROBLEM_HEADERS[status] } : {}),
  content: { "application/problem+json": { schema: PROBLEM_REF } },
});

/** Statuses an operation answers by what it takes: checked before its handler runs, so true of every route alike. */
function impliedStatuses(key: string, operation: Operation): string[] {
  const statuses: string[] = [];
  if (operation.requestBody) statuses.push("400", "413");
  if (Object.keys(operation.requestBody?.content ?? {}).some((type) => type.includes("json"))) statuses.push("415");
  statuses.push(...(EXTRA_STATUSES[key] ?? []));
  if (operation.security?.length) statuses.push("401", "429");
  if (operation.parameters?.some((p) => p.name === "slb-partition-id")) statuses.push("400", "403");
  if (!LOCAL_OPERATIONS.has(key)) statuses.push("503");
  if (!LOCAL_OPERATIONS.has(key) && !NO_TIMEOUT_OPERATIONS.has(key)) statuses.push("504");
  return statuses;
}

/** Adds to `doc` (as @elysiajs/openapi built it, with completeDocument's fixes) everything this module describes. */
export function describeDocument(doc: Document): Document {
  doc.info.description = INTRODUCTION;
  doc.servers = [{ url: "/", description: "This derrick edge (the origin serving this document)" }];
  doc.components ??= {};
  doc.components.securitySchemes = SECURITY_SCHEMES;
  doc.components.schemas = {
    ...doc.components.schemas,
    Problem: { ...(JSON.parse(JSON.stringify(Problem)) as Json), example: PROBLEM_EXAMPLE },
  };
  const used = new Set<string>();
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const key = `${method.toUpperCase()} ${path}`;
      const examples = OPERATION_EXAMPLES[key];
      for (const tag of operation.tags ?? []) used.add(tag);
      // Either token, with the appkey where it is needed; nothing on public operations.
      operation.security = (operation.security ?? []).flatMap((requirement) => {
        if (!("bearer" in requirement)) return [requirement];
        const { bearer: _bearer, ...rest } = requirement;
        return [{ oauth2: [], ...rest }, requirement];
      });
      const kind = queryKind(path);
      operation.parameters = operation.parameters?.map((parameter) => {
        const documented = parameter.in === "header" ? PARTITION_HEADER_DOCS[parameter.name] : undefined;
        const whole = parameter.in === "query" && kind ? WHOLE_NUMBER_QUERIES[parameter.name]?.[kind] : undefined;
        const example = examples?.parameters?.[parameter.name] ?? PARAMETER_EXAMPLES[parameter.name];
        return {
          ...parameter,
          ...documented,
          ...(whole ? { schema: whole } : {}),
          ...(example !== undefined && parameter.example === undefined ? { example } : {}),
        };
      });
      const body = operation.requestBody;
      if (body?.content) {
        if (Object.keys(body.content).some((type) => type.includes("json")))
          body.description = body.description ? `${body.description}\n\n${JSON_BODY_DESCRIPTION}` : JSON_BODY_DESCRIPTION;
        for (const media of Object.values(body.content)) if (examples?.request !== undefined) media.example = examples.request;
      }
      const responses = (operation.responses ??= {});
      for (const status of impliedStatuses(key, operation)) responses[status] ??= problemResponse(status);
      for (const [status, response] of Object.entries(responses)) {
        const content = response.content ?? {};
        if (Object.values(content).some(isProblem)) {
          responses[status] = problemResponse(status);
          continue;
        }
        if (/^Response for status/.test(response.description ?? ""))
          response.description =
            (path === "/v2/token" && OAUTH_DESCRIPTIONS[status]) || SUCCESS_DESCRIPTIONS[status] || response.description;
        const example = examples?.responses?.[Number(status) as 200];
        if (example !== undefined) for (const media of Object.values(content)) media.example = example;
      }
      // Sorted by status: the order a reader (and /docs) expects.
      operation.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b)));
    }
  }
  doc.tags = TAGS.filter((tag) => used.has(tag.name)).map((tag) => ({ ...tag }));
  for (const name of used) if (!doc.tags.some((tag) => tag.name === name)) doc.tags.push({ name, description: "" });
  return doc;
}
