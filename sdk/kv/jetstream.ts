/**
 * Twin properties in the twin's JetStream KV bucket. The whole bucket is watched (slash keys are one
 * subject token, so a per-group wildcard matches nothing, and nats-server 2.9 has no multi-key
 * filter) from its first message and filtered here: the commit gate hides a PUT until all its keys
 * are written, and TwinWatchView keeps that true when the watch missed messages. After a
 * reconnect, or when the watch ends by itself, it is restarted from the bucket's start, so changes made
 * meanwhile arrive once (the client drops what it already delivered). A bucket deleted and made
 * again (revisions start over) is noticed when the watch restarts and every `checkEveryMs`: the
 * client is told to forget what it delivered and the current values are delivered again.
 */
import { RequestError, type NatsConnection, type Status } from "@nats-io/nats-core";
import { KvWatchInclude, Kvm, type KV, type KvEntry } from "@nats-io/kv";
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from "@nats-io/jetstream";
import { subjects } from "../../subjects/names.ts";
import { TwinCommitGate, TwinWatchView, parseTwinKey, toTwinEntry, twinBucket, twinBucketOptions, twinCommitKey, twinKey, type TwinAddress, type TwinSide } from "../../subjects/twins.ts";
import type { SdkLog, TwinBackend, TwinChange, TwinValueRead } from "./types.ts";

export class JetStreamTwinBackend implements TwinBackend {
  private kv?: KV;
  private watcher?: { stop(): void };
  private view?: TwinWatchView;
  /** Counts watch starts: a start that is no longer the newest stops its watch. */
  private generation = 0;
  private closed = false;
  /** The bucket's stream as last seen: its creation time, and the highest revision the watch gave. */
  private streamCreated?: string;
  private highestRevision = 0;
  private checkTimer?: ReturnType<typeof setInterval>;
  /** Stopped on close: a `break` alone would hold the listener on the app's connection until its next status event. */
  private statuses?: AsyncIterable<Status> & { stop?: () => void };

  constructor(
    private readonly nc: NatsConnection,
    private readonly twin: TwinAddress,
    private readonly log: SdkLog,
    /** Close the connection on close() (it was opened for the KV store alone). */
    private readonly ownsConnection = false,
    /** How often the bucket is checked for having been deleted and made again (one stream info). */
    private readonly checkEveryMs = 30_000,
  ) {}

  async start(onChanges: (changes: TwinChange[]) => void, onRecreated: () => void = () => undefined): Promise<void> {
    this.onRecreated = onRecreated;
    this.kv = await this.openBucket();
    this.streamCreated = (await this.kv.status()).streamInfo.created;
    await this.watch(onChanges);
    const statuses = (this.statuses = this.nc.status());
    void (async () => {
      for await (const status of statuses) {
        if (this.closed) break;
        if (status.type === "reconnect") void this.rewatch(onChanges);
      }
    })();
    this.checkTimer = setInterval(() => {
      void this.recreated()
        .then((yes) => (yes ? this.rewatch(onChanges) : undefined))
        .catch(() => undefined);
    }, this.checkEveryMs);
    this.checkTimer.unref?.();
  }

  private onRecreated: () => void = () => undefined;

  /**
   * True when the bucket was deleted and made again since last seen (another creation time, or fewer
   * messages ever stored than the revisions already delivered): revisions started over, so the
   * client's "already delivered" versions mean nothing any more. Warns and tells the client once.
   * A missing stream is no news yet (derrick makes it again on the next write).
   */
  private async recreated(): Promise<boolean> {
    const info = (await this.kv!.status()).streamInfo;
    const before = this.streamCreated;
    if (info.created === before && info.state.last_seq >= this.highestRevision) return false;
    this.log("warn", "the twin bucket was deleted and made again (revisions started over); delivering its current values again", {
      bucket: twinBucket(this.twin),
      created: info.created,
      before,
      lastSeq: info.state.last_seq,
      highestSeen: this.highestRevision,
    });
    this.streamCreated = info.created;
    this.highestRevision = 0;
    this.onRecreated();
    return true;
  }

  /**
   * The twin's bucket. An existing one is bound (`create` binds with a stream lookup alone). A
   * missing one is made by derrick: the twins actor is asked (`subjects.twins.ensure()`), which makes
   * it with the deployment's configuration (DERRICK_TWIN_MAX_BYTES, replicas, the twin count limit).
   * Only when no twins actor answers at all (no responders: a NATS server without derrick) does the
   * SDK create it itself, with the defaults (`twinBucketOptions`: 64 MiB, one replica) — and only
   * when its user may create streams, which device users may not (subjects/twins.ts): they wait,
   * retrying, until derrick creates it (when the device is registered or its twin first written).
   */
  private async openBucket(): Promise<KV> {
    const name = twinBucket(this.twin);
    let warned = 0;
    for (let attempt = 0; ; attempt++) {
      try {
        if (await this.bucketExists(name)) return await new Kvm(this.nc).create(name, twinBucketOptions(this.twin));
        if (await this.askDerrick()) continue;
        return await new Kvm(this.nc).create(name, twinBucketOptions(this.twin));
      } catch (error) {
        if (this.closed) throw error;
        if (Date.now() - warned > 30_000) {
          this.log("warn", "cannot open the twin bucket yet (derrick creates it when the device is registered or its twin is first written); retrying", { bucket: name, error: (error as Error).message });
          warned = Date.now();
        }
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      }
    }
  }

  /** Whether the twin's stream exists (a device user may look its own up). */
  private async bucketExists(name: string): Promise<boolean> {
    try {
      await (await jetstreamManager(this.nc)).streams.info(`KV_${name}`);
      return true;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return false;
      throw error;
    }
  }

  /**
   * Asks the twins actor to make the bucket. True when it did; false when no twins actor listens
   * (the SDK may then create it). Throws on anything else — a refusal (507 past the twin limit), a
   * timeout, a device user not allowed to ask — so the caller waits and tries again.
   */
  private async askDerrick(): Promise<boolean> {
    try {
      const answer = await this.nc.request(subjects.twins.ensure(), JSON.stringify(this.twin), { timeout: 5_000 });
      const code = answer.headers?.get("Nats-Service-Error-Code");
      if (code) throw new Error(`derrick did not make the twin bucket: ${code} ${answer.headers?.get("Nats-Service-Error") ?? ""}`.trim());
      return true;
    } catch (error) {
      if (error instanceof RequestError && error.isNoResponders()) return false;
      throw error;
    }
  }

  private async rewatch(onChanges: (changes: TwinChange[]) => void): Promise<void> {
    // JetStream may still be recovering right after a server restart: retry with a short backoff.
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        await this.recreated().catch(() => false);
        await this.watch(onChanges);
        this.log("info", "twin watch restarted");
        return;
      } catch (error) {
        this.log("warn", "twin watch restart failed; retrying", { error: (error as Error).message });
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      }
    }
  }

  /**
   * (Re)starts the watch. An entry that cannot be handled (a callback that throws) is logged and
   * skipped; a watch that ends or throws while the backend is open is started again (nats.js gives up
   * a quiet watch after about two minutes without JetStream, and its iterator just returns).
   */
  private async watch(onChanges: (changes: TwinChange[]) => void): Promise<void> {
    // Each start supersedes every earlier one, also one still opening (a reconnect and an ended
    // watch may both restart it): only the newest runs, the others are stopped.
    const mine = ++this.generation;
    this.watcher?.stop();
    this.watcher = undefined;
    this.view?.stop();
    // Every revision the bucket holds, not each key's last value: the view needs the commit records
    // in order, and after a hole in them hands on only states where it caught up (TwinWatchView).
    const view = (this.view = new TwinWatchView({
      lastSeq: async () => (await this.kv!.status()).streamInfo.state.last_seq,
      emit: (visible) => {
        if (this.closed || this.generation !== mine) return;
        const changes: TwinChange[] = [];
        for (const entry of visible) {
          const parsed = parseTwinKey(entry.key);
          if (parsed?.kind !== "property") continue;
          changes.push({ group: parsed.group, side: parsed.side, name: parsed.name, value: entry.operation === "PUT" ? entry.value : null, version: entry.revision });
        }
        try {
          if (changes.length) onChanges(changes);
        } catch (error) {
          this.log("error", "a twin change could not be handled; skipped", { keys: visible.map((e) => e.key), error: (error as Error).message });
        }
      },
      onError: (error) => this.log("warn", "twin watch could not read the bucket's last revision; trying again", { error: (error as Error).message }),
    }));
    const iterator = await this.kv!.watch({ include: KvWatchInclude.AllHistory });
    if (this.closed || this.generation !== mine) {
      iterator.stop();
      view.stop();
      return;
    }
    this.watcher = iterator;
    void (async () => {
      let ended: unknown;
      try {
        for await (const entry of iterator) {
          this.highestRevision = Math.max(this.highestRevision, entry.revision);
          await view.feed(toTwinEntry(entry), entry.delta);
        }
      } catch (error) {
        ended = error;
      }
      // Closed, or replaced by a newer watch (a reconnect): nothing to do.
      if (this.closed || this.generation !== mine) return;
      this.log("warn", "twin watch ended; starting it again", ended ? { error: (ended as Error).message } : {});
      await new Promise((r) => setTimeout(r, 250));
      if (!this.closed && this.generation === mine) await this.rewatch(onChanges);
    })();
  }

  /**
   * A property's visible value, through the commit gate like the watch and the REST GET: a desired
   * value a pending claim still holds back is not returned (half of a PUT), the value before it is.
   */
  async get(group: string, side: TwinSide, name: string): Promise<TwinValueRead | undefined> {
    const key = twinKey(group, side, name);
    let entry = await this.kv!.get(key);
    // The commit record is read after the value: a claim made later holds nothing read before it.
    if (entry && side === "desired" && (await this.held(group, entry))) {
      const revision = entry.revision;
      // History 2: the value before the held one (only a claim's keys are rare enough to pay a consumer).
      entry = null;
      for await (const older of await this.kv!.history({ key })) if (older.revision < revision) entry = older;
    }
    return entry && entry.operation === "PUT" ? { value: entry.string(), version: entry.revision } : undefined;
  }

  /** True when the group's pending claim holds this desired entry back until its commit. */
  private async held(group: string, entry: KvEntry): Promise<boolean> {
    const record = await this.kv!.get(twinCommitKey(group));
    if (!record) return false;
    const gate = new TwinCommitGate();
    const visible = [toTwinEntry(record), toTwinEntry(entry)].sort((a, b) => a.revision - b.revision).flatMap((e) => gate.feed(e));
    return !visible.some((e) => e.revision === entry.revision);
  }

  put(group: string, side: TwinSide, name: string, value: string): Promise<number> {
    return this.kv!.put(twinKey(group, side, name), value);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.checkTimer);
    this.statuses?.stop?.();
    this.watcher?.stop();
    this.view?.stop();
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.close();
  }
}
