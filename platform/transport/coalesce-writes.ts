/**
 * Coalesces a NATS connection's socket writes per event-loop turn: nats.js flushes on a microtask, so under
 * request/reply load every message would be its own socket write (the gain: docs/edge.md#the-transports-own-paths).
 * Frames queued in one turn go out as one write on `setImmediate`, in order; anything queued is handed over
 * before the transport closes, so a drain still flushes everything. Re-installed on every reconnect (the
 * transport is replaced; in between, writes go out unbatched). It reaches into `nc.protocol.transport` (not
 * public API of @nats-io/nats-core 3.4): if that shape changes, install() does nothing, and writes are slower.
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
