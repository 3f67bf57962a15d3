import { afterAll, describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { startTestNats } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { TWIN_BUCKET_MAX_BYTES, twinBucket, twinBucketDescription } from "../../subjects/twins.ts";
import { DeviceClient, parseAppConfig } from "../../sdk/index.ts";

// The SDK used to create a missing twin bucket itself whenever its user could, with the defaults
// (64 MiB, one replica) instead of the deployment's DERRICK_TWIN_MAX_BYTES and replicas. It now asks
// the twins actor (derrick.twins.ensure), and creates it itself only when no twins actor answers.
const document = (name: string, twinId: string, server: string) => ({
  Name: name,
  AEA2: {
    Twin: { Organization: "acme", Environment: "prod", Id: twinId },
    BusClient: { Server: server, Subscriptions: [{ DataIn: [`slbapps.${name}.DataIn`] }] },
  },
});

const streamOf = async (nc: NatsConnection, twinId: string) =>
  (await jetstreamManager(nc)).streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId })}`);

const MAX_BYTES = 3 * 1024 * 1024;

/** `bare`: a second server where no twins actor runs, and a connection to it. */
const it = derrickTest({
  actors: ["twins"],
  edge: false,
  env: { DERRICK_TWIN_MAX_BYTES: String(MAX_BYTES), DERRICK_TWINS_MAX: "1" },
}).extend(
  "bare",
  { scope: "file" },
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern; there are none.
  async ({}, { onCleanup }) => {
    const server = await startTestNats();
    const peer = await connect({ servers: server.url });
    onCleanup(async () => {
      await peer.close();
      await server.cleanup();
    });
    return { url: server.url, peer };
  },
);

describe("device SDK: who makes a missing twin bucket", () => {
  const devices: DeviceClient[] = [];
  afterAll(async () => {
    for (const device of devices) await device.close().catch(() => undefined);
  });

  it("sdk bucket - a missing twin bucket is made by the twins actor with the deployment's DERRICK_TWIN_MAX_BYTES, not the SDK's defaults", async ({
    derrick,
    nats,
    nc: peer,
  }) => {
    devices.push(
      await DeviceClient.connect(parseAppConfig(document("BucketApp", "made-by-derrick", nats.url)), { reconnectTimeWaitMs: 100 }),
    );
    const info = await streamOf(peer, "made-by-derrick");
    expect(info.config.max_bytes).toBe(MAX_BYTES);
    expect(info.config.num_replicas).toBe(derrick.cfg.jetstreamReplicas);
    expect(info.config.description).toBe(twinBucketDescription({ organization: "acme", environment: "prod", twinId: "made-by-derrick" }));
    expect(info.config.max_msgs_per_subject).toBe(2);
  });

  it("sdk bucket - past DERRICK_TWINS_MAX the actor refuses (507) and the SDK does not create the bucket behind its back: it waits", async ({
    nats,
    nc: peer,
  }) => {
    // The first test made this deployment's one twin.
    const connecting = DeviceClient.connect(parseAppConfig(document("OverApp", "over-the-limit", nats.url)), {
      reconnectTimeWaitMs: 100,
      signal: AbortSignal.timeout(1_500),
    });
    await expect(connecting).rejects.toThrow(/abort|timeout|timed out/i);
    await expect(streamOf(peer, "over-the-limit")).rejects.toThrow(/stream not found/);
  });

  it("sdk bucket - with no twins actor on the NATS server, the SDK creates the bucket itself with the defaults", async ({ bare }) => {
    devices.push(await DeviceClient.connect(parseAppConfig(document("BareApp", "made-by-sdk", bare.url)), { reconnectTimeWaitMs: 100 }));
    const info = await streamOf(bare.peer, "made-by-sdk");
    expect(info.config.max_bytes).toBe(TWIN_BUCKET_MAX_BYTES);
    expect(info.config.num_replicas).toBe(1);
  });
});
