import type { CarriedEvent, CausingTrace, DeliveryBatch } from "../../../subjects/notifications.ts";
import { carriedPart, type StoredEvent } from "../journal.ts";
import { matches } from "../matching.ts";
import { delayBefore, type Schedule } from "../schedule.ts";
import type { SubscriptionRecord } from "../store.ts";

/** Most events matched together in one round. */
export const ROUND_EVENTS = 256;
/** Most events in one batch, and its size budget (DELIVERIES takes messages up to 64 KiB). */
export const BATCH_EVENTS = 64;
export const BATCH_BYTES = 48 * 1024;
/** Events up to this size (JSON bytes) travel inside the batch; larger ones are read from EVENTS. */
export const CARRY_BYTES = 4 * 1024;
/** What one event costs in a batch besides its carried body: ids, sequence, JSON punctuation. */
const ENTRY_BYTES = 96;

/** An event of the round, with what it adds to a batch. */
export type Pending<M> = { msg: M; event: StoredEvent; carried: CarriedEvent | undefined; trace: CausingTrace; bytes: number };

/**
 * The event as it goes into batches: carried when small enough, `storedBytes` being its size as published, with the
 * trace of the request that published it.
 */
export function pendingOf<M>(msg: M, event: StoredEvent, storedBytes: number, trace: CausingTrace = {}): Pending<M> {
  // Measured as it is written into the batch, not as published: re-serializing can grow a body
  // (`1e20` is written out as 21 digits), and a batch over DELIVERIES' message limit fails its round for good.
  const carried = storedBytes <= CARRY_BYTES ? carriedPart(event) : undefined;
  const carriedBytes = carried ? Buffer.byteLength(JSON.stringify(carried)) : 0;
  const small = carried !== undefined && carriedBytes <= CARRY_BYTES;
  const traceBytes = (trace.traceparent?.length ?? 0) + (trace.tracestate?.length ?? 0) + (trace.traceparent ? 32 : 0);
  return { msg, event, carried: small ? carried : undefined, trace, bytes: (small ? carriedBytes : 0) + ENTRY_BYTES + traceBytes };
}

/** The round's events grouped by the subscriptions they match, in the order the events came. */
export function bySubscription<M>(
  taken: Pending<M>[],
  subscribersOf: (partition: string, type: string) => Iterable<SubscriptionRecord>,
): Array<{ subscription: SubscriptionRecord; items: Pending<M>[] }> {
  const groups = new Map<string, { subscription: SubscriptionRecord; items: Pending<M>[] }>();
  for (const p of taken) {
    for (const subscription of subscribersOf(p.event.partition, p.event.type)) {
      if (!matches(subscription, p.event)) continue;
      let entry = groups.get(subscription.subscription_id);
      if (!entry) groups.set(subscription.subscription_id, (entry = { subscription, items: [] }));
      entry.items.push(p);
    }
  }
  return [...groups.values()];
}

/**
 * One subscription's events of the round as batches within the count and size budgets. A batch's
 * message id comes from its event sequences and first event's store time, so a round re-sent with the
 * same grouping is dropped by JetStream's duplicate window, and an EVENTS stream created again is not.
 */
export function batchesOf<M>(
  subscription: SubscriptionRecord,
  items: Pending<M>[],
  schedule: Schedule,
  random: () => number = Math.random,
): Array<{ batch: DeliveryBatch; msgID: string }> {
  const out: Array<{ batch: DeliveryBatch; msgID: string }> = [];
  let current: Pending<M>[] = [];
  let bytes = 0;
  const close = () => {
    if (current.length === 0) return;
    const first = current[0]!.event;
    let dueAt = 0;
    for (const p of current) dueAt = Math.max(dueAt, Date.parse(p.event.time) + (delayBefore(schedule, 1, random) ?? 0));
    const batch: DeliveryBatch = {
      partition: first.partition,
      type: first.type,
      subscription_id: subscription.subscription_id,
      due_at: dueAt,
      events: current.map((p) => ({
        event_id: p.event.event_id,
        event_seq: p.event.event_seq,
        ...(p.carried ? { event: p.carried } : {}),
        ...p.trace,
      })),
    };
    const seqs = current.map((p) => p.event.event_seq);
    const id = `${seqs[0]}-${seqs.at(-1)}:${seqs.length}:${seqs.reduce((a, b) => (a * 31 + b) % 2 ** 31, 7)}:${Date.parse(first.time)}`;
    out.push({ batch, msgID: `deliveries:${subscription.subscription_id}:${id}` });
    current = [];
    bytes = 0;
  };
  for (const p of items) {
    if (current.length >= BATCH_EVENTS || (current.length > 0 && bytes + p.bytes > BATCH_BYTES)) close();
    current.push(p);
    bytes += p.bytes;
  }
  close();
  return out;
}
