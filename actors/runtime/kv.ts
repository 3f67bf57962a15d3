/**
 * The JetStream KV idioms every actor's store uses: JSON values, "a live entry" (a PUT with a body, not
 * a delete marker), versioned reads and compare-and-set writes that report a lost race as `false`.
 */
import { Bucket, type KV, type KvEntry } from "@nats-io/kv";
import type { JsMsg } from "@nats-io/jetstream";
import { readStream } from "./stream-read.ts";

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
  return (
    /wrong last sequence|key exists|10071|10164/i.test(text) ||
    (error as { api_error?: { err_code?: number } })?.api_error?.err_code === 10071
  );
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
  /** Every revision the bucket holds, oldest first; else the last revision of each key (read from all of them). */
  history?: boolean;
  /** Only keys, revisions and operations: values read as empty. */
  headersOnly?: boolean;
};

/**
 * Reads a bucket's entries with consumers deleted after the read, instead of KV's `history()`/`keys()`, whose consumers
 * stay on the server for minutes and follow later writes (docs/operations.md#kv-reads). Entries come deduplicated (by key,
 * or by revision for history), in revision order.
 */
export async function readKv(kv: KV, options: KvReadOptions = {}): Promise<KvEntry[]> {
  // Kvm's buckets are this class: its stream, subject prefix and key codec are public.
  if (!(kv instanceof Bucket)) throw new TypeError("readKv reads buckets opened with Kvm");
  const filter = kv.fullKeyName(kv.encodeKey(options.key ?? ">"));
  const found = new Map<string | number, KvEntry>();
  const add = (entry: KvEntry) => {
    const id = options.history ? entry.revision : entry.key;
    if ((found.get(id)?.revision ?? 0) < entry.revision) found.set(id, entry);
  };
  const last = await readPass(kv, filter, options.headersOnly, 0, add);
  if (last === 0) return [];
  // A key whose messages were all replaced during the pass can be missed by it: the keys the stream holds now tell,
  // and the tail is then read in order, so a twin's commit records come with its values (docs/operations.md#kv-reads).
  const missing = async () => {
    const seen = new Set<string>();
    for (const entry of found.values()) seen.add(entry.key);
    const subjects = (await kv.jsm.streams.info(kv.stream, { subjects_filter: filter })).state.subjects ?? {};
    return Object.keys(subjects)
      .map((subject) => kv.decodeKey(subject.slice(kv.prefixLen)))
      .filter((key) => !seen.has(key));
  };
  if ((await missing()).length > 0) {
    await readPass(kv, filter, options.headersOnly, last + 1, add);
    if (!options.history) {
      for (const key of await missing()) {
        const entry = await kv.get(key);
        if (entry) add(entry);
      }
    }
  }
  return [...found.values()].sort((a, b) => a.revision - b.revision);
}

/**
 * One pass over the bucket's stream from `startSeq` (0: the start); returns the last sequence seen (0: none). Last values
 * too come from every held revision: last-per-subject delivery missed keys rewritten during the read (docs/operations.md#kv-reads).
 */
function readPass(
  kv: Bucket,
  filter: string,
  headersOnly: boolean | undefined,
  startSeq: number,
  add: (entry: KvEntry) => void,
): Promise<number> {
  return readStream(kv.js, kv.stream, { filter, startSeq, headersOnly }, (msg) => add(kvEntryOf(kv, msg)));
}

const decoder = new TextDecoder();

/** A stream message of a bucket as a KV entry, as the bucket's own reads would give it. */
function kvEntryOf(kv: Bucket, msg: JsMsg): KvEntry {
  const rawKey = msg.subject.slice(kv.prefixLen);
  const value = kv.codec.value.decode(msg.data);
  const size = msg.headers?.get("Nats-Msg-Size");
  const operation =
    msg.headers?.get("Nats-Marker-Reason") === "MaxAge" ? "PURGE" : ((msg.headers?.get("KV-Operation") || "PUT") as KvEntry["operation"]);
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
