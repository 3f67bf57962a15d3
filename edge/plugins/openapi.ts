/**
 * OpenAPI 3.1 generated from the routes' TypeBox schemas, at `/openapi.json`, and a browsable page at
 * `/docs`. The page's script is served from the installed package, not a CDN: derrick runs where the
 * internet does not reach.
 */
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { fileURLToPath } from "node:url";
import type { BuildInfo } from "../../subjects/system.ts";

const SCALAR_PATH = "/docs/assets/scalar-standalone.js";

/**
 * @elysiajs/openapi renders a `t.Void()` response as `content: {type: "void"}`, which OpenAPI 3.1
 * forbids; a body-less response has no `content` at all.
 */
export function withoutVoidContent(doc: unknown): unknown {
  const paths = (doc as { paths?: Record<string, Record<string, { responses?: Record<string, { content?: unknown }> }>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const response of Object.values(operation?.responses ?? {})) {
        if ((response?.content as { type?: string } | undefined)?.type === "void") delete response.content;
      }
    }
  }
  return doc;
}

export const openapiPlugin = (build: BuildInfo) =>
  new Elysia({ name: "derrick-openapi" })
    .onAfterHandle({ as: "global" }, ({ path, response }) => (path === "/openapi.json" ? withoutVoidContent(response) : undefined))
    .get(SCALAR_PATH, () => Bun.file(fileURLToPath(import.meta.resolve("@scalar/api-reference/browser/standalone.js"))), { detail: { hide: true } })
    .use(
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
        provider: "scalar",
        // The type wants every Scalar option; cdn is the only one we change.
        scalar: { cdn: SCALAR_PATH } as never,
        exclude: { paths: [SCALAR_PATH] },
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
