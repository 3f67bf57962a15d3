/**
 * Republished writes: a viewed bucket's stream republishes each write's headers (subjects.bucketWrites) before it
 * acknowledges the write, so a process that hears them knows of every acknowledged write before any request that
 * write could have caused reaches it over the same connection (docs/operations.md#memory-views).
 */
import type { StreamConfig } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";

/**
 * How long a look at the stream vouches for the republished writes: what is no write (a stream purged, made again,
 * or a message aged out) is noticed by the next look, at most this late.
 */
export const NOTES_TRUSTED_MS = 1_000;

/**
 * The subject a stream republishes the writes of `keys` (a key or pattern) to, when it does so (set when the bucket was
 * made: nats-server 2.9 cannot add it to a stream later); undefined otherwise.
 */
export function notesSubject(config: StreamConfig, keys = ">"): string | undefined {
  const republish = config.republish;
  if (!republish?.headers_only || !republish.dest.endsWith(".>") || !config.subjects?.includes(republish.src)) return undefined;
  return `${republish.dest.slice(0, -1)}${keys}`;
}

/** The stream sequence a republished write carries. */
export const notedSequence = (headers: { get(name: string): string } | undefined): number => Number(headers?.get("Nats-Sequence") ?? 0);

/**
 * Whether the order that makes notes trustworthy holds on this connection: across a cluster's routes a note and a
 * request may overtake each other.
 */
export const notesOrdered = (nc: NatsConnection): boolean => !nc.info?.cluster;

/**
 * The connection's current session with its server, compared by identity: nats.js parses a new INFO for each connection
 * and reconnection (and for the server's updates), so notes heard under one session vouch for nothing under another (a
 * reconnect may have lost some). Undefined while disconnected or closed.
 */
export const connectionSession = (nc: NatsConnection): object | undefined => nc.info;
