/**
 * Twin properties in the twin's JetStream KV bucket, followed whole from its first message with direct gets
 * (BucketFollower: what a device account may use) and filtered here through the commit gate and TwinWatchView.
 * Restarted from the bucket's start after a reconnect; a bucket made again is noticed at that restart and every
 * `checkEveryMs` (docs/twins.md#twin-observation-semantics). A device account's user reaches derrick's JetStream
 * under DEVICE_JS_API, any other connection under `$JS.API`: only a device account answers the former.
 */
import { RequestError, type NatsConnection, type Status } from "@nats-io/nats-core";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import { JetStreamApiCodes, JetStreamApiError, jetstream, type JetStreamManager } from "@nats-io/jetstream";
import { BucketFollower, storedToTwinEntry } from "./follow.ts";
import { subjects } from "../../subjects/names.ts";
import {
  DEVICE_JS_API,
  parseTwinKey,
  twinBucket,
  twinBucketOptions,
  twinCommitKey,
  twinKey,
  type TwinAddress,
  type TwinSide,
} from "../../subjects/twins.ts";
import { TwinCommitGate, TwinWatchView, toTwinEntry } from "../../platform/twin-commit.ts";
import type { SdkLog, TwinBackend, TwinChange, TwinValueRead } from "./types.ts";

export class JetStreamTwinBackend implements TwinBackend {
  private kv?: KV;
  /** The JetStream API the bucket is reached through (see the header). */
  private jsm?: JetStreamManager;
  private watcher?: { stop(): Promise<void>; poke(): void };
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
   * True when the bucket was made again since last seen (another creation time, or fewer messages ever stored than
   * revisions delivered): revisions started over, so "already delivered" means nothing. Warns and tells the client
   * once. A missing stream is no news yet (derrick makes it again on the next write).
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
   * The twin's bucket, bound when it exists (`create` binds with a stream lookup alone). A missing one is made by
   * the twins actor (`subjects.twins.ensure()`, with the deployment's settings); only when none answers does the SDK
   * create it, if its user may, and device users wait (docs/twins.md#config-file-one-file-aeajson).
   */
  private async openBucket(): Promise<KV> {
    const name = twinBucket(this.twin);
    let warned = 0;
    for (let attempt = 0; ; attempt++) {
      if (this.closed) throw new Error("the twin backend was closed while its bucket was being opened");
      try {
        const apiPrefix = await this.apiPrefix(name);
        const js = jetstream(this.nc, { apiPrefix, checkAPI: false });
        this.jsm = await js.jetstreamManager(false);
        const info = await this.bucketInfo(name);
        // Bound with direct gets (the reads a device account imports); made with the SDK's defaults only on a server without derrick.
        if (info) return await new Kvm(js).open(name, { allow_direct: info.config.allow_direct === true });
        // Not there yet: a device waits for derrick to make it (the back-off below); derrick asked to make it, at once.
        if (apiPrefix === DEVICE_JS_API) throw new Error(`the twin bucket ${name} does not exist yet`);
        if (await this.askDerrick()) continue;
        return await new Kvm(js).create(name, twinBucketOptions(this.twin));
      } catch (error) {
        if (this.closed) throw error;
        if (Date.now() - warned > 30_000) {
          this.log(
            "warn",
            "cannot open the twin bucket yet (derrick creates it when the device is registered or its twin is first written); retrying",
            { bucket: name, error: (error as Error).message },
          );
          warned = Date.now();
        }
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** Math.min(attempt, 5))));
      }
    }
  }

  /** The twin's stream info; undefined when it does not exist (a device user may look its own up). */
  private async bucketInfo(name: string) {
    try {
      return await this.jsm!.streams.info(`KV_${name}`);
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return undefined;
      throw error;
    }
  }

  /** DEVICE_JS_API when this connection is a device account's (only there is it answered), else `$JS.API`. */
  private async apiPrefix(name: string): Promise<string> {
    try {
      await this.nc.request(`${DEVICE_JS_API}.STREAM.INFO.KV_${name}`, undefined, { timeout: 5_000 });
      return DEVICE_JS_API;
    } catch (error) {
      if (error instanceof RequestError && error.isNoResponders()) return "$JS.API";
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
   * (Re)starts following the bucket from its first message. An entry that cannot be handled (a
   * callback that throws) is logged and skipped; a read that fails is logged and tried again.
   */
  private async watch(onChanges: (changes: TwinChange[]) => void): Promise<void> {
    // Each start supersedes every earlier one (a reconnect and a recreated bucket may both restart it).
    const mine = ++this.generation;
    const previous = this.watcher;
    this.watcher = undefined;
    this.view?.stop();
    await previous?.stop();
    if (this.closed || this.generation !== mine) return;
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
          changes.push({
            group: parsed.group,
            side: parsed.side,
            name: parsed.name,
            value: entry.operation === "PUT" ? entry.value : null,
            version: entry.revision,
          });
        }
        try {
          if (changes.length) onChanges(changes);
        } catch (error) {
          this.log("error", "a twin change could not be handled; skipped", {
            keys: visible.map((e) => e.key),
            error: (error as Error).message,
          });
        }
      },
      onError: (error) =>
        this.log("warn", "twin watch could not read the bucket's last revision; trying again", { error: (error as Error).message }),
    }));
    let warned = 0;
    const follower = new BucketFollower({
      nc: this.nc,
      jsm: this.jsm!,
      bucket: twinBucket(this.twin),
      from: 1,
      onEntry: async (entry) => {
        this.highestRevision = Math.max(this.highestRevision, entry.revision);
        await view.feed(entry);
      },
      onError: (error) => {
        if (Date.now() - warned < 30_000) return;
        warned = Date.now();
        this.log("warn", "twin watch could not read the bucket; trying again", { error: (error as Error).message });
      },
    });
    this.watcher = follower;
    follower.start();
  }

  /**
   * A property's visible value, through the commit gate like the watch and the REST GET: a desired
   * value a pending claim still holds back is not returned (half of a PUT), the value before it is.
   */
  async get(group: string, side: TwinSide, name: string): Promise<TwinValueRead | undefined> {
    const key = twinKey(group, side, name);
    const entry = await this.kv!.get(key);
    // The commit record is read after the value: a claim made later holds nothing read before it.
    if (entry && side === "desired" && (await this.held(group, entry))) {
      const revision = entry.revision;
      // History 2: the value before the held one, read with direct gets from the bucket's start.
      const older = await this.before(key, revision);
      return older && older.operation === "PUT" ? { value: older.value, version: older.revision } : undefined;
    }
    return entry && entry.operation === "PUT" ? { value: entry.string(), version: entry.revision } : undefined;
  }

  /** The key's last revision before `revision` (the bucket keeps two per key: a few direct gets). */
  private async before(key: string, revision: number) {
    const bucket = twinBucket(this.twin);
    let found: ReturnType<typeof storedToTwinEntry> | undefined;
    for (let seq = 1; seq < revision; ) {
      const msg = await this.jsm!.direct.getMessage(`KV_${bucket}`, { seq, next_by_subj: `$KV.${bucket}.${key}` });
      if (!msg || msg.seq >= revision) break;
      found = storedToTwinEntry(bucket, msg);
      seq = msg.seq + 1;
    }
    return found;
  }

  /** True when the group's pending claim holds this desired entry back until its commit. */
  private async held(group: string, entry: KvEntry): Promise<boolean> {
    const record = await this.kv!.get(twinCommitKey(group));
    if (!record) return false;
    const gate = new TwinCommitGate();
    const visible = [toTwinEntry(record), toTwinEntry(entry)].sort((a, b) => a.revision - b.revision).flatMap((e) => gate.feed(e));
    return !visible.some((e) => e.revision === entry.revision);
  }

  async put(group: string, side: TwinSide, name: string, value: string): Promise<number> {
    const revision = await this.kv!.put(twinKey(group, side, name), value);
    // A write through a device account's import is not passed on as a change notice: read on now.
    this.watcher?.poke();
    return revision;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.checkTimer);
    this.statuses?.stop?.();
    this.view?.stop();
    await this.watcher?.stop();
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.close();
  }
}
