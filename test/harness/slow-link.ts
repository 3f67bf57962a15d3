/**
 * A slow network link in front of a test nats-server: a loopback TCP relay that hands what the
 * server sends to the client in pieces of at most `pieceBytes`, with `pauseMs` between two pieces
 * (what the client sends passes at once). A burst the server writes in one go reaches the client in
 * parts, with the client idle in between — as over a real WAN link, and unlike plain loopback.
 */
import { connect, createServer, type Socket } from "node:net";

export type SlowLink = {
  /** Where a client connects instead of the server. */
  url: string;
  close(): Promise<void>;
};

export async function startSlowLink(server: { port: number }, options: { pieceBytes: number; pauseMs: number }): Promise<SlowLink> {
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(server.port, "127.0.0.1");
    sockets.add(client).add(upstream);
    const queue: Buffer[] = [];
    let paused = false;
    const pump = () => {
      if (paused || queue.length === 0 || client.destroyed) return;
      let piece = Buffer.concat(queue.splice(0));
      if (piece.length > options.pieceBytes) {
        queue.push(piece.subarray(options.pieceBytes));
        piece = piece.subarray(0, options.pieceBytes);
      }
      client.write(piece);
      paused = true;
      setTimeout(() => ((paused = false), pump()), options.pauseMs);
    };
    upstream.on("data", (data: Buffer) => (queue.push(data), pump()));
    client.on("data", (data) => upstream.write(data));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const socket of [client, upstream]) socket.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve, reject) => relay.once("error", reject).listen(0, "127.0.0.1", resolve));
  const { port } = relay.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    },
  };
}
