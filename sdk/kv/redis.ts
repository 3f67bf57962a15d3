/**
 * Twin properties in a Redis on the device (the original SDK 3.0 layout: plain string keys
 * `twin_properties/<group>/desired|reported/<name>`), followed through keyspace notifications. The
 * twin-mirror actor writes desired values with their JetStream revision in the `twin_versions` hash,
 * in one MULTI, so a notification never reveals half of a PUT. On (re)connect every key is re-read
 * (after either connection is back: the command one and, once it has subscribed again, the listening one).
 */
import { Redis } from "ioredis";
import { REDIS_KEYSPACE_PREFIX, REDIS_TWIN_VERSIONS, TWIN_KEY_PREFIX, parseTwinKey, twinKey, type TwinSide } from "../../subjects/twins.ts";
import type { SdkLog, TwinBackend, TwinChange, TwinValueRead } from "./types.ts";

/**
 * Reads and writes that may wait in the Redis client's queue for an unreachable Redis (`maxWaiting`, default), so a
 * reported value written in an outage still lands; beyond this many a call fails at once rather than hold memory
 * for the whole outage (unbounded, an app reporting every 10 ms grew without limit).
 */
export const REDIS_MAX_WAITING = 10_000;

export type RedisTwinOptions = { host: string; port: number; password?: string; maxWaiting?: number };

export class RedisTwinBackend implements TwinBackend {
  private readonly cmd: Redis;
  private readonly sub: Redis;
  private readonly maxWaiting: number;
  /** Calls in flight on the command connection. */
  private inFlight = 0;

  constructor(
    options: RedisTwinOptions,
    private readonly log: SdkLog,
  ) {
    // Reconnect forever with a capped exponential backoff (the original SDK's 3.0 behaviour).
    const common = {
      host: options.host,
      port: options.port,
      password: options.password,
      retryStrategy: (times: number) => Math.min(2_000, 50 * 2 ** Math.min(times, 6)),
      maxRetriesPerRequest: null,
    };
    this.maxWaiting = options.maxWaiting ?? REDIS_MAX_WAITING;
    this.cmd = new Redis(common);
    this.sub = new Redis(common);
    // Without a listener ioredis prints every failed reconnect; say it once per outage instead.
    for (const connection of [this.cmd, this.sub]) {
      let reported = false;
      connection.on("error", (error: Error) => {
        if (!reported) this.log("warn", "Redis unreachable; retrying", { error: error.message });
        reported = true;
      });
      connection.on("ready", () => (reported = false));
    }
  }

  async start(onChanges: (changes: TwinChange[]) => void): Promise<void> {
    await this.cmd
      .config("SET", "notify-keyspace-events", "KEA")
      .catch((error: Error) =>
        this.log("warn", "cannot enable keyspace notifications; expecting the server to have them on", { error: error.message }),
      );
    const prefix = REDIS_KEYSPACE_PREFIX;
    this.sub.on("pmessage", (_pattern: string, channel: string) => {
      const key = channel.slice(prefix.length);
      void this.read([key]).then(onChanges, (error: Error) => this.log("warn", "twin read failed", { key, error: error.message }));
    });
    const pattern = `${prefix}${TWIN_KEY_PREFIX}/*`;
    await this.sub.psubscribe(pattern);
    const resync = () =>
      void this.readAll().then(onChanges, (error: Error) => this.log("warn", "twin resync failed", { error: error.message }));
    this.cmd.on("ready", resync);
    // The listening connection may come back after the writer's first writes to a restarted Redis:
    // once subscribed again (acknowledged), re-read, so a change made in between is not missed.
    this.sub.on(
      "ready",
      () =>
        void this.sub
          .psubscribe(pattern)
          .then(resync, (error: Error) => this.log("warn", "twin resubscribe failed", { error: error.message })),
    );
    onChanges(await this.readAll());
  }

  /**
   * Every twin key, and every desired key the mirror recorded a version of: a key deleted while this
   * client was not listening is no longer there to be scanned, but its delete's version still is
   * (read as `value: null`, so the app is told of the delete).
   */
  private async readAll(): Promise<TwinChange[]> {
    const keys = new Set<string>();
    let cursor = "0";
    do {
      const [next, batch] = await this.cmd.scan(cursor, "MATCH", `${TWIN_KEY_PREFIX}/*`, "COUNT", 500);
      cursor = next;
      for (const key of batch) keys.add(key);
    } while (cursor !== "0");
    do {
      const [next, batch] = await this.cmd.hscan(REDIS_TWIN_VERSIONS, cursor, "COUNT", 500);
      cursor = next;
      for (let i = 0; i < batch.length; i += 2) keys.add(batch[i]!);
    } while (cursor !== "0");
    return this.read([...keys]);
  }

  private async read(keys: string[]): Promise<TwinChange[]> {
    if (keys.length === 0) return [];
    const pipeline = this.cmd.multi();
    for (const key of keys) pipeline.get(key).hget(REDIS_TWIN_VERSIONS, key);
    const results = (await pipeline.exec()) ?? [];
    const changes: TwinChange[] = [];
    keys.forEach((key, i) => {
      const parsed = parseTwinKey(key);
      if (parsed?.kind !== "property") return;
      const value = results[2 * i]?.[1] as string | null;
      const version = Number(results[2 * i + 1]?.[1] ?? 0) || 0;
      changes.push({ group: parsed.group, side: parsed.side, name: parsed.name, value, version });
    });
    return changes.sort((a, b) => a.version - b.version);
  }

  async get(group: string, side: TwinSide, name: string): Promise<TwinValueRead | undefined> {
    const key = twinKey(group, side, name);
    const [value, version] = await this.bounded(() => Promise.all([this.cmd.get(key), this.cmd.hget(REDIS_TWIN_VERSIONS, key)]));
    return value === null ? undefined : { value, version: Number(version ?? 0) || 0 };
  }

  async put(group: string, side: TwinSide, name: string, value: string): Promise<number> {
    const key = twinKey(group, side, name);
    // A local write has no JetStream revision yet: the mirror assigns one when it copies it back.
    await this.bounded(() => this.cmd.multi().set(key, value).hdel(REDIS_TWIN_VERSIONS, key).exec());
    return 0;
  }

  /** Runs `op` unless Redis is unreachable and `maxWaiting` calls already wait for it. */
  private async bounded<T>(op: () => Promise<T>): Promise<T> {
    if (this.cmd.status !== "ready" && this.inFlight >= this.maxWaiting) {
      throw new Error(`Redis is unreachable and ${this.inFlight} twin reads and writes already wait for it; try again once it is back`);
    }
    this.inFlight++;
    try {
      return await op();
    } finally {
      this.inFlight--;
    }
  }

  async close(): Promise<void> {
    this.sub.disconnect();
    this.cmd.disconnect();
  }
}
