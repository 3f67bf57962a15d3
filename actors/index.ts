/** Every actor by name, so a process can run any subset (`ACTORS`, `derrick actor <names…>`). */
import type { NatsConnection } from "@nats-io/nats-core";
import type { ActorName, Config } from "../config/index.ts";
import type { Logger } from "../platform/logger.ts";
import type { RuntimeOptions, ServedActor } from "./runtime/service.ts";
import { storagePolicy } from "./runtime/storage.ts";
import { startSystemActor } from "./system/index.ts";
import { startIdentityActor } from "./identity/index.ts";
import { startDelivererActor, startDispatcherActor, startNotificationsActor } from "./notifications/index.ts";
import { startTwinsActor } from "./twins/index.ts";
import { startTwinMirrorActor } from "./twin-mirror/index.ts";
import { startContentWorker, startProjectsActor } from "./projects/index.ts";
import { startSearchActor } from "./search/index.ts";
import { startStorageActor } from "./storage/index.ts";
import { startReportingActor } from "./reporting/index.ts";

type Starter = (nc: NatsConnection, cfg: Config, log: Logger) => Promise<ServedActor>;

const runtime = (cfg: Config, log: Logger): RuntimeOptions => ({
  log,
  concurrency: cfg.actorConcurrency,
  queue: cfg.actorQueue,
  storage: storagePolicy(cfg),
});

const STARTERS: Record<ActorName, Starter> = {
  system: (nc, cfg, log) => startSystemActor(nc, runtime(cfg, log)),
  identity: (nc, cfg, log) => startIdentityActor(nc, cfg, runtime(cfg, log)),
  notifications: (nc, cfg, log) => startNotificationsActor(nc, cfg, runtime(cfg, log)),
  dispatcher: (nc, cfg, log) => startDispatcherActor(nc, cfg, runtime(cfg, log)),
  deliverer: (nc, cfg, log) => startDelivererActor(nc, cfg, runtime(cfg, log)),
  twins: (nc, cfg, log) => startTwinsActor(nc, runtime(cfg, log), cfg.twins),
  "twin-mirror": (nc, cfg, log) => startTwinMirrorActor(nc, cfg, runtime(cfg, log)),
  projects: (nc, cfg, log) => startProjectsActor(nc, cfg, runtime(cfg, log)),
  "content-worker": (nc, cfg, log) => startContentWorker(nc, cfg, runtime(cfg, log)),
  search: (nc, cfg, log) => startSearchActor(nc, cfg, runtime(cfg, log)),
  storage: (nc, cfg, log) => startStorageActor(nc, runtime(cfg, log)),
  reporting: (nc, cfg, log) => startReportingActor(nc, runtime(cfg, log)),
};

export type RunningActors = { names: string[]; stop(): Promise<void> };

export async function startActors(names: readonly ActorName[], nc: NatsConnection, cfg: Config, log: Logger): Promise<RunningActors> {
  const started: ServedActor[] = [];
  try {
    for (const name of names) started.push(await STARTERS[name](nc, cfg, log));
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
