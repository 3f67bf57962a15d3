/**
 * The reporting bench's floor: an edge whose `reporting` responder answers the prospect aggregation
 * from memory (the bytes of a file given on the command line), so a GET through it costs one NATS hop
 * and no KV read: the best any in-actor result cache could do.
 * Arguments: NATS URL, data dir, reply file. DERRICK_CLIENTS comes from the environment.
 */
import { readFileSync } from "node:fs";
import { loadConfig } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { boot } from "../../bin/boot.ts";
import { endpoint, serveActor } from "../../actors/runtime/service.ts";
import { EncodedJson, reply } from "../../subjects/index.ts";
import { reportingProspectAggregation, type AggregationResult } from "../../subjects/reporting.ts";

const [natsUrl, dataDir, replyFile] = process.argv.slice(2);
const cfg = loadConfig({
  NATS_URL: natsUrl,
  DERRICK_HTTP_PORT: "0",
  DERRICK_DATA_DIR: dataDir,
  DERRICK_LOG_LEVEL: "warn",
  ACTORS: "identity",
  DERRICK_CLIENTS: process.env.DERRICK_CLIENTS,
});
const log = createLogger(cfg.logLevel);
const running = await boot({ cfg, natsUrl: natsUrl!, log, edge: true, actors: ["identity"] });
// Pre-encoded, as the actor's own cache hit is: the peer measures the hop, not a re-serialization.
const cached = new EncodedJson<AggregationResult>(new Uint8Array(readFileSync(replyFile!)));
const memory = await serveActor(
  running.nc,
  {
    name: "reporting",
    description: "bench peer: the cached aggregation from memory",
    endpoints: [endpoint(reportingProspectAggregation, () => reply(cached, 200, { "x-derrick-cache": "hit" }))],
  },
  { log, concurrency: 64 },
);
console.log(JSON.stringify({ ready: true, port: running.edge?.port ?? 0 }));
process.on("SIGTERM", async () => {
  await memory.stop();
  await running.stop();
  process.exit(0);
});
