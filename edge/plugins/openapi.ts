/**
 * OpenAPI 3.1 generated from the routes' TypeBox schemas, at `/openapi.json`, and a browsable page at
 * `/docs`. The page's script is served from the installed package, not a CDN: derrick runs where the
 * internet does not reach.
 */
import { Elysia } from "elysia";
import { OptionalKind } from "@sinclair/typebox";
import { openapi } from "@elysiajs/openapi";
import { fileURLToPath } from "node:url";
import type { BuildInfo } from "../../subjects/system.ts";
import { PROBLEM_CONTENT_TYPE, Problem } from "../../subjects/index.ts";
import { PARTITION_MARK, PARTITION_PARAMETERS } from "./auth.ts";

/** How the Problem schema describes itself: its responses are the problem+json ones. */
const PROBLEM_DESCRIPTION = Problem.description;

const SCALAR_PATH = "/docs/assets/scalar-standalone.js";

/** Marks an operation whose 200 answer may be sent in several media types (detail: {[mark]: types}). */
export const MEDIA_TYPES_MARK = "x-derrick-response-media-types";

/** Every JSON media type a request body is accepted in (edge/plugins/body.ts). */
export const JSON_REQUEST_MEDIA_TYPES = ["application/json", "text/json", "application/*+json"] as const;

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
 * What @elysiajs/openapi leaves out of or gets wrong in the generated document, put right:
 * - a `t.Void()` response comes out as `content: {type: "void"}`, which OpenAPI 3.1 forbids: a
 *   body-less response has no `content` at all;
 * - every error answer is sent as `application/problem+json`, not the `application/json` it lists;
 * - the partition header parameters are dropped on routes with path or query parameters: they are
 *   added again wherever the partition macro marked the operation;
 * - a JSON request body came out with an empty `content` (the plugin lists only named parsers, and
 *   bodies are parsed by the global one in body.ts): it gets the route's body schema under every
 *   JSON media type the edge accepts (the seed's application/json, text/json, application/*+json),
 *   and is `required: false` when the schema is t.Optional (the plugin marks every body required);
 * - a 200 answer sent in several media types (MEDIA_TYPES_MARK) lists each of them.
 */
export function completeDocument(doc: unknown, routes: readonly RouteInfo[] = []): unknown {
  const paths = (doc as { paths?: Record<string, Record<string, Operation>> }).paths ?? {};
  const bodies = new Map<string, unknown>();
  for (const route of routes) if (route.hooks?.body) bodies.set(`${route.method.toLowerCase()} ${route.path.replace(/:([^/]+)/g, "{$1}")}`, route.hooks.body);
  for (const [path, operations] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (!operation) continue;
      const body = bodies.get(`${method} ${path}`);
      if (operation.requestBody && Object.keys(operation.requestBody.content ?? {}).length === 0 && body) {
        operation.requestBody.content = Object.fromEntries(JSON_REQUEST_MEDIA_TYPES.map((type) => [type, { schema: body }]));
        // The plugin says `required: true` of every body; a t.Optional one may be left out.
        if ((body as Record<symbol, unknown>)[OptionalKind] === "Optional") (operation.requestBody as { required?: boolean }).required = false;
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

/** `routes` gives the app's routes once it is built (for the request body schemas). */
export const openapiPlugin = (build: BuildInfo, routes: () => readonly RouteInfo[] = () => []) =>
  new Elysia({ name: "derrick-openapi" })
    .onAfterHandle({ as: "global" }, ({ path, response }) => (path === "/openapi.json" ? completeDocument(response, routes()) : undefined))
    .get(SCALAR_PATH, () => Bun.file(fileURLToPath(import.meta.resolve("@scalar/api-reference/browser/standalone.js"))), { detail: { hide: true } })
    .use(
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
        provider: "scalar",
        // The type wants every Scalar option; we change the script's source and the document's address:
        // the plugin gives the page "openapi.json", relative, which from /docs/ (served too) is a 404.
        scalar: { cdn: SCALAR_PATH, url: "/openapi.json" } as never,
        // staticFile: the plugin leaves out every path with a "." by default, which dropped /.well-known/jwks.json.
        exclude: { paths: [SCALAR_PATH], staticFile: false },
        documentation: {
          openapi: "3.1.0",
          info: {
            title: "derrick",
            version: build.version,
            description:
              "NATS-native platform serving subsurface/drilling service APIs. Errors are RFC 9457 problem+json with OSDU aliases (code, reason, message).",
          },
          components: {
            securitySchemes: {
              bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
              appkey: { type: "apiKey", in: "header", name: "appkey" },
            },
          },
        },
      }),
    );
