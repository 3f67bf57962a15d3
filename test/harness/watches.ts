/**
 * Ends every KV watch of a connection the way nats.js ends one it gives up on: the watch's
 * subscription closes, and its iterator returns without an error. (@nats-io/jetstream 3.4 gives up a
 * watch that received nothing after 30 failed consumer re-creations, about two minutes without
 * JetStream; this gets there at once.) Reaches into nats-core's connection: a KV watch is an ordered
 * push consumer delivering to `<inbox prefix>.<nuid>.<serial>`. A pull consumer's iterator reads
 * from a subject of the same form, so one open on the connection at that moment ends too: call this
 * on a connection running none, or expect those re-opened as well. Returns how many it ended.
 */
import type { NatsConnection } from "@nats-io/nats-core";

type Sub = { getSubject(): string; unsubscribe(): void };

export function endKvWatches(nc: NatsConnection): number {
  const subs = (nc as unknown as { protocol: { subscriptions: { all(): Sub[] } } }).protocol.subscriptions.all();
  const watches = subs.filter((sub) => /^_INBOX[^.]*\.[^.]+\.\d+$/.test(sub.getSubject()));
  for (const sub of watches) sub.unsubscribe();
  return watches.length;
}
