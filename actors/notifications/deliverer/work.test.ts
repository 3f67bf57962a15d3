import { describe, expect, it } from "vitest";
import type { SubscriptionRecord } from "../store.ts";
import { parseWork, triage, type Work } from "./work.ts";

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe("notifications deliverer: the work of a DELIVERIES message", () => {
  it("notifications work - a batch becomes first attempts of its events, with the batch's subscription, partition, type and due time", () => {
    const work = parseWork(
      encode({
        partition: "opendes",
        type: "PlanShared",
        subscription_id: "sub-1",
        due_at: 42,
        events: [
          { event_id: "e1", event_seq: 1, event: { data: 1, time: "t" } },
          { event_id: "e2", event_seq: 2 },
        ],
      }),
    );
    expect(work).toEqual({
      subscriptionId: "sub-1",
      dueAt: 42,
      manual: false,
      items: [
        {
          event_id: "e1",
          event_seq: 1,
          event: { data: 1, time: "t" },
          partition: "opendes",
          type: "PlanShared",
          subscription_id: "sub-1",
          attempt: 1,
          due_at: 42,
        },
        { event_id: "e2", event_seq: 2, partition: "opendes", type: "PlanShared", subscription_id: "sub-1", attempt: 1, due_at: 42 },
      ],
    });
  });

  it("notifications work - a job is one item (a manual replay stays manual); anything else is no work", () => {
    const job = {
      event_id: "e1",
      event_seq: 7,
      partition: "opendes",
      type: "PlanShared",
      subscription_id: "sub-1",
      attempt: 3,
      due_at: 5,
      manual: true,
    };
    expect(parseWork(encode(job))).toEqual({ subscriptionId: "sub-1", dueAt: 5, manual: true, items: [job] });
    expect(parseWork(encode({ ...job, manual: undefined }))?.manual).toBe(false);
    expect(parseWork(new TextEncoder().encode("not json"))).toBeUndefined();
    expect(parseWork(encode({ subscription_id: "sub-1" }))).toBeUndefined();
    expect(parseWork(encode({ event_seq: 1 }))).toBeUndefined();
  });

  it("notifications work - before any attempt: a deleted subscription's work is dropped, a paused one's is buried unless replayed by hand, early work waits", () => {
    const work: Work = { subscriptionId: "s", dueAt: 1_000, manual: false, items: [] };
    const live = { subscription_id: "s" } as SubscriptionRecord;
    const paused = {
      subscription_id: "s",
      paused_at: "2026-01-01T00:00:00Z",
      paused_reason: "the receiver answered 410 Gone",
    } as SubscriptionRecord;
    expect(triage(work, undefined, 0)).toEqual({ kind: "gone" });
    expect(triage(work, paused, 0)).toEqual({
      kind: "paused",
      reason: "subscription paused: the receiver answered 410 Gone",
      subscription: paused,
    });
    expect(triage({ ...work, manual: true }, paused, 1_000)).toEqual({ kind: "deliver", subscription: paused });
    expect(triage(work, live, 0)).toEqual({ kind: "not-due", delayMs: 1_000 });
    // Due within a few ms: not worth a nak.
    expect(triage(work, live, 995)).toEqual({ kind: "deliver", subscription: live });
    expect(triage(work, live, 994)).toEqual({ kind: "not-due", delayMs: 6 });
  });
});
