/**
 * The composition root: connects to NATS and starts the edge and/or a set of actors in this process,
 * with a graceful stop in the right order (edge stops taking requests → actors drain what they hold →
 * the NATS connection drains). Used by the CLI and by the test harness. listenForStop is what starts
 * that stop in a serving process: a signal, or an error nobody caught.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { withoutCredentials, type ActorName, type Config } from "../config/index.ts";
import { Bus } from "../platform/transport/index.ts";
import { connectNats, type NatsAuth } from "../platform/nats.ts";
import type { Logger } from "../platform/logger.ts";
import { startActors, type RunningActors } from "../actors/index.ts";
import { createEdgeApp, listenEdge, type RunningEdge } from "../edge/app.ts";
import { createMetrics } from "../edge/metrics.ts";
import type { Registry } from "prom-client";
import { watchStalls } from "../platform/stall-watch.ts";
import { onUncaughtError } from "../platform/uncaught.ts";
import { startTracing } from "../platform/tracing.ts";

export type BootOptions = {
  cfg: Config;
  natsUrl: string;
  natsAuth?: NatsAuth;
  log: Logger;
  edge: boolean;
  actors: readonly ActorName[];
  /** Collect process metrics (off in tests that boot several edges in one process). */
  processMetrics?: boolean;
};

export type Booted = {
  nc: NatsConnection;
  bus: Bus;
  edge?: RunningEdge;
  actors?: RunningActors;
  stop(): Promise<void>;
};

export async function boot(options: BootOptions): Promise<Booted> {
  const { cfg, log } = options;
  const nc = await connectNats(options.natsUrl, `derrick-${process.pid}`, log, options.natsAuth).catch((error: Error) => {
    // nats.js says only "connection refused" or "Authorization Violation": name what to check.
    const settings = cfg.natsUrl ? "NATS_URL, NATS_USER, NATS_PASSWORD" : "the embedded server";
    throw new Error(
      `cannot connect to NATS at ${options.natsUrl.split(",").map(withoutCredentials).join(",")} (${settings}): ${error.message}`,
      { cause: error },
    );
  });
  const metrics = createMetrics(options.processMetrics ?? true);
  // No OTLP endpoint: nothing of OpenTelemetry is loaded.
  const tracer = await startTracing(cfg.tracing, log);
  const bus = new Bus(nc, {
    timeoutMs: cfg.requestTimeoutMs,
    tracer,
    onRequest: metrics.observeNats,
    onReplyBody: metrics.observeReplyBody,
    onInboxError: (err) =>
      log.error({ err }, "NATS refused the edge's reply inbox: every request now fails with 503; allow this user to subscribe to _INBOX.>"),
  });
  let actors: RunningActors | undefined;
  let edge: RunningEdge | undefined;
  let metricsServer: { stop(): void } | undefined;
  try {
    if (options.actors.length) actors = await startActors(options.actors, nc, cfg, log, metrics.registry, tracer);
    if (options.edge) edge = listenEdge(createEdgeApp({ cfg, bus, log, metrics, tracer }), cfg, log);
    else if (cfg.http.metricsPort > 0) metricsServer = serveMetrics(metrics.registry, cfg, log);
  } catch (error) {
    await actors?.stop();
    await nc.close();
    await tracer.shutdown();
    throw error;
  }
  const stopWatching = watchStalls(log);
  let stopping: Promise<void> | undefined;
  return {
    nc,
    bus,
    edge,
    actors,
    stop: () =>
      (stopping ??= (async () => {
        stopWatching();
        metricsServer?.stop();
        await edge?.stop();
        await actors?.stop();
        if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
        // The spans of the last requests are exported before the process ends.
        await tracer.shutdown().catch((err: unknown) => log.warn({ err }, "the last spans could not be exported"));
      })()),
  };
}

/** `/metrics` of an actor-only process on DERRICK_METRICS_PORT: the edge serves its own, with the actors' series in it. */
function serveMetrics(registry: Registry, cfg: Config, log: Logger): { stop(): void } {
  const server = Bun.serve({
    hostname: cfg.http.host,
    port: cfg.http.metricsPort,
    fetch: async (request) =>
      new URL(request.url).pathname === "/metrics"
        ? new Response(await registry.metrics(), { headers: { "content-type": registry.contentType } })
        : new Response("not found: this port serves /metrics only\n", { status: 404 }),
  });
  log.info({ url: `http://${cfg.http.host}:${server.port}/metrics` }, "metrics served");
  return { stop: () => void server.stop(true) };
}

/** Why a serving process stops, and the exit code that says so. */
export type StopRequest = { reason: "signal" | "uncaught error" | "embedded nats-server exited"; exitCode: number };

/** A signal repeated within this time is the same stop request delivered twice (terminal and npm), not a second one. */
export const SIGNAL_REPEAT_MS = 1_000;

/** How long the drain after an uncaught error may take before the process exits anyway. */
export const UNCAUGHT_DRAIN_DEADLINE_MS = 30_000;

/**
 * Listens for what ends a serving process: SIGINT/SIGTERM (exit 0) or an uncaught error (exit 1; logged by
 * platform/uncaught.ts); `requested` resolves at the first and the caller runs the graceful stop. A second signal
 * (SIGNAL_REPEAT_MS or more later) exits at once (130); a process an uncaught error may have broken exits 1 past
 * `drainDeadlineMs`. Installed before boot, so an error during start-up stops the process once it is up.
 */
export function listenForStop(
  log: Logger,
  options: {
    drainDeadlineMs?: number;
    /** SIGHUP too drains and stops (the process reloads nothing; its default would end it without draining). */
    stopOnHangup?: boolean;
  } = {},
): { requested: Promise<StopRequest>; dispose(): void } {
  let request: (value: StopRequest) => void;
  const requested = new Promise<StopRequest>((resolve) => (request = resolve));
  let firstSignalAt: number | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (firstSignalAt !== undefined) {
      // One Ctrl-C can arrive twice: from the terminal (to the whole foreground group) and forwarded
      // by `npm start`, which passes SIGINT and SIGTERM on to its child. Only a later one means "now".
      if (Date.now() - firstSignalAt < SIGNAL_REPEAT_MS) return;
      log.warn({ signal }, "second signal: exiting now");
      process.exit(130);
    }
    firstSignalAt = Date.now();
    log.info({ signal }, "shutting down: draining");
    request({ reason: "signal", exitCode: 0 });
  };
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", ...(options.stopOnHangup ? (["SIGHUP"] as const) : [])];
  for (const signal of signals) process.on(signal, onSignal);
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const uninstall = onUncaughtError(log, () => {
    const drainDeadlineMs = options.drainDeadlineMs ?? UNCAUGHT_DRAIN_DEADLINE_MS;
    deadline = setTimeout(() => {
      log.fatal({ drainDeadlineMs }, "the drain after an uncaught error did not finish in time: exiting now");
      process.exit(1);
    }, drainDeadlineMs);
    request({ reason: "uncaught error", exitCode: 1 });
  });
  return {
    requested,
    dispose() {
      clearTimeout(deadline);
      uninstall();
      for (const signal of signals) process.off(signal, onSignal);
    },
  };
}
