/**
 * The system under test: a derrick process against a given NATS server.
 * role "all": edge + actors in one process (what `derrick start` runs); "edge": only the edge;
 * "actors": only the actors (`derrick actor system identity`).
 * PEER_ACTORS (comma list, default `system,identity`), DERRICK_CLIENTS, DERRICK_REQUEST_TIMEOUT and OTEL_EXPORTER_OTLP_ENDPOINT
 * come from the environment.
 */
import { loadConfig } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { boot } from "../../bin/boot.ts";
import type { ActorName } from "../../config/index.ts";

const [natsUrl, port, dataDir, role = "all"] = process.argv.slice(2);
const actorNames = (process.env.PEER_ACTORS ?? "system,identity").split(",") as ActorName[];
const cfg = loadConfig({
  NATS_URL: natsUrl,
  DERRICK_HTTP_PORT: port,
  DERRICK_DATA_DIR: dataDir,
  DERRICK_LOG_LEVEL: "warn",
  ACTORS: actorNames.join(","),
  DERRICK_HTTP_REUSE_PORT: process.env.DERRICK_HTTP_REUSE_PORT,
  DERRICK_CLIENTS: process.env.DERRICK_CLIENTS,
  DERRICK_REQUEST_TIMEOUT: process.env.DERRICK_REQUEST_TIMEOUT,
  OTEL_EXPORTER_OTLP_ENDPOINT: process.env.OTEL_EXPORTER_OTLP_ENDPOINT,
});
const running = await boot({
  cfg,
  natsUrl: natsUrl!,
  log: createLogger(cfg.logLevel),
  edge: role !== "actors",
  actors: role === "edge" ? [] : actorNames,
});
console.log(JSON.stringify({ ready: true, port: running.edge?.port ?? 0 }));
process.on("SIGTERM", async () => {
  await running.stop();
  process.exit(0);
});
