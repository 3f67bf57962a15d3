/**
 * Coalesces a NATS connection's socket writes per event-loop turn.
 *
 * nats.js flushes its outbound buffer on a microtask, so under request/reply load every request and
 * every reply becomes its own socket write (a promise, a callback and a syscall each). Measured here
 * on the edge bench (edge + actor in one process, wrk, 64 connections): 8.7k → 11.6k req/s, and
 * nats-server CPU fell from 47% to 20% because it receives fewer, larger packets.
 *
 * This wraps the transport's `send` so frames queued in one turn go out as one write on
 * `setImmediate`, in order. Before the transport closes, anything queued is handed over first, so a
 * drain still flushes everything. The transport is replaced on reconnect, so the wrapper is
 * re-installed on every reconnect; in between, writes simply go out unbatched.
 *
 * It reaches into `nc.protocol.transport` (not public API of @nats-io/nats-core 3.4): if that shape
 * changes, install() does nothing and the connection works as before, only slower.
 */
import type { NatsConnection } from "@nats-io/nats-core";

type Transport = {
  send(frame: Uint8Array): void;
  _closed?(err?: Error, internal?: boolean): Promise<void>;
  [COALESCED]?: true;
};

const COALESCED = Symbol("derrick.coalesced");

/** Installs the coalescing; false when the connection's transport is not where it is expected (writes stay unbatched). */
export function coalesceWrites(nc: NatsConnection): boolean {
  const installed = install(nc);
  void (async () => {
    for await (const status of nc.status()) if (status.type === "reconnect") install(nc);
  })();
  return installed;
}

function install(nc: NatsConnection): boolean {
  const transport = (nc as unknown as { protocol?: { transport?: Transport } }).protocol?.transport;
  if (!transport || typeof transport.send !== "function") return false;
  if (transport[COALESCED]) return true;
  transport[COALESCED] = true;
  const send = transport.send.bind(transport);
  let queue: Uint8Array[] = [];
  let bytes = 0;
  const flush = () => {
    if (queue.length === 0) return;
    const frames = queue;
    const total = bytes;
    queue = [];
    bytes = 0;
    if (frames.length === 1) return send(frames[0]!);
    const joined = new Uint8Array(total);
    let offset = 0;
    for (const frame of frames) {
      joined.set(frame, offset);
      offset += frame.length;
    }
    send(joined);
  };
  transport.send = (frame: Uint8Array) => {
    queue.push(frame);
    bytes += frame.length;
    if (queue.length === 1) setImmediate(flush);
  };
  const closed = transport._closed?.bind(transport);
  if (closed) {
    transport._closed = (err?: Error, internal?: boolean) => {
      flush();
      return closed(err, internal);
    };
  }
  return true;
}
