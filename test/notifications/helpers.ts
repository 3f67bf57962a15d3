/** Shared steps of the notifications delivery tests. */
import { jetstream } from "@nats-io/jetstream";
import { headers as natsHeaders } from "@nats-io/nats-core";
import { SUBSCRIPTIONS_BUCKET, SubscriptionStore } from "../../actors/notifications/store.ts";
import { subjects } from "../../subjects/index.ts";
import type { DeliveryAttempt, DeliveryList, EventAccepted, Subscription } from "../../subjects/notifications.ts";
import type { TestClient, TestDerrick } from "../harness/index.ts";
import { eventually, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { getJson, json } from "../harness/json.ts";
import { receiverPool } from "./receiver.ts";

export const DELIVERY_ENV = {
  DERRICK_CALLBACK_ALLOW_HTTP: "true",
  DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32",
  DERRICK_DELIVERY_SCHEDULE: "0,300ms,300ms",
  DERRICK_DELIVERY_TIMEOUT: "1s",
};

/** The edge, the subscriptions, the dispatcher and the deliverer: the whole path of an event. */
export const DELIVERY_ACTORS = ["system", "identity", "notifications", "dispatcher", "deliverer"] as const;

/**
 * A file's derrick running the whole delivery path with DELIVERY_ENV (plus `env`); `receivers`: the
 * file's webhook receivers, stopped after its last test; `receiver`: one of them, a new one per test.
 */
export function deliveryTest(env: Record<string, string> = {}) {
  return derrickTest({ actors: [...DELIVERY_ACTORS], env: { ...DELIVERY_ENV, ...env } })
    .extend(
      "receivers",
      { scope: "file" },
      // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern; there are none.
      async ({}, { onCleanup }) => {
        const receivers = receiverPool();
        onCleanup(() => receivers.stopAll());
        return receivers;
      },
    )
    .extend("receiver", async ({ receivers }) => receivers.start());
}

/** A JSON value a test reads without a schema (a received webhook body, a dead letter). */
export type Json = any;

export async function subscribe(
  derrick: TestDerrick,
  type: string,
  body: Record<string, unknown>,
  as: TestClient = "alpha",
  partition = "opendes",
): Promise<Subscription> {
  return getJson<Subscription>(derrick, `/v1/notifications/subscriptions/types/${type}`, {
    method: "POST",
    body: JSON.stringify({ subscriber: "tests", ...body }),
    as,
    partition,
  });
}

export async function publish(
  derrick: TestDerrick,
  type: string,
  event: unknown,
  partition = "opendes",
  as: TestClient = "alpha",
): Promise<Response> {
  return derrick.call(`/v1/notifications/events/${type}`, { method: "POST", body: JSON.stringify(event), partition, as });
}

/** Publishes through the edge as `publish` does, expecting 202; answers the event's id. */
export async function publishedId(...args: Parameters<typeof publish>): Promise<string> {
  const res = await publish(...args);
  if (res.status !== 202) throw new Error(`publish: ${res.status} ${await res.text()}`);
  return (await json<EventAccepted>(res)).event_id;
}

export async function deliveries(
  derrick: TestDerrick,
  id: string,
  as: TestClient = "alpha",
  partition = "opendes",
): Promise<DeliveryAttempt[]> {
  return (await getJson<DeliveryList>(derrick, `/v1/notifications/subscriptions/${id}/deliveries`, { as, partition })).deliveries;
}

/** A subscription's delivery log, newest attempt first, once that attempt is in `state`. */
export function deliveriesOnce(
  derrick: TestDerrick,
  id: string,
  state: DeliveryAttempt["state"],
  what: string,
  as: TestClient = "alpha",
): Promise<DeliveryAttempt[]> {
  return eventually(
    async () => {
      const list = await deliveries(derrick, id, as);
      return list[0]?.state === state ? list : undefined;
    },
    { what },
  );
}

export async function remove(derrick: TestDerrick, id: string, as: TestClient = "alpha", partition = "opendes"): Promise<void> {
  await derrick.call(`/v1/notifications/subscriptions/${id}`, { method: "DELETE", as, partition });
}

export async function retry(
  derrick: TestDerrick,
  id: string,
  eventId: string,
  as: TestClient = "alpha",
  partition = "opendes",
): Promise<Response> {
  return derrick.call(`/v1/notifications/subscriptions/${id}/deliveries/${eventId}/retry`, { method: "POST", as, partition });
}

/** Publishes on NATS as a service would (optionally choosing the id); answers the event's EVENTS sequence. */
export async function publishOnNats(
  derrick: TestDerrick,
  type: string,
  event: unknown,
  msgId?: string,
  partition = "opendes",
): Promise<number> {
  const h = natsHeaders();
  if (msgId) h.set("Nats-Msg-Id", msgId);
  return (await jetstream(derrick.nc).publish(subjects.events(partition, type), JSON.stringify(event), { headers: h })).seq;
}

/** The subscriptions bucket as the actors see it: to read a subscription's health or set up its history. */
export async function subscriptionStore(derrick: TestDerrick): Promise<SubscriptionStore> {
  return new SubscriptionStore(await openBucket(derrick.nc, SUBSCRIPTIONS_BUCKET));
}
