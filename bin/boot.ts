/**
 * The composition root: connects to NATS and starts the edge and/or a set of actors in this process,
 * with a graceful stop in the right order (edge stops taking requests → actors drain what they hold →
 * the NATS connection drains). Used by the CLI and by the test harness.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import type { ActorName, Config } from "../config/index.ts";
import { Bus } from "../subjects/index.ts";
import { connectNats, type NatsAuth } from "../platform/nats.ts";
import type { Logger } from "../platform/logger.ts";
import { startActors, type RunningActors } from "../actors/index.ts";
import { createEdgeApp, listenEdge, type RunningEdge } from "../edge/app.ts";
import { createMetrics } from "../edge/metrics.ts";
import { watchStalls } from "../platform/stall-watch.ts";

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
  const nc = await connectNats(options.natsUrl, `derrick-${process.pid}`, log, options.natsAuth);
  const metrics = createMetrics(options.processMetrics ?? true);
  const bus = new Bus(nc, {
    timeoutMs: cfg.requestTimeoutMs,
    onRequest: metrics.observeNats,
    onInboxError: (err) => log.error({ err }, "NATS refused the edge's reply inbox: every request now fails with 503; allow this user to subscribe to _INBOX.>"),
  });
  let actors: RunningActors | undefined;
  let edge: RunningEdge | undefined;
  try {
    if (options.actors.length) actors = await startActors(options.actors, nc, cfg, log);
    if (options.edge) edge = listenEdge(createEdgeApp({ cfg, bus, log, metrics }), cfg, log);
  } catch (error) {
    await actors?.stop();
    await nc.close();
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
        await edge?.stop();
        await actors?.stop();
        if (!nc.isClosed()) await nc.drain().catch(() => nc.close());
      })()),
  };
}
