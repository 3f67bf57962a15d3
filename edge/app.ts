/**
 * The edge: one Elysia app composed of plugins (request id, body, errors, auth, metrics, OpenAPI) and
 * one route group per capability. It translates HTTP into NATS requests and holds no business logic.
 */
import { Elysia } from "elysia";
import type { Config } from "../config/index.ts";
import type { Bus } from "../platform/transport/index.ts";
import type { Logger } from "../platform/logger.ts";
import { buildInfo } from "../platform/build-info.ts";
import { assignRequestId, beginSpan, requestIdOf, spanOf, startOf, traceIdOf } from "./request-state.ts";
import { noTracer, type Tracer } from "../platform/tracing.ts";
import { errorsPlugin } from "./plugins/errors.ts";
import { bodyPlugin, effectiveBodyLimit, serverBodyCap, type RouteBodyLimits } from "./plugins/body.ts";
import { authPlugin, principalOf } from "./plugins/auth.ts";
import { openapiPlugin, type RouteInfo } from "./plugins/openapi.ts";
import { methodNotAllowedPlugin } from "./plugins/method-not-allowed.ts";
import { createVerifier } from "./verifier.ts";
import type { EdgeMetrics } from "./metrics.ts";
import { systemBodyLimits, systemRoutes } from "./routes/system.ts";
import { authRoutes } from "./routes/auth.ts";
import { notificationBodyLimits, notificationRoutes } from "./routes/notifications.ts";
import { twinBodyLimits, twinRoutes } from "./routes/twins.ts";
import { projectRoutes } from "./routes/projects.ts";
import { searchRoutes } from "./routes/search.ts";
import { reportingRoutes } from "./routes/reporting.ts";
import { consoleRoutes } from "./routes/console.ts";

export type EdgeDeps = { cfg: Config; bus: Bus; log: Logger; metrics: EdgeMetrics; tracer?: Tracer };

/** Routes that read their own body's media type: the OAuth token endpoint (forms, RFC 6749 errors). */
const TOKEN_ROUTES: ReadonlySet<string> = new Set(["/v2/token"]);

/** Routes whose own body limit is below DERRICK_BODY_LIMIT, checked before their body is read. */
export const routeBodyLimits: RouteBodyLimits = { ...systemBodyLimits, ...notificationBodyLimits, ...twinBodyLimits };

export function createEdgeApp({ cfg, bus, log, metrics, tracer = noTracer }: EdgeDeps) {
  const verifier = createVerifier(cfg, bus);
  const auth = authPlugin(cfg, bus, verifier);
  const maxPayload = bus.nc.info?.max_payload;
  const bodyLimit = effectiveBodyLimit(cfg.http.bodyLimit, maxPayload);
  if (bodyLimit < cfg.http.bodyLimit) {
    log.warn(
      { DERRICK_BODY_LIMIT: cfg.http.bodyLimit, natsMaxPayload: maxPayload, bodyLimit },
      "the NATS server's max_payload cannot carry bodies up to DERRICK_BODY_LIMIT: larger bodies are refused with 413; raise max_payload on the server to keep the configured limit",
    );
  }
  const routeTable: { get: () => readonly RouteInfo[] } = { get: () => [] };
  const app = new Elysia({ name: "derrick-edge", normalize: false })
    .onRequest(({ request, set }) => {
      set.headers["x-request-id"] = assignRequestId(request);
      if (tracer.exporting) beginSpan(request, tracer);
    })
    .use(methodNotAllowedPlugin(() => routeTable.get()))
    .use(errorsPlugin(log))
    .use(bodyPlugin(bodyLimit, routeBodyLimits, TOKEN_ROUTES))
    .onAfterResponse({ as: "global" }, ({ request, route, set, responseValue }) => {
      const status = responseStatus(responseValue, set.status);
      const ms = performance.now() - startOf(request);
      metrics.observeHttp(route || "unmatched", request.method, status, ms / 1000);
      if (tracer.exporting)
        spanOf(request)?.end({ status, ...(route ? { route } : {}), ...(status >= 500 ? { error: `answered ${status}` } : {}) });
      if (status < 500 && !cfg.accessLog) return;
      const line = {
        method: request.method,
        route: route || "unmatched",
        status,
        ms: Math.round(ms * 10) / 10,
        requestId: requestIdOf(request),
        traceId: traceIdOf(request),
        clientId: principalOf(request)?.clientId,
      };
      if (status >= 500) log.warn(line, "request answered with a server error");
      else log.info(line, "request");
    })
    .use(openapiPlugin(buildInfo(), () => routeTable.get()))
    .use(systemRoutes(cfg, bus, auth, metrics))
    .use(authRoutes(cfg, bus))
    .use(notificationRoutes(cfg, bus, auth))
    .use(twinRoutes(cfg, bus, auth))
    .use(projectRoutes(cfg, bus, auth))
    .use(searchRoutes(cfg, bus, auth))
    .use(reportingRoutes(cfg, bus, auth))
    .use(consoleRoutes(cfg, log));
  routeTable.get = () => app.routes as readonly RouteInfo[];
  return app;
}

/** A returned Response (forwarded replies, problems) holds the status; anything else left it in `set`. */
function responseStatus(value: unknown, setStatus: number | string | undefined): number {
  if (value instanceof Response) return value.status;
  return typeof setStatus === "number" ? setStatus : Number(setStatus) || 200;
}

export type EdgeApp = ReturnType<typeof createEdgeApp>;

export type RunningEdge = { url: string; port: number; stop(): Promise<void> };

export function listenEdge(app: EdgeApp, cfg: Config, log: Logger): RunningEdge {
  try {
    app.listen({ hostname: cfg.http.host, port: cfg.http.port, reusePort: cfg.http.reusePort, maxRequestBodySize: serverBodyCap() });
  } catch (error) {
    // Bun says "Failed to start server. Is port 8080 in use?": name the settings that chose the address.
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "EADDRINUSE" && code !== "EADDRNOTAVAIL" && code !== "EACCES") throw error;
    const why =
      code === "EADDRINUSE"
        ? "another process holds that port (set DERRICK_HTTP_PORT to a free one)"
        : code === "EADDRNOTAVAIL"
          ? "no interface of this host has that address (DERRICK_HTTP_HOST)"
          : "not permitted (a port below 1024 needs privileges)";
    throw new Error(`the edge cannot listen on ${cfg.http.host}:${cfg.http.port} (DERRICK_HTTP_HOST, DERRICK_HTTP_PORT): ${why}`, {
      cause: error,
    });
  }
  const server = app.server!;
  const url = `http://${cfg.http.host.includes(":") ? `[${cfg.http.host}]` : cfg.http.host}:${server.port}`;
  log.info({ url }, "edge listening");
  return {
    url,
    port: server.port!,
    // Stop taking connections, let requests in flight finish.
    stop: async () => {
      await app.stop(false);
    },
  };
}
