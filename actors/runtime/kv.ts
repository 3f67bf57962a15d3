/**
 * The JetStream KV idioms every actor's store uses: JSON values, "a live entry" (a PUT with a body, not
 * a delete marker), versioned reads and compare-and-set writes that report a lost race as `false`.
 */
import type { KV, KvEntry } from "@nats-io/kv";

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
