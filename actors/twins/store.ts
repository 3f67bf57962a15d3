/**
 * Twin buckets on JetStream KV: one bucket per twin (name from subjects/twins.ts), history 2 so a
 * reader can still show the previous value of a key while a newer one waits for its commit.
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { toTwinEntry, twinBucket, twinBucketOptions, type TwinAddress, type TwinEntry } from "../../subjects/twins.ts";
import type { TwinBucketStore, TwinStores } from "./handlers.ts";
import { readKv } from "../runtime/kv.ts";

const CACHE_MAX = 10_000;

/**
 * Creates a twin's bucket if it does not exist. Device users may not create streams
 * (subjects/twins.ts), so derrick makes a registered device's bucket before the device needs it.
 */
export async function ensureTwinBucket(nc: NatsConnection, address: TwinAddress, policy: StoragePolicy = SINGLE_NODE): Promise<void> {
  await new Kvm(nc).create(twinBucket(address), bucketOptions(policy, twinBucketOptions(address)));
}

export function kvTwinStores(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): TwinStores {
  const kvm = new Kvm(nc);
  let jsm: Promise<JetStreamManager> | undefined;
  const open = new Map<string, Promise<KV>>();
  const remember = (name: string, kv: Promise<KV>) => {
    if (open.size >= CACHE_MAX) open.delete(open.keys().next().value!);
    open.set(name, kv);
    kv.catch(() => open.delete(name));
    return kv;
  };
  return {
    async open(address: TwinAddress, create: boolean) {
      const name = twinBucket(address);
      let kv = open.get(name);
      if (!kv) {
        if (create) {
          kv = remember(name, kvm.create(name, bucketOptions(policy, twinBucketOptions(address))));
        } else {
          jsm ??= jetstreamManager(nc);
          try {
            await (await jsm).streams.info(`KV_${name}`);
          } catch (error) {
            if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return undefined;
            throw error;
          }
          kv = remember(name, kvm.open(name));
        }
      }
      return new KvTwinBucket(await kv);
    },
  };
}

export class KvTwinBucket implements TwinBucketStore {
  constructor(readonly kv: KV) {}

  async get(key: string): Promise<TwinEntry | undefined> {
    const entry = await this.kv.get(key);
    return entry ? toTwinEntry(entry) : undefined;
  }

  async entries(): Promise<TwinEntry[]> {
    return (await readKv(this.kv, { history: true })).map(toTwinEntry);
  }

  put(key: string, value: string): Promise<number> {
    return this.kv.put(key, value);
  }

  async remove(key: string): Promise<number> {
    await this.kv.delete(key);
    return (await this.kv.get(key))?.revision ?? 0;
  }

  async swap(key: string, value: string | null, expectedRevision: number): Promise<number | "conflict"> {
    try {
      if (value !== null) return await this.kv.put(key, value, { previousSeq: expectedRevision });
      // nats.js sends no expectation for previousSeq 0 (the delete would be unconditional): a key
      // never written has nothing to delete, so that case is checked here instead.
      if (expectedRevision === 0) return (await this.kv.get(key)) ? "conflict" : 0;
      await this.kv.delete(key, { previousSeq: expectedRevision });
      return (await this.kv.get(key))?.revision ?? 0;
    } catch (error) {
      if (error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)) {
        return "conflict";
      }
      throw error;
    }
  }
}
