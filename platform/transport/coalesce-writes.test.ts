/**
 * Write coalescing reaches into nats.js' transport (not its public API): these tests pin that it is
 * really installed on a live connection, so a client upgrade that moves the transport shows up here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../../test/harness/index.ts";
import { coalesceWrites } from "./coalesce-writes.ts";

let nats: TestNats;
beforeAll(async () => {
  nats = await startTestNats();
});
afterAll(async () => {
  await nats?.cleanup();
});

/** Counts the socket writes of a connection: wraps its transport's send before coalescing wraps it. */
function countWrites(nc: NatsConnection): { readonly count: number } {
  const transport = (nc as unknown as { protocol: { transport: { send(frame: Uint8Array): void } } }).protocol.transport;
  const send = transport.send.bind(transport);
  const counter = { count: 0 };
  transport.send = (frame) => {
    counter.count++;
    send(frame);
  };
  return counter;
}

/** Publishes `n` messages, each in its own microtask (as replies to separate requests go out). */
async function publishAcrossMicrotasks(nc: NatsConnection, subject: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    nc.publish(subject, String(i));
    await Promise.resolve();
    await Promise.resolve();
  }
}

describe("write coalescing", () => {
  it("transport - frames queued across microtasks of one turn go out as one write, in order", async () => {
    const nc = await connect({ servers: nats.url });
    const sub = await connect({ servers: nats.url });
    try {
      const got: string[] = [];
      const done = new Promise<void>((resolve) =>
        sub.subscribe("coalesce.test", {
          callback: (_e, m) => {
            if (got.push(m.string()) === 20) resolve();
          },
        }),
      );
      await sub.flush();
      const writes = countWrites(nc);
      expect(coalesceWrites(nc)).toBe(true);
      await publishAcrossMicrotasks(nc, "coalesce.test", 20);
      await done;
      expect(got).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
      // Without coalescing nats.js writes once per microtask flush: 20 writes here.
      expect(writes.count).toBeLessThanOrEqual(2);
    } finally {
      await nc.close();
      await sub.close();
    }
  });

  it("transport - a connection left alone writes once per microtask flush (what coalescing saves)", async () => {
    const nc = await connect({ servers: nats.url });
    try {
      const writes = countWrites(nc);
      await publishAcrossMicrotasks(nc, "coalesce.plain", 20);
      await nc.flush();
      expect(writes.count).toBeGreaterThanOrEqual(20);
    } finally {
      await nc.close();
    }
  });
});
