/**
 * How the streams and KV buckets derrick creates are replicated (DERRICK_JETSTREAM_REPLICAS): one server, R1 with direct
 * gets; a cluster, R3 without them, since a follower's direct get could miss an acknowledged write. An existing stream
 * keeps its replicas (`nats stream edit`) (docs/operations.md#replicas-and-direct-gets).
 */
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamInfo } from "@nats-io/jetstream";
import type { KV, Kvm } from "@nats-io/kv";

export type StoragePolicy = { replicas: number };

export const SINGLE_NODE: StoragePolicy = { replicas: 1 };

export function storagePolicy(cfg: { jetstreamReplicas: number }): StoragePolicy {
  return { replicas: cfg.jetstreamReplicas };
}

/** Whether reads may be answered by any replica (only when there is one). */
export const directReads = (policy: StoragePolicy): boolean => policy.replicas === 1;

/** KV bucket options for this policy, merged into the bucket's own. */
export function bucketOptions<T extends object>(policy: StoragePolicy, options: T): T & { replicas: number; allow_direct: boolean } {
  return { ...options, replicas: policy.replicas, allow_direct: directReads(policy) };
}

/**
 * An existing bucket, read the way it was made: with direct gets where its stream allows them. `Kvm.open` alone reads
 * with STREAM.MSG.GET, which crashed nats-server 2.9 on a stream still being created (docs/operations.md#replicas-and-direct-gets).
 */
export function bindBucket(kvm: Kvm, name: string, stream: StreamInfo, policy: StoragePolicy): Promise<KV> {
  return kvm.open(name, { allow_direct: directReads(policy) && stream.config.allow_direct === true });
}

/** Stream config fields for this policy. */
export function streamOptions(policy: StoragePolicy): { num_replicas: number; allow_direct: boolean } {
  return { num_replicas: policy.replicas, allow_direct: directReads(policy) };
}

/** Whether a JetStream API call failed because its stream does not exist. */
export const isStreamNotFound = (error: unknown): boolean =>
  error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound;

/** A stream's info; undefined when there is no such stream. Any other failure throws. */
export async function streamInfoIfAny(jsm: JetStreamManager, stream: string): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(stream);
  } catch (error) {
    if (isStreamNotFound(error)) return undefined;
    throw error;
  }
}
