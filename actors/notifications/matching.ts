/** Which subscriptions an event reaches, and the CloudEvents 1.0 structured body it is delivered as. */
import type { StoredEvent } from "./journal.ts";
import type { SubscriptionRecord } from "./store.ts";

/** Same partition and type (the caller's lookup), then the subscription's filters. */
export function matches(
  subscription: Pick<SubscriptionRecord, "subscription_type" | "data_source" | "drill_plan_object_types">,
  event: Pick<StoredEvent, "data_source" | "object_type">,
): boolean {
  if (
    subscription.subscription_type === "PublishData" &&
    subscription.data_source != null &&
    subscription.data_source !== event.data_source
  )
    return false;
  const kinds = subscription.drill_plan_object_types;
  if (kinds && kinds.length > 0 && (event.object_type == null || !kinds.includes(event.object_type))) return false;
  return true;
}

/** CloudEvents 1.0 structured JSON (`application/cloudevents+json`); `id` is the event id (= webhook-id). */
export function cloudEvent(eventId: string, event: StoredEvent): Record<string, unknown> {
  return {
    specversion: "1.0",
    id: eventId,
    source: `/partitions/${event.partition}`,
    type: event.type,
    time: event.time,
    ...(event.object_type != null ? { subject: event.object_type } : {}),
    datacontenttype: "application/json",
    partitionid: event.partition,
    ...(event.data_source != null ? { datasource: event.data_source } : {}),
    data: event.data ?? null,
  };
}
