/** JetStreamTwinBackend on a connection the application owns: close() leaves nothing behind on it. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/nats-core";
import { eventually, startTestNats, type TestNats } from "../../test/harness/index.ts";
import { connectNats } from "../../platform/nats.ts";
import { JetStreamTwinBackend } from "./jetstream.ts";

describe("JetStreamTwinBackend", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connectNats(nats.url, "sdk-close");
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.cleanup();
  });

  it("sdk jetstream - closing the backend releases its status listener on the app's connection (44b1f37)", async () => {
    const listeners = () => (nc as unknown as { protocol: { listeners: unknown[] } }).protocol.listeners.length;
    const before = listeners();
    const backend = new JetStreamTwinBackend(
      nc,
      { organization: "acme", environment: "prod", twinId: "close-test" },
      () => undefined,
      false,
    );
    await backend.start(() => undefined);
    expect(listeners()).toBeGreaterThan(before);
    await backend.close();
    // The watch's own listener goes once its consumer has stopped (close() does not wait for it); the
    // status listener needs no status event: a `break` alone held it until the connection's next one.
    await eventually(() => listeners() === before, {
      timeoutMs: 5_000,
      intervalMs: 50,
      what: `listeners back to ${before} (now ${listeners()})`,
    });
  });
});
