/**
 * KV buckets that come back when deleted on the server: an operation that fails on a bucket whose
 * stream is gone makes it again with the options it started with and runs once more (Guard), and a
 * stream-deleted advisory can make it again before anyone fails (onStreamDeleted).
 */
import { NoRespondersError, type NatsConnection } from "@nats-io/nats-core";
import type { Kvm, KvOptions } from "@nats-io/kv";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";
import { streamInfoIfAny } from "./storage.ts";
import { isWrongRevision } from "./kv.ts";

/**
 * Runs one operation on a bucket. When it fails and the bucket's stream is gone, the bucket is made
 * again with the options it started with and the operation is tried once more there; any other
 * failure (NATS away, a timeout) is thrown for the caller to retry.
 */
export type Guard = <T>(op: () => Promise<T>) => Promise<T>;

/** No recovery: the operation as it is (stores over a bucket a test opened itself). */
export const unguarded: Guard = (op) => op();

/** The subject prefix of nats-server's stream-deleted advisories (then `.<stream>`). */
const STREAM_DELETED_ADVISORY = "$JS.EVENT.ADVISORY.STREAM.DELETED";

/** Calls `onDeleted` with the name of each stream the server deletes, until unsubscribed. */
export function onStreamDeleted(nc: NatsConnection, onDeleted: (stream: string) => void, stream = "*") {
  return nc.subscribe(`${STREAM_DELETED_ADVISORY}.${stream}`, {
    callback: (error, msg) => {
      if (!error) onDeleted(msg.subject.slice(STREAM_DELETED_ADVISORY.length + 1));
    },
  });
}

/**
 * How long after its deletion is seen a stream is made again: nats-server 2.9 lost writes to a bucket made again
 * within a millisecond of its deletion (docs/operations.md#buckets-and-streams-made-again).
 */
export const RECREATE_DELAY_MS = 250;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits RECREATE_DELAY_MS: before making again a stream that is not a bucket (a work queue). */
export const recreateDelay = () => pause(RECREATE_DELAY_MS);

export type RecreatingBucket = { guard: Guard; recreate(): Promise<unknown> };

/**
 * Runs `op` on a stream (not a bucket); when it fails because the stream is gone, makes it again with `make` and runs
 * `op` once more. The operation's own answers (`isOwn`: a conflict, a full queue) are thrown without a stream lookup.
 */
export async function withStream<T>(
  jsm: JetStreamManager,
  stream: string,
  make: () => Promise<unknown>,
  op: () => Promise<T>,
  isOwn: (error: unknown) => boolean = () => false,
): Promise<T> {
  try {
    return await op();
  } catch (error) {
    if (isOwn(error) || (await streamInfoIfAny(jsm, stream).catch(() => true)) !== undefined) throw error;
    await recreateDelay();
    await make();
    return op();
  }
}

/**
 * Makes each bucket (by name) again as soon as the server announces its deletion, until unsubscribed: a read of a
 * deleted bucket would time out, longer than the edge waits. The guards catch what the advisory missed
 * (docs/operations.md#buckets-and-streams-made-again).
 */
export function recreateOnDeletion(nc: NatsConnection, buckets: Record<string, RecreatingBucket>, log?: Logger) {
  return onStreamDeleted(nc, (stream) => {
    const bucket = stream.startsWith("KV_") ? stream.slice(3) : undefined;
    const recovery = bucket === undefined ? undefined : buckets[bucket];
    recovery
      ?.recreate()
      .catch((err: unknown) => log?.warn({ err, bucket }, "a deleted bucket could not be made again yet; its next use tries again"));
  });
}

/** KV methods that talk to the bucket's stream: each runs under the guard. */
const GUARDED_KV_METHODS = new Set(["get", "put", "create", "update", "delete", "purge", "status"]);

/**
 * `kv` with its reads and writes run under `guard`, for stores that use a bucket in many places:
 * the handle is the same bucket (readKv and instanceof still see a Kvm bucket), only those calls are
 * wrapped. Reads that are not methods (readKv) take the guard themselves.
 */
export function guardedKv<K extends object>(kv: K, guard: Guard): K {
  return new Proxy(kv, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof prop !== "string" || !GUARDED_KV_METHODS.has(prop) || typeof value !== "function") return value;
      return (...args: unknown[]) => guard(() => (value as (...a: unknown[]) => Promise<unknown>).apply(receiver, args));
    },
  });
}

/**
 * How long an operation waits before its bucket's stream is looked up: a direct get of a deleted bucket is never
 * answered, only timed out, so the first read after a missed advisory answered 504 (docs/operations.md#buckets-and-streams-made-again).
 */
export const STREAM_PROBE_MS = 300;

class StreamGone extends Error {}

/** Whether the server had no responder for the operation (its stream was gone when it was sent). */
function unanswered(error: unknown): boolean {
  for (let e = error; e instanceof Error; e = e.cause) if (e instanceof NoRespondersError) return true;
  return false;
}

/** Operations under way that may need their stream looked up, oldest first (a Set keeps insertion order). */
const watched = new Set<{ since: number; gone: () => Promise<boolean>; fail: (error: Error) => void; probed: boolean }>();
let sweeper: ReturnType<typeof setInterval> | undefined;

/** Looks up the stream of each operation waiting STREAM_PROBE_MS or more, once; stops when none waits. */
function sweep(): void {
  const now = performance.now();
  for (const watch of watched) {
    if (now - watch.since < STREAM_PROBE_MS) break;
    if (watch.probed) continue;
    watch.probed = true;
    void watch.gone().then(
      (yes) => yes && watch.fail(new StreamGone("the bucket's stream is gone")),
      () => undefined,
    );
  }
  if (watched.size === 0 && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/**
 * `attempt`'s outcome, or a StreamGone failure when the stream is found missing while it waits (looked up after
 * STREAM_PROBE_MS, within a third of that more). One shared sweep instead of a timer and a race per operation:
 * most operations are reads from memory that settle at once, and those cost a Set entry.
 */
export function unlessGone<T>(attempt: Promise<T>, gone: () => Promise<boolean>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const watch = {
      since: performance.now(),
      gone,
      // Given up on: the attempt may never settle (a direct get of a deleted stream), so it is no longer watched.
      fail: (error: Error) => {
        watched.delete(watch);
        reject(error);
      },
      probed: false,
    };
    watched.add(watch);
    if (!sweeper) {
      sweeper = setInterval(sweep, STREAM_PROBE_MS / 3);
      sweeper.unref?.();
    }
    attempt.then(
      (value) => {
        watched.delete(watch);
        resolve(value);
      },
      (error: unknown) => {
        watched.delete(watch);
        reject(error);
      },
    );
  });
}

/** Work around a re-creation: `before` it (after the pause; operations wait for it), `after` it (operations go on meanwhile). */
export type RecreationHooks = { before?: () => Promise<unknown>; after?: () => Promise<unknown> };

/**
 * A bucket made again when deleted (an operator's `nats kv del`, a lost store), by its guard or at once. The handle
 * opened at start keeps working on the new bucket: it names the stream, it holds nothing of it.
 * Concurrent re-creations share one.
 */
export function recreatingBucket(
  jsm: JetStreamManager,
  kvm: Kvm,
  bucket: string,
  options: Partial<KvOptions>,
  log?: Logger,
  hooks: RecreationHooks = {},
): RecreatingBucket {
  let pending: Promise<unknown> | undefined;
  /** Re-creations finished: an operation that failed while one ran is tried again, not thrown. */
  let generation = 0;
  const recreate = () => {
    if (!pending) {
      log?.warn({ bucket }, `KV bucket ${bucket} was deleted; making it again`);
      pending = pause(RECREATE_DELAY_MS)
        .then(hooks.before)
        // Another process making it at the same moment can fail this create ("subjects overlap"): made is made.
        .then(() =>
          kvm.create(bucket, options).catch(async (error: unknown) => {
            if (!(await streamInfoIfAny(jsm, `KV_${bucket}`).catch(() => undefined))) throw error;
          }),
        )
        .then(() => generation++)
        .finally(() => (pending = undefined));
      // Outside `pending`: `after` may use the bucket, whose guarded operations wait for `pending`.
      if (hooks.after) {
        const after = hooks.after;
        pending.then(after).catch((err: unknown) => log?.warn({ err, bucket }, `KV bucket ${bucket}: what follows its re-creation failed`));
      }
    }
    return pending;
  };
  let probing: Promise<boolean> | undefined;
  /** One stream lookup at a time for the bucket, shared by the operations waiting on it; a failed lookup (NATS away) is "not gone". */
  const gone = () =>
    (probing ??= streamInfoIfAny(jsm, `KV_${bucket}`)
      .then(
        (info) => info === undefined,
        () => false,
      )
      .finally(() => (probing = undefined)));
  return {
    recreate,
    async guard(op) {
      // Deleted and being made again: wait for it rather than send a read no stream will answer.
      if (pending) await pending.catch(() => undefined);
      const before = generation;
      try {
        // Made again while the operation waited counts as gone too: a read sent to the deleted stream
        // is not answered by the new one.
        return await unlessGone(op(), async () => pending !== undefined || generation !== before || (await gone()));
      } catch (error) {
        // A compare-and-set that lost is the bucket answering: no stream lookup for it (contention).
        if (isWrongRevision(error)) throw error;
        if (pending) await pending;
        else if (generation === before) {
          // The lookup's own failure (NATS away) leaves the first error to be thrown. A probe that found
          // the stream gone abandoned the operation: the stream there now (another process made it
          // again) is where it runs once more, not a reason to throw the probe's own error.
          const there = !(await gone());
          // No responders: no stream took the operation when it was sent (another process has made the
          // bucket again since), so it did nothing and runs once more there.
          if (there && !(error instanceof StreamGone) && !unanswered(error)) throw error;
          if (!there) await recreate();
        }
        return op();
      }
    },
  };
}
