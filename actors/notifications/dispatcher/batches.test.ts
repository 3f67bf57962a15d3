import { describe, expect, it } from "vitest";
import type { StoredEvent } from "../journal.ts";
import type { SubscriptionRecord } from "../store.ts";
import { BATCH_BYTES, BATCH_EVENTS, batchesOf, bySubscription, CARRY_BYTES, pendingOf } from "./batches.ts";

const event = (seq: number, data: unknown = seq, more: Partial<StoredEvent> = {}): StoredEvent => ({
  event_id: `evt_${seq}`,
  event_seq: seq,
  partition: "opendes",
  type: "PublishData",
  time: new Date(Date.UTC(2026, 10, 1, 0, 0, seq)).toISOString(),
  data,
  ...more,
});
const sub = (id: string, more: Partial<SubscriptionRecord> = {}) =>
  ({ subscription_id: id, subscription_type: "PublishData", ...more }) as SubscriptionRecord;
const schedule = { delaysMs: [0], jitter: false };

describe("notifications dispatcher: rounds as batches", () => {
  it("notifications batches - small events travel in the batch, measured as written (re-serializing can grow a body); larger ones are read back", () => {
    const small = pendingOf("m", event(1, { x: 1 }), 40);
    expect(small.carried).toEqual({ time: small.event.time, data: { x: 1 } });
    expect(small.bytes).toBeGreaterThan(96);
    expect(pendingOf("m", event(2, "x".repeat(10)), CARRY_BYTES + 1)).toMatchObject({ carried: undefined, bytes: 96 });
    // Published small, written larger than the carry limit: `1e20` is written out as 21 digits.
    const grows = Array.from({ length: CARRY_BYTES / 8 }, () => 1e20);
    expect(pendingOf("m", event(3, grows), CARRY_BYTES).carried).toBeUndefined();
  });

  it("notifications batches - one subscription's events are split at 64 events or 48 KiB, each batch due when its latest event is", () => {
    const items = Array.from({ length: BATCH_EVENTS + 1 }, (_, i) => pendingOf("m", event(i + 1), 10));
    const batches = batchesOf(sub("s"), items, { delaysMs: [1_000], jitter: false });
    expect(batches.map((b) => b.batch.events.length)).toEqual([BATCH_EVENTS, 1]);
    expect(batches[0]!.batch.due_at).toBe(Date.parse(items[BATCH_EVENTS - 1]!.event.time) + 1_000);
    expect(batches[0]!.batch).toMatchObject({ partition: "opendes", type: "PublishData", subscription_id: "s" });
    const big = Array.from({ length: 3 }, (_, i) => ({ ...pendingOf("m", event(i + 1), 10), bytes: BATCH_BYTES / 2 }));
    expect(batchesOf(sub("s"), big, schedule).map((b) => b.batch.events.length)).toEqual([2, 1]);
  });

  it("notifications batches - a batch's message id repeats for the same events (a re-sent round is dropped) but not on an EVENTS stream created again", () => {
    const round = [1, 2, 3].map((seq) => pendingOf("m", event(seq), 10));
    const again = [1, 2, 3].map((seq) => pendingOf("m", event(seq), 10));
    const recreated = [1, 2, 3].map((seq) => pendingOf("m", event(seq, seq, { time: "2026-12-01T00:00:00.000Z" }), 10));
    const id = (items: typeof round) => batchesOf(sub("s"), items, schedule)[0]!.msgID;
    expect(id(again)).toBe(id(round));
    expect(id(recreated)).not.toBe(id(round));
    expect(id(round)).toMatch(/^deliveries:s:1-3:3:/);
    expect(batchesOf(sub("t"), round, schedule)[0]!.msgID).not.toBe(id(round));
  });

  it("notifications batches - a round's events go to each subscription whose filters they match, in the order they came", () => {
    const wells = sub("wells", { data_source: "wells" });
    const all = sub("all");
    const taken = [
      pendingOf("a", event(1, 1, { data_source: "wells" }), 10),
      pendingOf("b", event(2, 2, { data_source: "rigs" }), 10),
      pendingOf("c", event(3, 3, { data_source: "wells" }), 10),
    ];
    const groups = bySubscription(taken, () => [wells, all]);
    expect(groups.map((g) => [g.subscription.subscription_id, g.items.map((p) => p.msg)])).toEqual([
      ["wells", ["a", "c"]],
      ["all", ["a", "b", "c"]],
    ]);
  });
});
