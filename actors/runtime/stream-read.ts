/**
 * Reading a stream's messages once, on a request path: a consumer made for the read and deleted
 * after it, fetches until the read has caught up with the stream. KV reads (`kv.ts`) and the
 * notification journal's listings share it.
 */
import { DeliverPolicy, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";

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

/**
 * Hands every message matching `filter` to `onMessage`, in stream order, and returns the last
 * sequence seen (0: nothing matched).
 *
 * The read ends once it has caught up with the stream (a message with nothing pending after it), or
 * after twice as many messages as matched when it began (plus 100) while writers keep it from
 * catching up: it does not stop at the count that matched, because a message removed while the read
 * runs (a rewritten KV key, a limit reached) is replaced by later ones.
 */
export async function readStream(js: JetStreamClient, stream: string, options: StreamReadOptions, onMessage: (msg: JsMsg) => void): Promise<number> {
  const startSeq = options.startSeq ?? 0;
  const consumer = await js.consumers.get(stream, {
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
      for await (const msg of await consumer.fetch({ max_messages: Math.min(limit - received, READ_FETCH_MAX), expires: READ_EXPIRES_MS })) {
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
