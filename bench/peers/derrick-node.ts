/** The system under test: one derrick process (edge + system + identity actors) against a given NATS. */
import { loadConfig } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { boot } from "../../bin/boot.ts";

const [natsUrl, port, dataDir] = process.argv.slice(2);
const cfg = loadConfig({ NATS_URL: natsUrl, DERRICK_HTTP_PORT: port, DERRICK_DATA_DIR: dataDir, DERRICK_LOG_LEVEL: "warn", ACTORS: "system,identity" });
const running = await boot({ cfg, natsUrl: natsUrl!, log: createLogger(cfg.logLevel), edge: true, actors: ["system", "identity"] });
console.log(JSON.stringify({ ready: true, port: running.edge!.port }));
process.on("SIGTERM", async () => {
  await running.stop();
  process.exit(0);
});
