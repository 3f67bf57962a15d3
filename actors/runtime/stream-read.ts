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
 * Hands every message matching `filter` to `onMessage`, in stream order, and returns the last
 * sequence seen (0: nothing matched).
 *
 * The read ends once it has caught up with the stream (a message with nothing pending after it), or
 * after twice as many messages as matched when it began (plus 100) while writers keep it from
 * catching up: it does not stop at the count that matched, because a message removed while the read
 * runs (a rewritten KV key, a limit reached) is replaced by later ones.
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
 * Makes a read's consumer (ordered: ephemeral, R1, in memory), asking again while none answers.
 * nats-server up to 2.11 (2.9 here) may place an R1 ephemeral consumer of a replicated stream on a
 * replica that is offline, and then never answers the create (nats-io/nats-server#7165): with one
 * server of three down, a third of the reads would wait out the API timeout and the edge would
 * answer 504. So, on a replicated stream, a create not answered within READ_CONSUMER_HEDGE_MS is
 * asked for again under another name (placed at random again) while the earlier ones may still
 * answer, at most READ_HEDGES_MAX extra ones at once in the process. The first consumer made serves
 * the read; the others are deleted: at once by name (an unanswered one is still the meta leader's to
 * delete), again if one is made later, and again if one fails after the read is served (its delete
 * by name may have come before its creation). A create that fails (no such stream, not allowed)
 * while no consumer has been made fails the read. Healthy, the first answers within ms and nothing
 * more is asked.
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
