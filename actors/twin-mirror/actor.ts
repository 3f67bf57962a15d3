/**
 * The `twin-mirror` actor: for each Redis-backed device (DERRICK_TWIN_MIRRORS) copies desired twin properties from the
 * twin's bucket into the device's Redis (with their versions) and reported ones back (docs/twins.md). Run one copy per
 * device set: two mirrors of a device write everything twice (harmless, but wasted).
 */
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { Redis } from "ioredis";
import type { Config } from "../../config/index.ts";
import {
  REDIS_KEYSPACE_PREFIX,
  TWIN_BUCKET_MAX_BYTES,
  TWIN_KEY_PREFIX,
  twinBucket,
  twinBucketOptions,
  twinMirrorStatus,
  type TwinAddress,
  type TwinMirrorStats,
} from "../../subjects/twins.ts";
import { TwinWatchView, toTwinEntry, type TwinEntry } from "../../platform/twin-commit.ts";
import type { Logger } from "../../platform/logger.ts";
import { followBucket, type Loop } from "../runtime/follow.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { desiredToRedis, isReportedKey } from "./handlers.ts";

class TwinMirror {
  readonly stats: TwinMirrorStats;
  private readonly redis: Redis;
  private readonly sub: Redis;
  private watcher?: Loop;
  private view?: TwinWatchView;
  private closed = false;
  /** The latest visible desired entry per key (bounded by the twin's size), rewritten after a Redis restart. */
  private readonly latest = new Map<string, TwinEntry>();
  private queue: Promise<void> = Promise.resolve();
  /** The latest reported value per key seen in JetStream: what a delete there may remove from Redis. */
  private readonly reported = new Map<string, string>();
  /** Reported copies running per key (and whether another was asked for meanwhile): one at a time per key. */
  private readonly copying = new Map<string, { again: boolean; done: Promise<void> }>();
  /** Reported deletes this mirror copied to JetStream whose watch entry has not come back yet, per key. */
  private readonly ownDeletes = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly twin: TwinAddress,
    redisUrl: string,
    private readonly log: Logger,
    private readonly storage: StoragePolicy = SINGLE_NODE,
    private readonly maxBytes = TWIN_BUCKET_MAX_BYTES,
  ) {
    const retryStrategy = (times: number) => Math.min(2_000, 50 * 2 ** Math.min(times, 6));
    // No offline queue for the writer: while Redis is down every desired change would be queued (and
    // replayed one by one); the latest values are written again on "ready" instead (followDesired).
    this.redis = new Redis(redisUrl, { retryStrategy, maxRetriesPerRequest: null, enableOfflineQueue: false });
    this.sub = new Redis(redisUrl, { retryStrategy, maxRetriesPerRequest: null });
    // Without a listener ioredis prints every failed reconnect; log once per outage instead.
    for (const connection of [this.redis, this.sub]) {
      let reported = false;
      connection.on("error", (error: Error) => {
        if (!reported)
          this.log.warn(
            { err: error, twin: `${twin.organization}/${twin.environment}/${twin.twinId}` },
            "twin mirror: Redis unreachable; retrying",
          );
        reported = true;
      });
      connection.on("ready", () => (reported = false));
    }
    this.stats = { twin: `${twin.organization}/${twin.environment}/${twin.twinId}`, desiredCopied: 0, reportedCopied: 0 };
  }

  /** Resolves once the writer connection is up (it queues nothing while down). */
  private ready(): Promise<void> {
    if (this.redis.status === "ready") return Promise.resolve();
    return new Promise((resolve) => this.redis.once("ready", () => resolve()));
  }

  async start(): Promise<void> {
    await this.ready();
    // Stopped while waiting for Redis (start is not awaited past MIRROR_START_WAIT_MS): nothing to start.
    if (this.closed) return;
    const kv = await new Kvm(this.nc).create(
      twinBucket(this.twin),
      bucketOptions(this.storage, twinBucketOptions(this.twin, this.maxBytes)),
    );
    await this.redis.config("SET", "notify-keyspace-events", "KEA").catch(() => undefined);
    await this.followReported(kv);
    await this.followDesired(kv);
    // Stopped while the watches opened (a background start whose Redis just came up): stop() found
    // no watcher to stop yet.
    if (this.closed) await this.watcher?.stop();
  }

  private async followDesired(kv: KV): Promise<void> {
    // One view (and commit gate) for the mirror's life: a re-opened watch resumes after its last revision, so pending
    // claims and held values carry over; a record the gate cannot use is no record (docs/twins.md). A bucket made again
    // starts a new view: the old one's claims and revisions belong to the old bucket.
    const newView = (): TwinWatchView => {
      const view: TwinWatchView = new TwinWatchView({
        lastSeq: async () => (await kv.status()).streamInfo.state.last_seq,
        emit: async (visible) => {
          // A view replaced (the bucket made again) or stopped hands nothing on.
          if (this.view !== view || this.closed) return;
          for (const entry of visible) this.latest.set(entry.key, entry);
          await this.writeDesired(visible);
        },
        onError: (error) =>
          this.log.warn({ err: error, twin: this.stats.twin }, "twin mirror: the bucket's last revision could not be read; trying again"),
      });
      return view;
    };
    this.view = newView();
    this.watcher = await followBucket(
      kv,
      {
        what: `twin ${this.stats.twin}`,
        // Every revision held, not each key's last value: the view needs the commit records in order
        // (and after a hole in them copies only states where it caught up).
        from: "history",
        onRecreated: () => {
          this.view?.stop();
          this.view = newView();
          this.latest.clear();
          this.reported.clear();
          this.ownDeletes.clear();
        },
      },
      async (raw) => {
        await this.mirrorReportedDelete(toTwinEntry(raw));
        await this.view?.feed(toTwinEntry(raw), raw.delta);
      },
      this.log,
    );
    // A restarted Redis may have lost everything (a device Redis is often memory only): on every
    // reconnect write the latest visible desired values again, in the same queue as the watch.
    this.redis.on("ready", () => void this.writeDesired([...this.latest.values()]));
  }

  /**
   * A reported value deleted in JetStream (REST DELETE) is deleted in Redis too, else the next
   * reported scan copies it back. Only while Redis still holds the value JetStream had before the
   * delete: a newer value the device wrote meanwhile stays (and is copied over as usual).
   */
  private async mirrorReportedDelete(entry: TwinEntry): Promise<void> {
    if (!isReportedKey(entry.key)) return;
    if (entry.operation === "PUT") {
      this.reported.set(entry.key, entry.value);
      return;
    }
    const before = this.reported.get(entry.key);
    this.reported.delete(entry.key);
    // The device's own delete, copied by this mirror, coming back: Redis already had none, and a
    // value the device wrote since (possibly the same as before the delete) is not removed.
    const own = this.ownDeletes.get(entry.key) ?? 0;
    if (own > 0) {
      if (own === 1) this.ownDeletes.delete(entry.key);
      else this.ownDeletes.set(entry.key, own - 1);
      return;
    }
    if (before === undefined || this.redis.status !== "ready") return;
    await this.redis
      .eval(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`, 1, entry.key, before)
      .catch((error: Error) =>
        this.log.warn({ err: error, twin: this.stats.twin, key: entry.key }, "twin mirror: reported delete not copied to Redis"),
      );
  }

  /** One MULTI per change set, queued behind earlier ones so Redis never goes back to an older value. */
  private writeDesired(entries: TwinEntry[]): Promise<void> {
    const ops = desiredToRedis(entries);
    if (ops.length === 0) return this.queue;
    this.queue = this.queue.then(async () => {
      // Down: nothing is queued; "ready" writes the latest values again (this.latest holds them).
      if (this.redis.status !== "ready") return;
      const multi = this.redis.multi();
      for (const op of ops) {
        if (op.op === "set") multi.set(op.key, op.value);
        else if (op.op === "del") multi.del(op.key);
        else if (op.op === "hset") multi.hset(op.key, op.field, op.value);
        else multi.publish(op.channel, op.message);
      }
      try {
        await multi.exec();
        this.stats.desiredCopied += ops.filter((op) => op.op === "hset").length;
      } catch (error) {
        // Not lost: the next reconnect writes the latest values again.
        this.log.warn({ err: error, twin: this.stats.twin }, "twin mirror: Redis write failed");
      }
    });
    return this.queue;
  }

  private async followReported(kv: KV): Promise<void> {
    const prefix = REDIS_KEYSPACE_PREFIX;
    // One copy: Redis's current value, compared with JetStream's, written when they differ.
    const copyOnce = async (key: string) => {
      await this.ready();
      const value = await this.redis.get(key);
      const current = await kv.get(key);
      if (value === null) {
        if (current?.operation === "PUT") await this.deleteOwn(kv, key);
      } else if (current?.operation !== "PUT" || current.string() !== value) {
        await kv.put(key, value);
        this.stats.reportedCopied++;
      }
    };
    // Copies of one key run one after another: two in flight could land in the wrong order and leave JetStream an older
    // value for good (docs/twins.md, "Reported values keep per-key order"). Each reads Redis when it runs, so
    // notifications during a copy make one more copy, not one each.
    const copy = (key: string): Promise<void> => {
      if (!isReportedKey(key)) return Promise.resolve();
      const running = this.copying.get(key);
      if (running) {
        running.again = true;
        return running.done;
      }
      const state = { again: true, done: Promise.resolve() };
      state.done = (async () => {
        let failure: unknown;
        try {
          while (state.again && !this.closed) {
            state.again = false;
            failure = undefined;
            await copyOnce(key).catch((error: unknown) => (failure = error));
          }
        } finally {
          this.copying.delete(key);
        }
        if (failure !== undefined) throw failure;
      })();
      this.copying.set(key, state);
      return state.done;
    };
    this.sub.on("pmessage", (_p: string, channel: string) => {
      void copy(channel.slice(prefix.length)).catch((error: Error) =>
        this.log.warn({ err: error, twin: this.stats.twin }, "twin mirror: reported copy failed"),
      );
    });
    const pattern = `${prefix}${TWIN_KEY_PREFIX}/*`;
    // Catch up on reported values written while the mirror was away (or not yet subscribed).
    const catchUp = async () => {
      let cursor = "0";
      do {
        const [next, keys] = await this.redis.scan(cursor, "MATCH", `${TWIN_KEY_PREFIX}/*/reported/*`, "COUNT", 500);
        cursor = next;
        for (const key of keys) await copy(key);
      } while (cursor !== "0" && !this.closed);
    };
    await this.sub.psubscribe(pattern);
    await catchUp();
    // After a Redis restart the device may write before this connection has subscribed again:
    // subscribe (acknowledged), then scan, so no reported value falls between the two.
    this.sub.on("ready", () => {
      void this.sub
        .psubscribe(pattern)
        .then(() => this.ready())
        .then(catchUp)
        .catch((error: Error) => this.log.warn({ err: error, twin: this.stats.twin }, "twin mirror: reported catch-up failed"));
    });
  }

  /** A reported delete copied from Redis, marked so its watch entry does not delete in Redis again. */
  private async deleteOwn(kv: KV, key: string): Promise<void> {
    this.ownDeletes.set(key, (this.ownDeletes.get(key) ?? 0) + 1);
    try {
      await kv.delete(key);
    } catch (error) {
      const own = this.ownDeletes.get(key) ?? 0;
      if (own <= 1) this.ownDeletes.delete(key);
      else this.ownDeletes.set(key, own - 1);
      throw error;
    }
  }

  /** Redis is let go before the watch loop is awaited: a write waiting for an unreachable Redis fails instead of holding the stop. */
  async stop(): Promise<void> {
    this.closed = true;
    this.view?.stop();
    const watching = this.watcher?.stop();
    this.sub.disconnect();
    this.redis.disconnect();
    await watching;
  }
}

/** How long start-up waits for every mirror's Redis before letting the rest of the process start. */
const MIRROR_START_WAIT_MS = 2_000;

export async function startTwinMirrorActor(
  nc: NatsConnection,
  cfg: Config,
  options: RuntimeOptions & { log: Logger },
): Promise<ServedActor> {
  const mirrors = cfg.twinMirrors.map(
    (m) => new TwinMirror(nc, m, m.redis, options.log.child({ actor: "twin-mirror" }), options.storage, cfg.twins.maxBytes),
  );
  // A mirror starts once its device's Redis is up. Awaited without bound, one Redis down when derrick
  // started held back every actor started after this one and the edge (`derrick start` never served):
  // past MIRROR_START_WAIT_MS the waiting mirrors go on starting in the background.
  const starting = Promise.all(mirrors.map((m) => m.start()));
  try {
    const outcome = await Promise.race([
      starting.then(() => "started" as const),
      new Promise<"waiting">((resolve) => setTimeout(() => resolve("waiting"), MIRROR_START_WAIT_MS)),
    ]);
    if (outcome === "waiting") {
      options.log.warn(
        { waitedMs: MIRROR_START_WAIT_MS },
        "twin mirror: a device's Redis is not reachable yet; its mirror starts when it is, the rest of derrick does not wait",
      );
      starting.catch((error: unknown) =>
        options.log.error({ err: error }, "twin mirror: could not start after its Redis came up; restart the twin-mirror process"),
      );
    }
  } catch (error) {
    await Promise.all(mirrors.map((m) => m.stop()));
    throw error;
  }
  return serveActor(
    nc,
    {
      name: "twin-mirror",
      description: "copies twin properties between JetStream KV and Redis-backed devices",
      endpoints: [endpoint(twinMirrorStatus, () => ({ mirrors: mirrors.map((m) => m.stats) }))],
    },
    options,
    async () => {
      await Promise.all(mirrors.map((m) => m.stop()));
    },
  );
}
