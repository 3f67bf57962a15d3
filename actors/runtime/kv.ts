/**
 * The JetStream KV idioms every actor's store uses: JSON values, "a live entry" (a PUT with a body, not
 * a delete marker), versioned reads and compare-and-set writes that report a lost race as `false`.
 */
import { Bucket, type KV, type KvEntry } from "@nats-io/kv";
import { DeliverPolicy, type JsMsg } from "@nats-io/jetstream";

const encoder = new TextEncoder();

export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));

export type Versioned<T> = { value: T; revision: number };

/** A PUT with a body: deletes and purges leave markers that read as absent. */
export function isLive(entry: KvEntry | null | undefined): entry is KvEntry {
  return !!entry && entry.operation === "PUT" && entry.length > 0;
}

export async function readJson<T>(kv: KV, key: string): Promise<T | undefined> {
  const entry = await kv.get(key);
  return isLive(entry) ? entry.json<T>() : undefined;
}

export async function readVersioned<T>(kv: KV, key: string): Promise<Versioned<T> | undefined> {
  const entry = await kv.get(key);
  return isLive(entry) ? { value: entry.json<T>(), revision: entry.revision } : undefined;
}

/** nats-server's answers to a create/update whose expected revision no longer holds. */
export function isWrongRevision(error: unknown): boolean {
  const text = String((error as Error)?.message ?? error);
  return /wrong last sequence|key exists|10071|10164/i.test(text) || (error as { api_error?: { err_code?: number } })?.api_error?.err_code === 10071;
}

/**
 * Compare-and-set: create when the last read saw nothing (`existed` false), else update from
 * `revision`. False when another writer got there first; other failures throw.
 */
export async function casPut(kv: KV, key: string, value: unknown, revision: number, existed = revision > 0): Promise<boolean> {
  try {
    if (existed) await kv.update(key, encodeJson(value), revision);
    else await kv.create(key, encodeJson(value));
    return true;
  } catch (error) {
    if (isWrongRevision(error)) return false;
    throw error;
  }
}

export type KvReadOptions = {
  /** A key or a key pattern (`a.*`, `a.>`); every key when absent. */
  key?: string;
  /** Every revision the bucket holds, oldest first; else the last revision of each key. */
  history?: boolean;
  /** Only keys, revisions and operations: values read as empty. */
  headersOnly?: boolean;
};

/** The server drops a read's consumer this long after it went idle (if the delete below was lost). */
const READ_CONSUMER_IDLE_MS = 10_000;
/** How long a read waits for messages that vanished (purged, expired) after it began. */
const READ_EXPIRES_MS = 2_000;

/**
 * Reads a bucket's entries in one pass, as they were when the read began, with a consumer deleted
 * after the read. Used instead of KV's `history()`/`keys()` on every request path: their ordered
 * push consumers stay on the server for five minutes after each read (measured: 200 reads, 200
 * consumers, each of which every later write to the bucket has to visit), and they follow writes
 * made after the read began, so a read of a bucket that is written without pause never ends.
 * The result is a prefix of the bucket's stream: it ends after as many messages as matched when it
 * began, or as soon as it has caught up.
 */
export async function readKv(kv: KV, options: KvReadOptions = {}): Promise<KvEntry[]> {
  // Kvm's buckets are this class: its stream, subject prefix and key codec are public.
  if (!(kv instanceof Bucket)) throw new TypeError("readKv reads buckets opened with Kvm");
  const consumer = await kv.js.consumers.get(kv.stream, {
    filter_subjects: kv.fullKeyName(kv.encodeKey(options.key ?? ">")),
    deliver_policy: options.history ? DeliverPolicy.All : DeliverPolicy.LastPerSubject,
    headers_only: options.headersOnly,
    inactive_threshold: READ_CONSUMER_IDLE_MS,
  });
  try {
    const matched = (await consumer.info(true)).num_pending;
    const out: KvEntry[] = [];
    if (matched === 0) return out;
    for await (const msg of await consumer.fetch({ max_messages: matched, expires: READ_EXPIRES_MS })) {
      out.push(kvEntryOf(kv, msg));
      if (msg.info.pending === 0 || out.length >= matched) break;
    }
    return out;
  } finally {
    void consumer.delete().catch(() => undefined);
  }
}

const decoder = new TextDecoder();

/** A stream message of a bucket as a KV entry, as the bucket's own reads would give it. */
function kvEntryOf(kv: Bucket, msg: JsMsg): KvEntry {
  const rawKey = msg.subject.slice(kv.prefixLen);
  const value = kv.codec.value.decode(msg.data);
  const size = msg.headers?.get("Nats-Msg-Size");
  const operation = msg.headers?.get("Nats-Marker-Reason") === "MaxAge" ? "PURGE" : ((msg.headers?.get("KV-Operation") || "PUT") as KvEntry["operation"]);
  return {
    bucket: kv.bucket,
    key: kv.decodeKey(rawKey),
    rawKey,
    value,
    created: new Date(Math.floor(msg.info.timestampNanos / 1e6)),
    revision: msg.seq,
    delta: msg.info.pending,
    operation,
    length: size ? Number.parseInt(size, 10) : msg.data.length,
    json: <T>() => JSON.parse(decoder.decode(value)) as T,
    string: () => decoder.decode(value),
  };
}
