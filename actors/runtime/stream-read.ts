/**
 * Reading a stream's messages once, on a request path: a consumer made for the read and deleted
 * after it, fetches until the read has caught up with the stream. KV reads (`kv.ts`) and the
 * notification journal's listings share it.
 */
import { nuid } from "@nats-io/nats-core";
import { DeliverPolicy, type Consumer, type JetStreamClient, type JsMsg, type OrderedConsumerOptions } from "@nats-io/jetstream";

export type StreamReadOptions = {
  /** Subject filter (wildcards allowed). */
  filter: string;
  /** First stream sequence to read; from the start when absent or 0. */
  startSeq?: number;
  /** Only headers (plus `Nats-Msg-Size`): bodies read as empty. */
  headersOnly?: boolean;
};

/** The server drops a read's consumer this long after it went idle (if the delete below was lost). */
const READ_CONSUMER_IDLE_MS = 10_000;
/** How long one fetch waits for its messages; a read goes on with another fetch while messages come. */
const READ_EXPIRES_MS = 2_000;
/** Messages asked for per fetch. */
export const READ_FETCH_MAX = 10_000;
/** How long a read's consumer may take to be made before another is asked for (it takes ms when it answers). */
const READ_CONSUMER_HEDGE_MS = 250;
/** Consumers asked for at most per read while none answers (each one placed at random again). */
const READ_CONSUMER_ATTEMPTS = 8;
/** Extra consumers asked for at once in this process: when the servers are slow rather than down, hedging must not pile on. */
const READ_HEDGES_MAX = 32;
let hedgesInFlight = 0;

/**
 * Whether a stream is replicated, learned once per connection and stream: only then can a read's
 * consumer land on a server that is down (one server's stream lives on that server). "asking"
 * while the first answer is awaited; a failed answer counts as replicated (hedging stays possible).
 */
const replication = new WeakMap<object, Map<string, boolean | "asking">>();
function replicationOf(js: JetStreamClient, stream: string): boolean | "asking" {
  const connection = (js as { nc?: object }).nc ?? js;
  let streams = replication.get(connection);
  if (!streams) replication.set(connection, (streams = new Map()));
  const known = streams.get(stream);
  if (known !== undefined) return known;
  if (streams.size >= 1000) return true;
  const map = streams.set(stream, "asking");
  js.jetstreamManager(false)
    .then((jsm) => jsm.streams.info(stream))
    .then(
      (info) => map.set(stream, info.config.num_replicas > 1),
      () => map.set(stream, true),
    );
  return "asking";
}

/**
 * Hands every message matching `filter` to `onMessage`, in stream order; returns the last sequence seen (0: none).
 * Ends once caught up, or after 2 × matched + 100 while writers keep it behind: a message removed during the read
 * is replaced by later ones, so the matched count is no end (docs/operations.md#read-consumers).
 */
export async function readStream(
  js: JetStreamClient,
  stream: string,
  options: StreamReadOptions,
  onMessage: (msg: JsMsg) => void,
): Promise<number> {
  const startSeq = options.startSeq ?? 0;
  const consumer = await makeReadConsumer(js, stream, {
    filter_subjects: options.filter,
    ...(startSeq > 0 ? { opt_start_seq: startSeq } : { deliver_policy: DeliverPolicy.All }),
    headers_only: options.headersOnly,
    inactive_threshold: READ_CONSUMER_IDLE_MS,
  });
  try {
    const matched = (await consumer.info(true)).num_pending;
    let last = 0;
    if (matched === 0) return last;
    const limit = 2 * matched + 100;
    let received = 0;
    let caughtUp = false;
    while (!caughtUp && received < limit) {
      let fetched = 0;
      for await (const msg of await consumer.fetch({
        max_messages: Math.min(limit - received, READ_FETCH_MAX),
        expires: READ_EXPIRES_MS,
      })) {
        fetched++;
        received++;
        last = msg.seq;
        onMessage(msg);
        if (msg.info.pending === 0) {
          caughtUp = true;
          break;
        }
      }
      // Nothing came within the wait: what was pending vanished (purged, expired).
      if (fetched === 0) break;
    }
    return last;
  } finally {
    void consumer.delete().catch(() => undefined);
  }
}

/**
 * Makes a read's consumer (ordered: ephemeral, R1, in memory), asking again under another name while none answers:
 * nats-server up to 2.11 may place it on an offline replica and never answer. The first made serves the read, the
 * spares are deleted (docs/operations.md#read-consumers).
 */
function makeReadConsumer(js: JetStreamClient, stream: string, options: Partial<OrderedConsumerOptions>): Promise<Consumer> {
  replicationOf(js, stream); // learned while the first create runs
  return new Promise((resolve, reject) => {
    const names: string[] = [];
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const discard = (name: string) =>
      void js
        .jetstreamManager(false)
        .then((jsm) => jsm.consumers.delete(stream, name))
        .catch(() => undefined);
    const settle = (winner?: string) => {
      settled = true;
      clearTimeout(timer);
      for (const name of names) if (name !== winner) discard(name);
    };
    const ask = (hedge: boolean) => {
      if (settled) return;
      const prefix = nuid.next();
      const name = `${prefix}_1`; // the name nats.js gives an ordered consumer's first instance
      names.push(name);
      if (hedge) hedgesInFlight++;
      const done = () => void (hedge && hedgesInFlight--);
      js.consumers.get(stream, { ...options, name_prefix: prefix }).then(
        (consumer) => {
          done();
          if (settled) return void consumer.delete().catch(() => undefined);
          settle(name);
          resolve(consumer);
        },
        (error: unknown) => {
          done();
          if (settled) return discard(name);
          settle();
          reject(error);
        },
      );
      if (names.length < READ_CONSUMER_ATTEMPTS) hedgeLater();
    };
    const hedgeLater = () => {
      timer = setTimeout(() => {
        if (settled) return;
        const replicated = replicationOf(js, stream);
        if (replicated === false) return;
        if (replicated === "asking" || hedgesInFlight >= READ_HEDGES_MAX) return hedgeLater();
        ask(true);
      }, READ_CONSUMER_HEDGE_MS);
    };
    ask(false);
  });
}
