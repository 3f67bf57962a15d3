/**
 * Twin buckets on JetStream KV: one bucket per twin (name from subjects/twins.ts), history 2 so a
 * reader can still show the previous value of a key while a newer one waits for its commit.
 */
import { SINGLE_NODE, bindBucket, bucketOptions, streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { TWIN_BUCKET_MAX_BYTES, TWIN_BUCKET_PREFIX, twinBucket, twinBucketOptions, type TwinAddress } from "../../subjects/twins.ts";
import { toTwinEntry, type TwinEntry } from "../../platform/twin-commit.ts";
import { insufficientStorage } from "../../subjects/errors.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import { createLogger, type Logger } from "../../platform/logger.ts";
import { readKv } from "../runtime/kv.ts";
import { TwinState } from "./state.ts";
import { TwinViews } from "./views.ts";
import { unlessGone } from "../runtime/recreate.ts";

/** One twin's bucket. */
export interface TwinBucketStore {
  get(key: string): Promise<TwinEntry | undefined>;
  /** The twin's visible state, with every write acknowledged before the call (in any process). */
  state(): Promise<TwinState>;
  put(key: string, value: string): Promise<number>;
  /** Deletes (a marker); returns the marker's revision. */
  remove(key: string): Promise<number>;
  /**
   * Compare-and-swap: writes `value` (null = a delete marker) only if the key's latest revision,
   * markers included, is `expectedRevision` (0 = the key was never written). Returns the new revision.
   */
  swap(key: string, value: string | null, expectedRevision: number): Promise<number | "conflict">;
}

export interface TwinStores {
  /** The twin's bucket; created when `create`, else undefined when it does not exist. */
  open(address: TwinAddress, create: boolean): Promise<TwinBucketStore | undefined>;
  /**
   * The twin's state when memory answers it at once (its bucket open here, its view fresh without a look), else
   * undefined: then open() and state(). A read from memory waits on nothing, so it needs none of their machinery.
   */
  peekState(address: TwinAddress): TwinState | undefined;
  /** Ends the views of read twins. */
  close(): Promise<void>;
}

const CACHE_MAX = 10_000;

/**
 * Creates a twin's bucket if it does not exist. Device users may not create streams
 * (subjects/twins.ts), so derrick makes a registered device's bucket before the device needs it.
 */
export async function ensureTwinBucket(
  nc: NatsConnection,
  address: TwinAddress,
  policy: StoragePolicy = SINGLE_NODE,
  maxBytes = TWIN_BUCKET_MAX_BYTES,
): Promise<void> {
  await new Kvm(nc).create(twinBucket(address), bucketOptions(policy, twinBucketOptions(address, maxBytes)));
}

export type TwinLimits = {
  /** Most twins (streams) this store creates; 0 = no cap (DERRICK_TWINS_MAX). */
  maxTwins: number;
  /** What one twin's bucket may hold (DERRICK_TWIN_MAX_BYTES). */
  maxBytes: number;
  /** Most twins read from memory at once (DERRICK_TWIN_VIEWS): each is a watch on the server and its values here. */
  views: number;
};

export const DEFAULT_TWIN_LIMITS: TwinLimits = { maxTwins: 5000, maxBytes: TWIN_BUCKET_MAX_BYTES, views: 1000 };

/** How long a count of the server's twin streams is trusted before it is taken again. */
const COUNT_FRESH_MS = 30_000;

export function kvTwinStores(
  nc: NatsConnection,
  policy: StoragePolicy = SINGLE_NODE,
  limits: TwinLimits = DEFAULT_TWIN_LIMITS,
  log: Logger = createLogger("silent"),
): TwinStores {
  const kvm = new Kvm(nc);
  const views = new TwinViews(nc, log, limits.views);
  let jsm: Promise<JetStreamManager> | undefined;
  const twinCount = streamCounter(() => (jsm ??= jetstreamManager(nc)), `$KV.${TWIN_BUCKET_PREFIX}*.>`);
  const open = new BoundedCache<string, Promise<KV>>({ max: CACHE_MAX });
  /** What each handle in `open` resolved to, for reads that take no turn of the event loop. */
  const settled = new WeakMap<Promise<KV>, KV>();
  const remember = (name: string, kv: Promise<KV>) => {
    open.set(name, kv);
    kv.then(
      (bucket) => settled.set(kv, bucket),
      () => open.deleteIfHolds(name, kv),
    );
    return kv;
  };
  const make = (name: string, address: TwinAddress) =>
    kvm.create(name, bucketOptions(policy, twinBucketOptions(address, limits.maxBytes))).catch((error: unknown) => {
      // Each twin's stream reserves its max bytes in JetStream's store limit up front.
      if (isStoreFull(error)) {
        throw insufficientStorage(
          `JetStream cannot reserve the ${limits.maxBytes} bytes of a new twin (DERRICK_TWIN_MAX_BYTES): its storage limit (max_file_store; by default 75% of the server's disk) is taken by the streams it holds. Lower DERRICK_TWIN_MAX_BYTES or raise the limit; existing twins are not affected`,
        );
      }
      throw error;
    });
  const create = (name: string, address: TwinAddress) => remember(name, make(name, address));
  const info = async (name: string) => streamInfoIfAny(await (jsm ??= jetstreamManager(nc)), `KV_${name}`);
  /** False when the twin's stream does not exist. */
  const exists = async (name: string) => (await info(name)) !== undefined;
  /**
   * A new twin is a new JetStream stream (files and descriptors on the server): past the cap a PUT
   * that would create one is 507, not a server slowly running out for every capability.
   */
  const createNew = async (name: string, address: TwinAddress) => {
    if (limits.maxTwins > 0 && !(await exists(name))) {
      if ((await twinCount.current()) >= limits.maxTwins) {
        throw insufficientStorage(
          `this deployment holds its limit of ${limits.maxTwins} twins (DERRICK_TWINS_MAX); no new twin can be created`,
        );
      }
      const kv = await make(name, address);
      twinCount.added();
      return kv;
    }
    return make(name, address);
  };
  // Every twin read and write names its bucket, and the name's hash costs more than this lookup.
  const names = new BoundedCache<string, string>({ max: CACHE_MAX });
  const nameOf = (address: TwinAddress) => {
    const id = `${address.organization}/${address.environment}/${address.twinId}`;
    let name = names.get(id);
    if (name === undefined) names.set(id, (name = twinBucket(address)));
    return name;
  };
  return {
    async open(address: TwinAddress, creating: boolean) {
      const name = nameOf(address);
      let kv = open.get(name);
      if (!kv) {
        // Remembered at once: concurrent first writes of one twin create (and count) it once.
        if (creating) kv = remember(name, createNew(name, address));
        else {
          const stream = await info(name);
          if (!stream) return undefined;
          kv = remember(name, bindBucket(kvm, name, stream, policy));
        }
      }
      // A cached handle outlives its stream when the bucket is deleted (an operator, a lost store):
      // an operation that fails is checked against the stream, and a gone one is forgotten here.
      return new KvTwinBucket(await kv, views, name, {
        async gone() {
          // The stream lookup's own failure (NATS away) leaves the first error to be thrown.
          if (await exists(name).catch(() => true)) return false;
          open.delete(name);
          return true;
        },
        recreate: () => create(name, address),
      });
    },
    peekState(address: TwinAddress) {
      const name = nameOf(address);
      const handle = open.get(name);
      const kv = handle && settled.get(handle);
      return kv && views.peek(name, kv);
    },
    close: () => views.stop(),
  };
}

/**
 * Streams on a subject pattern, counted from the server at most every COUNT_FRESH_MS and counted up
 * locally in between: a cap checked by several processes is approximate by what each created since.
 */
function streamCounter(jsm: () => Promise<JetStreamManager>, subject: string) {
  let counted: { value: number; at: number } | undefined;
  let counting: Promise<number> | undefined;
  const count = async () => {
    let n = 0;
    for await (const _ of (await jsm()).streams.names(subject)) n++;
    counted = { value: n, at: Date.now() };
    return n;
  };
  return {
    async current(): Promise<number> {
      if (counted && Date.now() - counted.at < COUNT_FRESH_MS) return counted.value;
      return (counting ??= count().finally(() => (counting = undefined)));
    },
    added(): void {
      if (counted) counted.value++;
    },
  };
}

/** The server refused a write because the bucket is at its max_bytes (discard new). */
const isBucketFull = (error: unknown) => /maximum bytes exceeded/i.test((error as Error)?.message ?? "");
/** nats-server's answer to a stream whose max bytes its store limit cannot reserve (JetStream error 10047). */
const isStoreFull = (error: unknown) =>
  error instanceof JetStreamApiError && (error.code === 10047 || /insufficient storage resources/i.test(error.message));

/** How a bucket handle finds out its stream was deleted, and makes it again. */
export type TwinBucketRecovery = {
  /** True (and the handle forgotten) when the twin's stream no longer exists. */
  gone(): Promise<boolean>;
  recreate(): Promise<KV>;
};

export class KvTwinBucket implements TwinBucketStore {
  constructor(
    public kv: KV,
    private readonly views: TwinViews,
    private readonly name: string,
    private readonly recovery?: TwinBucketRecovery,
  ) {}

  /** The operation, abandoned when the stream is found gone while it waits (a direct get of a deleted stream is never answered). */
  private run<T>(op: (kv: KV) => Promise<T>): Promise<T> {
    const recovery = this.recovery;
    return recovery ? unlessGone(op(this.kv), () => recovery.gone()) : op(this.kv);
  }

  /** A read of a deleted bucket answers as for a twin never written (`empty`). */
  private async read<T>(op: (kv: KV) => Promise<T>, empty: T): Promise<T> {
    try {
      return await this.run(op);
    } catch (error) {
      if (this.recovery && (await this.recovery.gone())) return empty;
      throw error;
    }
  }

  /** A write to a deleted bucket makes it again and is tried once more there. */
  private async write<T>(op: (kv: KV) => Promise<T>): Promise<T> {
    try {
      return await this.run(op);
    } catch (error) {
      if (isBucketFull(error))
        throw insufficientStorage(
          `this twin holds as much as one twin may (DERRICK_TWIN_MAX_BYTES, history included): delete properties before writing more`,
        );
      if (!this.recovery || !(await this.recovery.gone())) throw error;
      this.kv = await this.recovery.recreate();
      return op(this.kv);
    }
  }

  get(key: string): Promise<TwinEntry | undefined> {
    return this.read(async (kv) => {
      const entry = await kv.get(key);
      return entry ? toTwinEntry(entry) : undefined;
    }, undefined);
  }

  /** From the twin's view; from its stream when the view cannot answer in time (the view is a copy, the stream the truth). */
  state(): Promise<TwinState> {
    return this.read(
      (kv) => this.views.stateOf(this.name, kv).catch(async () => TwinState.of((await readKv(kv, { history: true })).map(toTwinEntry))),
      new TwinState(),
    );
  }

  put(key: string, value: string): Promise<number> {
    return this.write((kv) => kv.put(key, value));
  }

  remove(key: string): Promise<number> {
    return this.write(async (kv) => {
      await kv.delete(key);
      return (await kv.get(key))?.revision ?? 0;
    });
  }

  swap(key: string, value: string | null, expectedRevision: number): Promise<number | "conflict"> {
    return this.write(async (kv) => {
      try {
        if (value !== null) return await kv.put(key, value, { previousSeq: expectedRevision });
        // nats.js sends no expectation for previousSeq 0 (the delete would be unconditional): a key
        // never written has nothing to delete, so that case is checked here instead.
        if (expectedRevision === 0) return (await kv.get(key)) ? "conflict" : 0;
        await kv.delete(key, { previousSeq: expectedRevision });
        return (await kv.get(key))?.revision ?? 0;
      } catch (error) {
        if (
          error instanceof JetStreamApiError &&
          (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
        ) {
          return "conflict";
        }
        throw error;
      }
    });
  }
}
