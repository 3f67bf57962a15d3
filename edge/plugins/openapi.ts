/**
 * OpenAPI 3.1 generated from the routes' TypeBox schemas, at `/openapi.json`, and a browsable page at
 * `/docs` (`GET /` leads there). What the generated document lacks or gets wrong is put right here
 * (completeDocument); what it should say beyond the schemas (introduction, security, examples,
 * statuses) is in edge/openapi/document.ts. The page and its script come from this origin only:
 * derrick runs where the internet does not reach (edge/openapi/docs-page.ts).
 */
import { Elysia } from "elysia";
import { OptionalKind } from "@sinclair/typebox";
import { openapi } from "@elysiajs/openapi";
import type { BuildInfo } from "../../subjects/system.ts";
import { PROBLEM_CONTENT_TYPE, Problem } from "../../subjects/index.ts";
import { PARTITION_MARK, PARTITION_PARAMETERS } from "./auth.ts";
import { acceptsGzip } from "../forward.ts";
import { JSON_REQUEST_MEDIA_TYPES, describeDocument, type Document } from "../openapi/document.ts";
import { SCALAR_ASSET_PATH, docsResponse, scalarAssetFile } from "../openapi/docs-page.ts";

/** How the Problem schema describes itself: its responses are the problem+json ones. */
const PROBLEM_DESCRIPTION = Problem.description;

/** Marks an operation whose 200 answer may be sent in several media types (detail: {[mark]: types}). */
export const MEDIA_TYPES_MARK = "x-derrick-response-media-types";

/** What the document needs of a route: its method, Elysia path and body schema. */
export type RouteInfo = { method: string; path: string; hooks?: { body?: unknown } };

type Operation = {
  parameters?: Array<{ name: string; in: string }>;
  requestBody?: { content?: Record<string, unknown> };
  responses?: Record<string, { content?: Record<string, { schema?: { description?: string } }> | { type?: string } }>;
  [PARTITION_MARK]?: boolean;
  [MEDIA_TYPES_MARK]?: readonly string[];
};

/**
 * Puts right what @elysiajs/openapi leaves out of or gets wrong: void responses, problem media types,
 * dropped partition headers, empty or always-required request bodies, a 200 in several media types
 * (MEDIA_TYPES_MARK), OSDU's `…/records/{id}:delete` (each case: docs/edge.md#what-completedocument-puts-right).
 */
export function completeDocument(doc: unknown, routes: readonly RouteInfo[] = []): unknown {
  const paths = (doc as { paths?: Record<string, Record<string, Operation>> }).paths ?? {};
  documentRecordDelete(paths);
  const bodies = new Map<string, unknown>();
  for (const route of routes)
    if (route.hooks?.body) bodies.set(`${route.method.toLowerCase()} ${route.path.replace(/:([^/]+)/g, "{$1}")}`, route.hooks.body);
  for (const [path, operations] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (!operation) continue;
      const body = bodies.get(`${method} ${path}`);
      if (operation.requestBody && Object.keys(operation.requestBody.content ?? {}).length === 0 && body) {
        operation.requestBody.content = Object.fromEntries(JSON_REQUEST_MEDIA_TYPES.map((type) => [type, { schema: body }]));
        // The plugin says `required: true` of every body; a t.Optional one may be left out.
        if ((body as Record<symbol, unknown>)[OptionalKind] === "Optional")
          (operation.requestBody as { required?: boolean }).required = false;
      }
      const mediaTypes = operation[MEDIA_TYPES_MARK];
      const ok = operation.responses?.["200"]?.content as Record<string, unknown> | undefined;
      if (mediaTypes && ok?.["application/json"]) {
        operation.responses!["200"]!.content = Object.fromEntries(mediaTypes.map((type) => [type, ok["application/json"]])) as never;
      }
      delete operation[MEDIA_TYPES_MARK];
      for (const response of Object.values(operation.responses ?? {})) {
        const content = response?.content as Record<string, { schema?: { description?: string } }> | { type?: string } | undefined;
        if ((content as { type?: string } | undefined)?.type === "void") delete response.content;
        const json = (content as Record<string, { schema?: { description?: string } }> | undefined)?.["application/json"];
        if (json && json.schema?.description === PROBLEM_DESCRIPTION) response.content = { [PROBLEM_CONTENT_TYPE]: json };
      }
      if (operation[PARTITION_MARK]) {
        const present = new Set((operation.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name));
        operation.parameters = [...(operation.parameters ?? []), ...PARTITION_PARAMETERS.filter((p) => !present.has(p.name))];
        delete operation[PARTITION_MARK];
      }
    }
  }
  return doc;
}

const RECORD_ACTION = "/api/storage/v2/records/{action}";
const RECORD_DELETE = "/api/storage/v2/records/{id}:delete";

function documentRecordDelete(paths: Record<string, Record<string, Operation>>): void {
  const operations = paths[RECORD_ACTION];
  if (!operations) return;
  delete paths[RECORD_ACTION];
  for (const operation of Object.values(operations)) {
    operation.parameters = operation.parameters?.map((p) =>
      p.in === "path" && p.name === "action"
        ? { ...p, name: "id", description: "the record id (it holds colons)", schema: { type: "string", maxLength: 1024 } }
        : p,
    );
  }
  paths[RECORD_DELETE] = operations;
}

/** The bytes of a JSON document or a script, as sent: gzipped once, for every client that takes gzip. */
export type Encoded = { plain: Uint8Array<ArrayBuffer>; gzip: Uint8Array<ArrayBuffer>; type: string };
export const encode = (bytes: Uint8Array<ArrayBuffer>, type: string): Encoded => ({ plain: bytes, gzip: Bun.gzipSync(bytes), type });
/** The encoded body as the request takes it (gzip or plain), with any further headers. */
export const send = (request: Request, body: Encoded, headers: Record<string, string> = {}) => {
  const gzip = acceptsGzip(request.headers.get("accept-encoding"));
  return new Response(gzip ? body.gzip : body.plain, {
    headers: { "content-type": body.type, vary: "accept-encoding", ...(gzip ? { "content-encoding": "gzip" } : {}), ...headers },
  });
};

/**
 * `routes` gives the app's routes once it is built (for the request body schemas). Each document the
 * plugin builds (again only when routes are added) is completed and encoded once; both big answers go
 * gzipped where the client takes it (sizes: docs/edge.md#the-api-document-and-docs).
 */
export const openapiPlugin = (build: BuildInfo, routes: () => readonly RouteInfo[] = () => []) => {
  const completed = new WeakMap<object, Encoded>();
  const complete = (generated: object): Encoded => {
    let encoded = completed.get(generated);
    if (!encoded) {
      // A copy: the plugin hands out the object it caches, and the fixes must apply once.
      const doc = describeDocument(completeDocument(JSON.parse(JSON.stringify(generated)), routes()) as Document);
      encoded = encode(new TextEncoder().encode(JSON.stringify(doc)), "application/json; charset=utf-8");
      completed.set(generated, encoded);
    }
    return encoded;
  };
  let script: Encoded | undefined;
  const title = "derrick API";
  return new Elysia({ name: "derrick-openapi" })
    .onAfterHandle({ as: "global" }, ({ path, request, response }) =>
      path === "/openapi.json" && typeof response === "object" && response !== null && !(response instanceof Response)
        ? send(request, complete(response))
        : undefined,
    )
    .get("/", ({ redirect }) => redirect("/docs", 302), { detail: { hide: true } })
    .get("/docs", () => docsResponse(title), { detail: { hide: true } })
    .get("/docs/", () => docsResponse(title), { detail: { hide: true } })
    .get(
      SCALAR_ASSET_PATH,
      async ({ request }) =>
        send(request, (script ??= encode(await Bun.file(scalarAssetFile()).bytes(), "text/javascript; charset=utf-8"))),
      { detail: { hide: true } },
    )
    .use(
      openapi({
        // The page is ours (docs-page.ts): the plugin's pulls Scalar from a CDN by default and puts
        // the description, unescaped, into HTML attributes.
        provider: null,
        specPath: "/openapi.json",
        // staticFile: the plugin leaves out every path with a "." by default, which dropped /.well-known/jwks.json.
        exclude: { paths: [SCALAR_ASSET_PATH, "/", "/docs", "/docs/"], staticFile: false },
        documentation: {
          openapi: "3.1.0",
          info: { title, version: build.version },
        },
      }),
    );
};
