/** Opens an existing bucket in a test as derrick's stores do: direct gets where the stream allows them. */
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { SINGLE_NODE, bindBucket } from "../../actors/runtime/storage.ts";

/**
 * A test that reads a bucket while another connection creates it must not use `Kvm.open` alone: its
 * reads are `STREAM.MSG.GET`, which crashes nats-server 2.9 in that window (docs/twins.md#storage).
 */
export async function openBucket(nc: NatsConnection, name: string): Promise<KV> {
  const info = await (await jetstreamManager(nc)).streams.info(`KV_${name}`);
  return bindBucket(new Kvm(nc), name, info, SINGLE_NODE);
}
