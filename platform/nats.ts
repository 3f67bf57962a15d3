/** Connecting to NATS the way every derrick process should: named, reconnecting forever, logged. */
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import type { Logger } from "./logger.ts";
import { coalesceWrites } from "./transport/coalesce-writes.ts";

export type NatsAuth = { user: string; pass: string };

export async function connectNats(url: string, name: string, log?: Logger, auth?: NatsAuth): Promise<NatsConnection> {
  const nc = await connect({
    servers: url.split(","),
    name,
    ...(auth ? { user: auth.user, pass: auth.pass } : {}),
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 10_000,
    // Async stack traces build an Error per request (docs/edge.md#round-trip-benchmark-history); derrick maps
    // request failures to its own errors, so the traces buy nothing.
    noAsyncTraces: true,
  });
  coalesceWrites(nc);
  if (log) void watchStatus(nc, log);
  return nc;
}

async function watchStatus(nc: NatsConnection, log: Logger): Promise<void> {
  for await (const status of nc.status()) {
    if (status.type === "disconnect" || status.type === "error") log.warn({ nats: status }, "nats connection trouble");
    else if (status.type === "reconnect") log.info({ nats: status }, "nats reconnected");
    else if (status.type !== "ping" && status.type !== "staleConnection") log.debug({ nats: status }, "nats status");
  }
}
