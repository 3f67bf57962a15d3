/**
 * The device SDK 3.0 client: one NATS connection (reconnecting forever), inbound messages per input
 * kind as callbacks or async iterators, outbound messages to every subject of the matching Target,
 * and twin properties (observe desired, get, set reported) over JetStream KV or Redis.
 *
 * The app's own configuration is the twin property `config/<Name>`: a valid new value replaces the
 * config and re-subscribes (Subscriptions and Targets) and is written back as the reported value;
 * an invalid one is ignored and its problem reported under `config/<Name>_status`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "@nats-io/transport-node";
import type { Msg, NatsConnection, Subscription } from "@nats-io/nats-core";
import { CONFIG_GROUP, deviceInboxPrefix, isReservedTwinName, type TwinSide } from "../subjects/twins.ts";
import { isPublishedTo } from "../subjects/delivery.ts";
import { INPUT_KINDS, parseAppConfigText, type AppConfig, type InputKind, type OutputKind, type SdkEnv } from "./config.ts";
import { dataReport, messageIdSequence, type IoDataReport, type IoPointInput } from "./messages.ts";
import { JetStreamTwinBackend } from "./kv/jetstream.ts";
import { RedisTwinBackend } from "./kv/redis.ts";
import type { SdkLog, TwinBackend, TwinChange, TwinValueRead } from "./kv/types.ts";

export type InboundMessage = {
  kind: InputKind;
  subject: string;
  /** The payload parsed as JSON, or its text when it is not JSON. */
  data: unknown;
  raw: Uint8Array;
  /** RequestIn only: answers the requester. */
  respond?: (data: unknown) => boolean;
};

export type RequestResult = { subject: string; ok: true; data: unknown } | { subject: string; ok: false; error: string };

/** `config/<Name>_status`: the acknowledgement of the last config value (Azure PnP style). */
export type ConfigStatus = { ac: number; av: number; ad: string };

export type DeviceClientOptions = {
  env?: SdkEnv;
  log?: SdkLog;
  /** Milliseconds between reconnect attempts (forever). */
  reconnectTimeWaitMs?: number;
  /**
   * Ends the wait of `connect()` (e.g. `AbortSignal.timeout(10_000)`): it rejects with the signal's
   * reason and closes whatever it had opened. Without it, `connect()` waits for the broker forever.
   */
  signal?: AbortSignal;
  /** Milliseconds between checks that the twin bucket was not deleted and made again (JetStream). */
  twinCheckEveryMs?: number;
};

/** A callback's result: a returned promise is not awaited, but its rejection is logged. */
type CallbackResult = unknown;

type Observer = {
  group: string;
  name?: string;
  callback: (change: TwinChange) => CallbackResult;
  /**
   * Until its first values are replayed: the keys live deliveries already gave it (a replay must not
   * follow them with an older value). Dropped once the replay has run, so it stays small.
   */
  liveBeforeReplay?: Set<string>;
};

/** Default bound of a `messages()` queue: beyond it the oldest queued message is dropped. */
export const DEFAULT_MESSAGE_QUEUE_LIMIT = 10_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const silent: SdkLog = () => undefined;

export const configStatusName = (appName: string) => `${appName}_status`;

function decode(raw: Uint8Array): unknown {
  const text = decoder.decode(raw);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const encode = (data: unknown) =>
  data instanceof Uint8Array ? data : encoder.encode(typeof data === "string" ? data : JSON.stringify(data));

/** `messages()`: an async iterator that also counts what its bound made it drop. */
export type MessageIterator = AsyncIterableIterator<InboundMessage> & {
  /** Messages dropped (the oldest queued ones) because the reader fell `limit` messages behind. */
  readonly dropped: number;
};

/** A bounded push queue read as an async iterator: when full, the oldest message is dropped. */
class MessageQueue implements MessageIterator {
  private readonly items: InboundMessage[] = [];
  private head = 0;
  private readonly waiters: Array<(r: IteratorResult<InboundMessage>) => void> = [];
  private done = false;
  dropped = 0;
  private lastWarning = 0;
  constructor(
    private readonly limit: number,
    private readonly onClose: () => void,
    private readonly log: SdkLog,
    private readonly kind: InputKind,
  ) {}
  push(item: InboundMessage) {
    const waiter = this.waiters.shift();
    if (waiter) return waiter({ value: item, done: false });
    this.items.push(item);
    if (this.items.length - this.head > this.limit) {
      this.head++;
      this.dropped++;
      // A slow reader under a flood would otherwise log once per message.
      if (Date.now() - this.lastWarning >= 60_000) {
        this.lastWarning = Date.now();
        this.log("warn", "messages() reader is too slow: dropped the oldest queued messages", {
          kind: this.kind,
          limit: this.limit,
          dropped: this.dropped,
        });
      }
    }
    // Compact now and then instead of shift() per message (O(n) each on a long queue).
    if (this.head > 1024 && this.head * 2 > this.items.length) this.items.splice(0, this.head), (this.head = 0);
  }
  private take(): InboundMessage | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as unknown as InboundMessage;
    if (this.head === this.items.length) (this.items.length = 0), (this.head = 0);
    return item;
  }
  next(): Promise<IteratorResult<InboundMessage>> {
    const item = this.take();
    if (item) return Promise.resolve({ value: item, done: false });
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  return(): Promise<IteratorResult<InboundMessage>> {
    this.onClose();
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }
  /** No more messages will come (the reader stopped, or the client closed): what is queued is still read. */
  end(): void {
    this.done = true;
    for (const waiter of this.waiters.splice(0)) waiter({ value: undefined, done: true });
  }
  [Symbol.asyncIterator]() {
    return this;
  }
}

/** The key of one inbound subscription: the same subject may be subscribed for two kinds. */
const subscriptionKey = (kind: InputKind, subject: string) => `${kind} ${subject}`;

export class DeviceClient {
  /** Inbound subscriptions by `subscriptionKey`. */
  private subscriptions = new Map<string, Subscription>();
  private readonly listeners = new Map<InputKind, Set<(m: InboundMessage) => CallbackResult>>(INPUT_KINDS.map((k) => [k, new Set()]));
  private readonly observers = new Set<Observer>();
  private readonly configListeners = new Set<(config: AppConfig, status: ConfigStatus) => CallbackResult>();
  /** Open `messages()` iterators: close() ends them. */
  private readonly queues = new Set<MessageQueue>();
  /** False between a "disconnect" status and the next "reconnect": sends are refused then. */
  private linkUp = true;
  private lastOfflineWarning = 0;
  /** Latest delivered change per key: the dedupe that makes each change arrive once, in order. */
  private readonly delivered = new Map<string, TwinChange>();
  private readonly nextMessageId = messageIdSequence();
  private configVersion = 0;
  /** The config twin being applied (or the last one applied). */
  private configApplied: Promise<void> = Promise.resolve();

  private constructor(
    private current: AppConfig,
    readonly nc: NatsConnection,
    private readonly twins: TwinBackend,
    private readonly env: SdkEnv,
    private readonly log: SdkLog,
  ) {
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type === "disconnect") this.linkUp = false;
        else if (status.type === "reconnect") this.linkUp = true;
      }
    })().catch(() => undefined);
  }

  /**
   * Calls an app callback so that nothing it does can stop the SDK: a throw is logged, a returned
   * promise is not awaited (callbacks run concurrently, nothing queues up behind a slow one) and its
   * rejection is logged.
   */
  private callApp<A extends unknown[]>(
    what: string,
    callback: (...args: A) => CallbackResult,
    args: A,
    data: Record<string, unknown>,
  ): void {
    const logError = (error: unknown) =>
      this.log("error", `${what} failed`, { ...data, error: error instanceof Error ? error.message : String(error) });
    try {
      const result = callback(...args);
      if (typeof (result as PromiseLike<unknown> | undefined)?.then === "function") Promise.resolve(result).then(undefined, logError);
    } catch (error) {
      logError(error);
    }
  }

  /**
   * Connects, subscribes, and starts following the twin (the current config twin is applied). A
   * broker that is not up yet is waited for, not a start-up failure (SDK 3.x: "connection will
   * continue to try"); `options.signal` bounds the wait.
   */
  static async connect(config: AppConfig, options: DeviceClientOptions = {}): Promise<DeviceClient> {
    const log = options.log ?? silent;
    const { signal } = options;
    const reconnectTimeWait = options.reconnectTimeWaitMs ?? 1_000;
    const common = {
      ...(config.bus.user ? { user: config.bus.user } : {}),
      ...(config.bus.password ? { pass: config.bus.password } : {}),
      // A per-app inbox, so per-device permissions can allow replies and watches to this app only.
      inboxPrefix: deviceInboxPrefix(config.name),
      maxReconnectAttempts: -1,
      reconnectTimeWait,
    };
    const nc = await dialUntilConnected(
      () => connect({ servers: config.bus.servers, name: config.name, ...common }),
      signal,
      reconnectTimeWait,
      log,
      "the message bus",
    );
    let kvConnection: NatsConnection | undefined;
    let client: DeviceClient | undefined;
    try {
      let twins: TwinBackend;
      if (config.kv.kind === "redis")
        twins = new RedisTwinBackend(
          { host: config.kv.host, port: config.kv.port, ...(config.kv.password ? { password: config.kv.password } : {}) },
          log,
        );
      else {
        // A separate KV server (KvClient Server/Port) gets its own connection, same credentials.
        const kvServers = config.kv.servers;
        kvConnection = kvServers
          ? await dialUntilConnected(
              () => connect({ servers: kvServers, name: `${config.name}-kv`, ...common }),
              signal,
              reconnectTimeWait,
              log,
              "the key-value server",
            )
          : nc;
        twins = new JetStreamTwinBackend(kvConnection, config.kv.twin, log, kvConnection !== nc, options.twinCheckEveryMs);
      }
      client = new DeviceClient(config, nc, twins, options.env ?? {}, log);
      const started = client;
      started.subscribe();
      // One config twin at a time: applying one waits for the broker (new subscriptions), and a
      // later value must not be overtaken by an earlier one still being applied.
      started.observers.add({
        group: CONFIG_GROUP,
        name: config.name,
        callback: (change) =>
          void (started.configApplied = started.configApplied
            .then(() => started.applyConfigTwin(change))
            .catch((error: Error) => started.log("error", "applying the config twin failed", { error: error.message }))),
      });
      await untilAborted(
        twins.start(
          (changes) => started.onTwinChanges(changes),
          () => started.delivered.clear(),
        ),
        signal,
      );
      await untilAborted(started.applyCurrentConfig(), signal);
      return started;
    } catch (error) {
      // Given up (or failed): nothing it opened may live on as a second client of this device.
      if (client) await client.close().catch(() => undefined);
      else {
        if (kvConnection && kvConnection !== nc) await kvConnection.close().catch(() => undefined);
        await nc.close().catch(() => undefined);
      }
      throw error;
    }
  }

  get config(): AppConfig {
    return this.current;
  }

  // ---- messaging ---------------------------------------------------------------------------

  /** The inbound subscriptions a config asks for, by `subscriptionKey`. */
  private static wanted(config: AppConfig): Map<string, { kind: InputKind; subject: string }> {
    const wanted = new Map<string, { kind: InputKind; subject: string }>();
    for (const kind of INPUT_KINDS)
      for (const subject of config.bus.subscriptions[kind]) wanted.set(subscriptionKey(kind, subject), { kind, subject });
    return wanted;
  }

  private subscribeOne(kind: InputKind, subject: string): Subscription {
    return this.nc.subscribe(subject, {
      callback: (error, msg) => {
        if (error) return this.log("warn", "subscription error", { subject, error: error.message });
        // Another device's JetStream consumer can deliver its bucket here (subjects/delivery.ts).
        if (!isPublishedTo(msg, subject))
          return this.log("warn", "dropped a message not published to this subscription", { subject, delivered: msg.subject });
        this.dispatch(kind, msg);
      },
    });
  }

  /** Subscribes what the current config asks for (at start). */
  private subscribe(): void {
    for (const [key, { kind, subject }] of DeviceClient.wanted(this.current)) this.subscriptions.set(key, this.subscribeOne(kind, subject));
  }

  /**
   * Moves the subscriptions to `next`'s: unchanged ones stay (none of their messages is lost); added ones are
   * subscribed and confirmed by a flush (a refusal, e.g. a permissions violation, arrives before its PONG) before
   * removed ones go. On a refusal nothing changes and the refusal is thrown.
   */
  private async resubscribe(next: AppConfig): Promise<void> {
    const wanted = DeviceClient.wanted(next);
    const added = new Map<string, Subscription>();
    for (const [key, { kind, subject }] of wanted) if (!this.subscriptions.has(key)) added.set(key, this.subscribeOne(kind, subject));
    if (added.size > 0) {
      try {
        await this.nc.flush();
      } catch (error) {
        // Not confirmed (link down): the client subscribes them again on reconnect, and a refusal then is logged.
        this.log("warn", "cannot confirm the new subscriptions with the broker", { error: (error as Error).message });
      }
      const refused = [...added.values()].filter((sub) => sub.isClosed());
      if (refused.length > 0) {
        for (const sub of added.values()) if (!sub.isClosed()) sub.unsubscribe();
        throw new SubscriptionRefusedError(`the broker refused the subscription to ${refused.map((sub) => sub.getSubject()).join(", ")}`);
      }
    }
    for (const [key, sub] of this.subscriptions) {
      if (wanted.has(key)) continue;
      sub.unsubscribe();
      this.subscriptions.delete(key);
    }
    for (const [key, sub] of added) this.subscriptions.set(key, sub);
  }

  private dispatch(kind: InputKind, msg: Msg): void {
    const message: InboundMessage = {
      kind,
      subject: msg.subject,
      data: decode(msg.data),
      raw: msg.data,
      ...(kind === "RequestIn" && msg.reply ? { respond: (data: unknown) => msg.respond(encode(data)) } : {}),
    };
    for (const listener of this.listeners.get(kind)!) this.callApp("message callback", listener, [message], { kind, subject: msg.subject });
  }

  /**
   * Calls `callback` for each message of one input kind; returns the unsubscribe function. A throw
   * or a rejected promise is logged; the next message is delivered without waiting for the promise.
   */
  on(kind: InputKind, callback: (message: InboundMessage) => CallbackResult): () => void {
    this.listeners.get(kind)!.add(callback);
    return () => this.listeners.get(kind)!.delete(callback);
  }

  /**
   * The messages of one input kind as an async iterator (break out of the loop to stop). At most
   * `limit` (default 10 000) messages wait for a slow reader: beyond that the oldest is dropped,
   * counted in `dropped` and warned about (at most once a minute).
   */
  messages(kind: InputKind, options: { limit?: number } = {}): MessageIterator {
    const limit = options.limit ?? DEFAULT_MESSAGE_QUEUE_LIMIT;
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError("messages(): limit must be a positive integer");
    let remove = () => undefined as unknown;
    const queue = new MessageQueue(limit, () => (remove(), this.queues.delete(queue)), this.log, kind);
    remove = this.on(kind, (m) => queue.push(m));
    this.queues.add(queue);
    return queue;
  }

  private targets(kind: OutputKind): string[] {
    const subjects = this.current.bus.targets[kind];
    if (subjects.length === 0) this.log("warn", `no targets for ${kind}; message dropped`);
    return subjects;
  }

  /**
   * Publishes to every target subject of `kind`; returns how many it handed to the connection. While
   * the link is down nothing is published and 0 is returned: nats.js empties its outbound buffer
   * on reconnect attempts, so a message "sent" then would be lost without a trace.
   */
  private publishAll(kind: "DataOut" | "EventOut", message: unknown): number {
    if (!this.isConnected()) {
      if (Date.now() - this.lastOfflineWarning >= 60_000) {
        this.lastOfflineWarning = Date.now();
        this.log("warn", "the message bus is unreachable: messages are not sent (send returns 0)", { kind });
      }
      return 0;
    }
    const subjects = this.targets(kind);
    const payload = encode(message);
    for (const subject of subjects) this.nc.publish(subject, payload);
    return subjects.length;
  }

  /**
   * Whether the bus link is up (the original SDK's `is_connected()`): false from the client's
   * disconnect status until it reconnects, and after close(). While false, sendData/sendEvent send
   * nothing and return 0.
   */
  isConnected(): boolean {
    return this.linkUp && !this.nc.isClosed();
  }

  /** Publishes to every DataOut subject; returns how many subjects it went to (0 while the link is down: not sent). */
  sendData(message: unknown): number {
    return this.publishAll("DataOut", message);
  }

  /** Publishes to every EventOut subject; returns how many subjects it went to (0 while the link is down: not sent). */
  sendEvent(message: unknown): number {
    return this.publishAll("EventOut", message);
  }

  /** Requests on every RequestOut subject and waits for each reply (or its timeout). */
  async sendRequest(message: unknown, options: { timeoutMs?: number } = {}): Promise<RequestResult[]> {
    return Promise.all(
      this.targets("RequestOut").map(async (subject): Promise<RequestResult> => {
        try {
          const reply = await this.nc.request(subject, encode(message), { timeout: options.timeoutMs ?? 5_000 });
          return { subject, ok: true, data: decode(reply.data) };
        } catch (error) {
          return { subject, ok: false, error: (error as Error).message };
        }
      }),
    );
  }

  /** An IODataReport of IoPoints from this app (SrcModule = Name, device = DeviceId). */
  dataReport(tags: Record<string, IoPointInput>, deviceId = this.current.bus.deviceId): IoDataReport {
    return dataReport({
      srcModule: this.current.name,
      messageId: this.nextMessageId(),
      deviceId,
      tags,
      configVersion: this.configVersion || 1,
    });
  }

  // ---- twin properties ---------------------------------------------------------------------

  private onTwinChanges(changes: TwinChange[]): void {
    for (const change of changes) {
      if (change.side !== "desired") continue;
      const key = `${change.group}/${change.name}`;
      const last = this.delivered.get(key);
      // Never twice, never older after newer; version 0 (unknown, Redis without mirror) compares values.
      if (last && (change.version > 0 ? change.version <= last.version : change.value === last.value)) continue;
      if (!last && change.value === null) continue;
      this.delivered.set(key, change);
      for (const observer of this.observers) {
        if (observer.group !== change.group || (observer.name !== undefined && observer.name !== change.name)) continue;
        observer.liveBeforeReplay?.add(key);
        this.callApp("twin callback", observer.callback, [change], { key, version: change.version });
      }
    }
  }

  /**
   * Observes desired properties of a group (one name, or all): the current values at once, then each
   * change once, in order. Returns the stop function. A throw or a rejected promise is logged and
   * the next change is delivered anyway (without waiting for the promise).
   */
  observe(group: string, name: string | undefined, callback: (change: TwinChange) => CallbackResult): () => void {
    const observer: Observer = { group, ...(name !== undefined ? { name } : {}), callback, liveBeforeReplay: new Set() };
    this.observers.add(observer);
    // The current values as of the replay, not of this call: changes delivered in between (e.g. the
    // rest of the batch whose callback called observe) must not be followed by an older value.
    queueMicrotask(() => {
      const live = observer.liveBeforeReplay!;
      delete observer.liveBeforeReplay;
      for (const [key, change] of this.delivered) {
        if (!this.observers.has(observer)) return;
        if (change.group !== group || (name !== undefined && change.name !== name) || change.value === null || live.has(key)) continue;
        this.callApp("twin callback", callback, [change], { key, version: change.version });
      }
    });
    return () => this.observers.delete(observer);
  }

  getDesired(group: string, name: string): Promise<TwinValueRead | undefined> {
    return this.twins.get(group, "desired", name);
  }

  getReported(group: string, name: string): Promise<TwinValueRead | undefined> {
    return this.twins.get(group, "reported", name);
  }

  /** Writes a reported property; booleans are stored as "1"/"0" like the original SDK. */
  setReported(group: string, name: string, value: string | number | boolean): Promise<number> {
    const text = typeof value === "boolean" ? (value ? "1" : "0") : String(value);
    // Readers ignore keys with these names, so the write would never be seen.
    for (const part of [group, name])
      if (isReservedTwinName(part)) return Promise.reject(new TypeError(`"${part}" is reserved and cannot be a twin group or name`));
    return this.twins.put(group, "reported" satisfies TwinSide, name, text);
  }

  /**
   * Called after each config twin: applied (ac 200), rejected as invalid (ac 400) or refused by the
   * broker (ac 403). A throw or a rejected promise is logged; the acknowledgement does not wait for
   * it.
   */
  onConfig(callback: (config: AppConfig, status: ConfigStatus) => CallbackResult): () => void {
    this.configListeners.add(callback);
    return () => this.configListeners.delete(callback);
  }

  /**
   * SDK 3.x `connect()` reads the config twin and applies it before returning, so a send right after
   * connect already uses the twin's Targets. The watch delivers the same value too; whichever comes
   * first applies it (`onTwinChanges` never delivers a version twice) and this waits for that.
   */
  private async applyCurrentConfig(): Promise<void> {
    const current = await this.twins.get(CONFIG_GROUP, "desired", this.current.name);
    // Whatever the watch delivered meanwhile is at least as new (Redis without the mirror has no
    // versions to compare: an older read must not be applied after it).
    const delivered = this.delivered.has(`${CONFIG_GROUP}/${this.current.name}`);
    if (current && !delivered)
      this.onTwinChanges([
        { group: CONFIG_GROUP, side: "desired", name: this.current.name, value: current.value, version: current.version },
      ]);
    await this.configApplied;
  }

  private async applyConfigTwin(change: TwinChange): Promise<void> {
    if (change.value === null) return;
    let status: ConfigStatus;
    try {
      const next = parseAppConfigText(change.value, this.env);
      if (next.name !== this.current.name) throw new Error(`Name: must stay "${this.current.name}" (the twin property is named after it)`);
      // The connection and the twin store stay as started: a new server or store needs a restart.
      const applied = { ...next, bus: { ...next.bus, servers: this.current.bus.servers }, kv: this.current.kv };
      // Subscriptions first: a config the broker refuses leaves the running one (and its subscriptions) in place.
      await this.resubscribe(applied);
      this.current = applied;
      this.configVersion = change.version;
      status = { ac: 200, av: change.version, ad: "applied" };
      this.log("info", "configuration applied from the twin", { version: change.version });
    } catch (error) {
      status = { ac: error instanceof SubscriptionRefusedError ? 403 : 400, av: change.version, ad: (error as Error).message };
      this.log("warn", "configuration from the twin ignored", { version: change.version, error: (error as Error).message });
    }
    // The app applies it first: the acknowledgement below means the app runs with it.
    for (const listener of this.configListeners)
      this.callApp("onConfig listener", listener, [this.current, status], { version: change.version });
    if (status.ac === 200)
      await this.setReported(CONFIG_GROUP, this.current.name, change.value).catch((error: Error) =>
        this.log("warn", "cannot report the applied config", { error: error.message }),
      );
    await this.setReported(CONFIG_GROUP, configStatusName(this.current.name), JSON.stringify(status)).catch((error: Error) =>
      this.log("warn", "cannot report config status", { error: error.message }),
    );
  }

  async close(): Promise<void> {
    await this.twins.close();
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
    // Like a nats.js subscription's iterator: a loop over messages() finishes once the client is closed.
    for (const queue of this.queues) queue.end();
    this.queues.clear();
  }
}

/** The broker refused a subscription a new config asks for (e.g. a permissions violation). */
class SubscriptionRefusedError extends Error {
  override name = "SubscriptionRefusedError";
}

/** Dials until a connection is made or `signal` aborts; a dial still in flight then is closed when it lands. */
async function dialUntilConnected(
  dial: () => Promise<NatsConnection>,
  signal: AbortSignal | undefined,
  waitMs: number,
  log: SdkLog,
  what: string,
): Promise<NatsConnection> {
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    const dialing = dial();
    try {
      return await untilAborted(dialing, signal);
    } catch (error) {
      if (signal?.aborted) {
        void dialing.then((late) => late.close()).catch(() => undefined);
        throw signal.reason;
      }
      if (attempt === 0) log("warn", `cannot reach ${what} yet; retrying until it answers`, { error: (error as Error).message });
      await sleep(waitMs, undefined, signal ? { signal } : undefined);
    }
  }
}

/** `work`, or the signal's reason as soon as it aborts. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => (signal.removeEventListener("abort", onAbort), resolve(value)),
      (error: unknown) => (signal.removeEventListener("abort", onAbort), reject(error)),
    );
  });
}
