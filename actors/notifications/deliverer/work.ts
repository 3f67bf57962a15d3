import type { JsMsg } from "@nats-io/jetstream";
import type { CarriedEvent, DeliveryBatch, DeliveryJob } from "../../../subjects/notifications.ts";
import type { SubscriptionRecord } from "../store.ts";

/** What the deliverer does with a DELIVERIES message: answers it, renews it, knows it by its stream sequence. */
export type DeliveryMessage = Pick<JsMsg, "seq" | "subject" | "ack" | "nak" | "working">;
/** A message as a lane receives it: its payload, and terminated when it is no delivery work. */
export type ReceivedMessage = DeliveryMessage & Pick<JsMsg, "data" | "term">;
/** The two consumers: first attempts (per-subscription batches) and retries (single jobs), so waiting retries never hold up fresh work. */
export type Lane = "deliveries" | "retries";
/** One delivery to make: a retry job, or one event of a first-attempt batch (maybe carrying the event). */
export type Item = DeliveryJob & { event?: CarriedEvent };
/** What one DELIVERIES message asks for. */
export type Work = { subscriptionId: string; dueAt: number; manual: boolean; items: Item[] };

/** Work that is due within this long starts now (a nak for less would cost more than it saves). */
const DUE_SLACK_MS = 5;

const decoder = new TextDecoder();

/** The work of one DELIVERIES message (a batch or a job), or undefined when it is neither: it is terminated. */
export function parseWork(data: Uint8Array): Work | undefined {
  try {
    const value = JSON.parse(decoder.decode(data)) as DeliveryJob | DeliveryBatch;
    if ("events" in value && Array.isArray(value.events)) {
      const { events: list, ...batch } = value;
      const items = list.map(
        (e): Item => ({
          ...e,
          partition: batch.partition,
          type: batch.type,
          subscription_id: batch.subscription_id,
          attempt: 1,
          due_at: batch.due_at,
        }),
      );
      return { subscriptionId: batch.subscription_id, dueAt: batch.due_at, manual: false, items };
    }
    const job = value as DeliveryJob;
    if (typeof job.subscription_id !== "string" || typeof job.event_seq !== "number") return undefined;
    return { subscriptionId: job.subscription_id, dueAt: job.due_at, manual: !!job.manual, items: [job] };
  } catch {
    return undefined;
  }
}

/** What becomes of a message before any attempt. */
export type Triage =
  /** The subscription is deleted: nothing to deliver to, the message is acked. */
  | { kind: "gone" }
  /** The subscription is paused: every item goes to DEAD unattempted, then the message is acked (a manual retry is still made). */
  | { kind: "paused"; reason: string; subscription: SubscriptionRecord }
  /** Not due yet: nak'ed to come back when it is. */
  | { kind: "not-due"; delayMs: number }
  | { kind: "deliver"; subscription: SubscriptionRecord };

export function triage(work: Work, subscription: SubscriptionRecord | undefined, now: number): Triage {
  if (!subscription) return { kind: "gone" };
  if (subscription.paused_at && !work.manual) {
    return { kind: "paused", reason: `subscription paused: ${subscription.paused_reason ?? "paused"}`, subscription };
  }
  if (work.dueAt - now > DUE_SLACK_MS) return { kind: "not-due", delayMs: work.dueAt - now };
  return { kind: "deliver", subscription };
}
