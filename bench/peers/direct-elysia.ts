/** Baseline peer: the same small JSON echo answered by an Elysia handler in-process (no NATS hop). */
import { Elysia } from "elysia";

const port = Number(process.argv[2] ?? 0);
const reusePort = process.argv[3] === "reuse-port";
const app = new Elysia().post("/v1/system/echo", ({ body }) => body).listen({ hostname: "127.0.0.1", port, reusePort });
console.log(JSON.stringify({ ready: true, port: app.server!.port }));
