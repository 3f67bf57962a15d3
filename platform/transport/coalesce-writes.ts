/**
 * Coalesces a NATS connection's socket writes per event-loop turn: nats.js flushes its outbound buffer on a
 * microtask, so under request/reply load every message would be its own socket write (the gain:
 * docs/edge.md#the-transports-own-paths). Its flush is deferred to `setImmediate` instead, once per turn: the
 * frames of the turn stay in nats.js' own buffer and are packed into one write, one copy, in order. (Queueing
 * packed frames below nats.js, as this did before, copied every reply twice.) A flush nats.js does inline, over
 * its pending limit, stays inline; a PING flush (`nc.flush()`, a drain) goes out with the turn's frames, and
 * whatever was queued before `close()` goes out before the connection closes (a graceful stop drains instead).
 * It reaches into `nc.protocol` (not public API of @nats-io/nats-core 3.4): if that shape changes, install()
 * does nothing, and writes go out unbatched. The handler outlives reconnects, so it is patched once.
 */
import type { NatsConnection } from "@nats-io/nats-core";

type Protocol = {
  flushPending(): void;
  close(err?: Error): Promise<void>;
  outbound?: { size(): number };
  pendingLimit?: number;
  [COALESCED]?: true;
};

const COALESCED = Symbol("derrick.coalesced");

/** Installs the coalescing; false when the connection's protocol handler is not what is expected (writes stay unbatched). */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as { protocol?: Protocol }).protocol;
  if (!protocol || typeof protocol.flushPending !== "function" || typeof protocol.close !== "function") return false;
  if (typeof protocol.outbound?.size !== "function" || typeof protocol.pendingLimit !== "number") return false;
  if (protocol[COALESCED]) return true;
  protocol[COALESCED] = true;
  const flushNow = protocol.flushPending.bind(protocol);
  let scheduled = false;
  const flushTurn = () => {
    scheduled = false;
    flushNow();
  };
  protocol.flushPending = () => {
    if (protocol.outbound!.size() >= protocol.pendingLimit!) return flushNow();
    if (scheduled) return;
    scheduled = true;
    setImmediate(flushTurn);
  };
  // What the turn queued goes out before the socket closes (nats.js' microtask flush would have run by then).
  const close = protocol.close.bind(protocol);
  protocol.close = (err?: Error) => {
    if (scheduled) flushTurn();
    return close(err);
  };
  return true;
}
