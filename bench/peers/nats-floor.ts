/**
 * The floor of the design on this machine: the HTTP → NATS request/reply path with no derrick code.
 * A bare `Bun.serve` whose handler makes one nats.js request per HTTP request to a responder in the
 * same process and connection (as `derrick start` runs edge and actors), through a plain
 * @nats-io/transport-node connection with its defaults. No authentication, validation, problem
 * bodies, logging or write coalescing: what any HTTP → NATS bridge in Bun pays at least.
 *
 * Modes:
 * - `echo` (POST, any path): the responder answers the request body: the edge bench's echo.
 * - `kv <file>` (GET, any path): the responder reads one KV entry holding the file's bytes and
 *   answers them: the reporting bench's cached GET (edge → actor → KV read → reply).
 *
 * Arguments: NATS URL, mode, [file]. Prints `{ready, port}` when it serves.
 */
import { readFileSync } from "node:fs";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";

const [natsUrl, mode = "echo", file] = process.argv.slice(2);
const nc = await connect({ servers: natsUrl });
const subject = `floor.${mode}`;
const bucket = `floor_${process.pid}`;
if (mode === "kv") {
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  await kv.put("value", new Uint8Array(readFileSync(file!)));
  nc.subscribe(subject, {
    queue: "floor",
    callback: (_err, msg) => {
      void kv.get("value").then((entry) => msg.respond(entry?.value));
    },
  });
} else {
  nc.subscribe(subject, { queue: "floor", callback: (_err, msg) => void msg.respond(msg.data) });
}
await nc.flush();

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const body = req.method === "POST" ? new Uint8Array(await req.arrayBuffer()) : undefined;
    const answer = await nc.request(subject, body, { timeout: 5000 });
    return new Response(answer.data, { headers: { "content-type": "application/json" } });
  },
});
console.log(JSON.stringify({ ready: true, port: server.port }));
process.on("SIGTERM", async () => {
  server.stop(true);
  if (mode === "kv") await (await new Kvm(nc).open(bucket)).destroy().catch(() => undefined);
  await nc.drain();
  process.exit(0);
});
