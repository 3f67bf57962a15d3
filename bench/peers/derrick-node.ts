/**
 * The system under test: a derrick process against a given NATS server.
 * role "all": edge + actors in one process (what `derrick start` runs); "edge": only the edge;
 * "actors": only the actors (`derrick actor system identity`).
 */
import { loadConfig } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { boot } from "../../bin/boot.ts";

const [natsUrl, port, dataDir, role = "all"] = process.argv.slice(2);
const cfg = loadConfig({ NATS_URL: natsUrl, DERRICK_HTTP_PORT: port, DERRICK_DATA_DIR: dataDir, DERRICK_LOG_LEVEL: "warn", ACTORS: "system,identity", DERRICK_HTTP_REUSE_PORT: process.env.DERRICK_HTTP_REUSE_PORT });
const running = await boot({
  cfg,
  natsUrl: natsUrl!,
  log: createLogger(cfg.logLevel),
  edge: role !== "actors",
  actors: role === "edge" ? [] : ["system", "identity"],
});
console.log(JSON.stringify({ ready: true, port: running.edge?.port ?? 0 }));
process.on("SIGTERM", async () => {
  await running.stop();
  process.exit(0);
});
