/** Every actor by name, so a process can run any subset (`ACTORS`, `derrick actor <names…>`). */
import type { NatsConnection } from "@nats-io/nats-core";
import type { Registry } from "prom-client";
import type { ActorName, Config } from "../config/index.ts";
import type { Logger } from "../platform/logger.ts";
import type { Tracer } from "../platform/tracing.ts";
import type { RuntimeOptions, ServedActor } from "./runtime/service.ts";
import { storagePolicy } from "./runtime/storage.ts";
import { retryTransient } from "./runtime/nats-errors.ts";
import { startSystemActor } from "./system/index.ts";
import { startIdentityActor } from "./identity/index.ts";
import { startDelivererActor, startDispatcherActor, startNotificationsActor } from "./notifications/index.ts";
import { startTwinsActor } from "./twins/index.ts";
import { startTwinMirrorActor } from "./twin-mirror/index.ts";
import { startContentWorker, startProjectsActor } from "./projects/index.ts";
import { startSearchActor } from "./search/index.ts";
import { startStorageActor } from "./storage/index.ts";
import { startReportingActor } from "./reporting/index.ts";

type Starter = (nc: NatsConnection, cfg: Config, options: RuntimeOptions) => Promise<ServedActor>;

const runtime = (cfg: Config, log: Logger, metrics?: Registry, tracer?: Tracer): RuntimeOptions => ({
  log,
  metrics,
  ...(tracer ? { tracer } : {}),
  concurrency: cfg.actorConcurrency,
  queue: cfg.actorQueue,
  storage: storagePolicy(cfg),
});

const STARTERS: Record<ActorName, Starter> = {
  system: (nc, _cfg, options) => startSystemActor(nc, options),
  identity: (nc, cfg, options) => startIdentityActor(nc, cfg, options),
  notifications: (nc, cfg, options) => startNotificationsActor(nc, cfg, options),
  dispatcher: (nc, cfg, options) => startDispatcherActor(nc, cfg, options),
  deliverer: (nc, cfg, options) => startDelivererActor(nc, cfg, options),
  twins: (nc, cfg, options) => startTwinsActor(nc, options, cfg.twins),
  "twin-mirror": (nc, cfg, options) => startTwinMirrorActor(nc, cfg, options),
  projects: (nc, cfg, options) => startProjectsActor(nc, cfg, options),
  "content-worker": (nc, cfg, options) => startContentWorker(nc, cfg, options),
  search: (nc, cfg, options) => startSearchActor(nc, cfg, options),
  storage: (nc, _cfg, options) => startStorageActor(nc, options),
  reporting: (nc, _cfg, options) => startReportingActor(nc, options),
};

export type RunningActors = { names: string[]; stop(): Promise<void> };

export async function startActors(
  names: readonly ActorName[],
  nc: NatsConnection,
  cfg: Config,
  log: Logger,
  metrics?: Registry,
  tracer?: Tracer,
): Promise<RunningActors> {
  const started: ServedActor[] = [];
  try {
    const options = runtime(cfg, log, metrics, tracer);
    for (const name of names) {
      const start = () => STARTERS[name](nc, cfg, options);
      const warn = (error: unknown, retryInMs: number) =>
        log.warn({ err: error, actor: name, retryInMs }, "an actor's start met a passing NATS failure; starting it again");
      started.push(await retryTransient(start, warn));
    }
  } catch (error) {
    await Promise.allSettled(started.map((actor) => actor.stop()));
    throw error;
  }
  return {
    names: started.map((a) => a.name),
    stop: async () => {
      await Promise.allSettled(started.map((actor) => actor.stop()));
    },
  };
}
