/**
 * What the twin mirror writes, as plain data: one Redis transaction per visible JetStream change set
 * (a whole commit at once, so a device reading on a keyspace notification never sees half a PUT).
 */
import { REDIS_KEYSPACE_PREFIX, REDIS_TWIN_VERSIONS, parseTwinKey } from "../../subjects/twins.ts";
import type { TwinEntry } from "../../platform/twin-commit.ts";

export type RedisOp =
  | { op: "set"; key: string; value: string }
  | { op: "del"; key: string }
  | { op: "hset"; key: string; field: string; value: string }
  | { op: "publish"; channel: string; message: string };

/** Desired entries → the Redis operations of one MULTI (value and its version side by side). */
export function desiredToRedis(entries: TwinEntry[]): RedisOp[] {
  const ops: RedisOp[] = [];
  for (const entry of entries) {
    const parsed = parseTwinKey(entry.key);
    if (parsed?.kind !== "property" || parsed.side !== "desired") continue;
    ops.push(entry.operation === "PUT" ? { op: "set", key: entry.key, value: entry.value } : { op: "del", key: entry.key });
    ops.push({ op: "hset", key: REDIS_TWIN_VERSIONS, field: entry.key, value: String(entry.revision) });
    // Redis notifies no DEL of a key it does not hold (a Redis that restarted empty): the device is
    // told of the delete all the same, as the keyspace event it listens to.
    if (entry.operation !== "PUT") ops.push({ op: "publish", channel: `${REDIS_KEYSPACE_PREFIX}${entry.key}`, message: "del" });
  }
  return ops;
}

/** A Redis key the mirror copies back to JetStream: reported properties only. */
export function isReportedKey(key: string): boolean {
  const parsed = parseTwinKey(key);
  return parsed?.kind === "property" && parsed.side === "reported";
}
