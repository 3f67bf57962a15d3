/**
 * Notifications over HTTP (the subscriptions API plus the delivery operations of docs/contract.md):
 *   POST   /v1/notifications/subscriptions/types/{subscritpionType}        create or update (200, full form)
 *   GET    /v1/notifications/subscriptions                                  the caller's own subscriptions
 *   DELETE /v1/notifications/subscriptions/{subscriptionId}                 200; others' or unknown → 404
 *   GET    /v1/notifications/subscriptions/{subscriptionId}/secret          {"key": "whsec_…"}
 *   POST   /v1/notifications/subscriptions/{subscriptionId}/secret/rotate   {"key": "whsec_…"} (new)
 *   GET    /v1/notifications/subscriptions/{subscriptionId}/deliveries      attempt log, newest first
 *   POST   /v1/notifications/subscriptions/{subscriptionId}/deliveries/{eventId}/retry   202 {"event_id"}; gone → 410
 *   POST   /v1/notifications/events/{type}                                  202 {"event_id"} (group notifications.publishers)
 * Every route needs a bearer token, the appkey of its client and the partition header. The
 * notifications actor does the work; the edge checks shapes and forwards.
 */
import { Elysia, t, type DocumentDecoration } from "elysia";
import type { Config } from "../../config/index.ts";
import { contentTooLarge, type Operation } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  EVENT_ID_PATTERN,
  EVENT_MAX_BYTES,
  EventBody,
  NotificationType,
  SubscriptionBase,
  type SubscriptionRef,
  notificationsEventPublish,
  notificationsSubscriptionDelete,
  notificationsSubscriptionDeliveries,
  notificationsSubscriptionList,
  notificationsSubscriptionRetry,
  notificationsSubscriptionSecret,
  notificationsSubscriptionSecretRotate,
  notificationsSubscriptionUpsert,
} from "../../subjects/notifications.ts";
import { negotiate } from "../forward.ts";
import type { AuthOptions, AuthPlugin } from "../plugins/auth.ts";
import type { RouteBodyLimits } from "../plugins/body.ts";
import { MEDIA_TYPES_MARK } from "../plugins/openapi.ts";
import { problems, relayOn, type RelayContext } from "../relay.ts";

const BASE = "/v1/notifications";
const errors = problems(400, 401, 403, 404, 413, 503, 504);
const credentials: AuthOptions = { appkey: true };
const SubscriptionPath = t.Object({ subscriptionId: t.String({ pattern: "^[A-Za-z0-9_-]{1,128}$" }) });
const tags = ["notifications"];
/** The list's response media types (docs/notifications.md); the first is the default. */
export const LIST_MEDIA_TYPES = ["application/json", "text/json", "text/plain"] as const;

/** An event's declared length over EVENT_MAX_BYTES is refused before the body is read (chunked: as it is read). */
export const notificationBodyLimits: RouteBodyLimits = {
  [`${BASE}/events/:type`]: {
    bytes: EVENT_MAX_BYTES,
    tooLarge: (size) =>
      contentTooLarge(
        size === undefined
          ? `the event is over the limit of ${EVENT_MAX_BYTES} bytes`
          : `the event is ${size} bytes; the limit is ${EVENT_MAX_BYTES}`,
      ),
  },
};

export const notificationRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const relay = relayOn(bus);
  // A route on one of the caller's subscriptions: the id in its path is the whole request.
  const bySubscription = <O extends Operation<typeof SubscriptionRef>>(op: O, summary: string) =>
    [
      ({ set, request, params }: RelayContext & { params: typeof SubscriptionPath.static }) =>
        relay({ set, request }, op, { subscription_id: params.subscriptionId }),
      { params: SubscriptionPath, detail: { summary }, response: { 200: op.reply, ...errors } },
    ] as const;
  return new Elysia({ name: "derrick-notification-routes", normalize: false })
    .use(auth)
    .guard({ auth: credentials, partition: true, detail: { tags } }, (app) =>
      app
        .post(
          `${BASE}/subscriptions/types/:subscritpionType`,
          ({ set, request, body, params }) =>
            relay({ set, request }, notificationsSubscriptionUpsert, { type: params.subscritpionType, subscription: body }),
          {
            params: t.Object({ subscritpionType: NotificationType }),
            body: SubscriptionBase,
            detail: {
              summary: "Create or update the caller's subscription of one type (one per partition, client and type; the id stays)",
              description:
                "Body: the base form; unknown fields, non-http(s) or unsafe callback URIs, reserved callback headers or header values fetch cannot send (beyond Latin-1, control characters, surrounding whitespace), unknown drill_plan_object_types and data_source on a type other than PublishData are 400 naming the field. Accepts application/json, text/json and application/*+json.",
            },
            response: { 200: notificationsSubscriptionUpsert.reply, ...errors },
          },
        )
        .get(
          `${BASE}/subscriptions`,
          ({ set, request }) =>
            relay({ set, request }, notificationsSubscriptionList, undefined, negotiate(request.headers.get("accept"), LIST_MEDIA_TYPES)),
          {
            detail: {
              summary: "The caller's own subscriptions in this partition (full form)",
              description:
                "The JSON array is sent as application/json, text/json or text/plain, as the Accept header prefers (default application/json).",
              [MEDIA_TYPES_MARK]: LIST_MEDIA_TYPES,
            } as DocumentDecoration,
            response: { 200: notificationsSubscriptionList.reply, ...errors },
          },
        )
        .delete(
          `${BASE}/subscriptions/:subscriptionId`,
          ...bySubscription(
            notificationsSubscriptionDelete,
            "Delete one of the caller's subscriptions (200); another client's or an unknown id → 404",
          ),
        )
        .get(
          `${BASE}/subscriptions/:subscriptionId/secret`,
          ...bySubscription(notificationsSubscriptionSecret, "The Standard Webhooks signing secret of a subscription (owner only)"),
        )
        .post(
          `${BASE}/subscriptions/:subscriptionId/secret/rotate`,
          ...bySubscription(notificationsSubscriptionSecretRotate, "Rotate the signing secret; deliveries carry both signatures for 24 h"),
        )
        .get(
          `${BASE}/subscriptions/:subscriptionId/deliveries`,
          ...bySubscription(notificationsSubscriptionDeliveries, "Recent delivery attempts of a subscription, newest first (last 100)"),
        )
        .post(
          `${BASE}/subscriptions/:subscriptionId/deliveries/:eventId/retry`,
          ({ set, request, params }) =>
            relay({ set, request }, notificationsSubscriptionRetry, { subscription_id: params.subscriptionId, event_id: params.eventId }),
          {
            params: t.Object({ ...SubscriptionPath.properties, eventId: t.String({ pattern: EVENT_ID_PATTERN }) }),
            detail: {
              summary: "Replay one event to the subscription (also from dead letters): one attempt, 202",
              description:
                "A dead letter stays until a replay of it succeeds. Unknown event → 404; an event no longer stored (retention passed) → 410.",
            },
            response: { 202: notificationsSubscriptionRetry.reply, ...errors, ...problems(410) },
          },
        )
        .post(
          `${BASE}/events/:type`,
          ({ set, request, body, params }) => {
            const size = Buffer.byteLength(JSON.stringify(body ?? null));
            if (size > EVENT_MAX_BYTES) throw contentTooLarge(`the event is ${size} bytes; the limit is ${EVENT_MAX_BYTES}`);
            return relay({ set, request }, notificationsEventPublish, { type: params.type, event: body });
          },
          {
            params: t.Object({ type: NotificationType }),
            beforeHandle: ({ request }) => {
              // Checked again on the parsed body in the handler (a chunked body has no length).
              const length = Number(request.headers.get("content-length"));
              if (Number.isFinite(length) && length > EVENT_MAX_BYTES)
                throw contentTooLarge(`the event is ${length} bytes; the limit is ${EVENT_MAX_BYTES}`);
            },
            body: EventBody,
            detail: {
              summary: "Publish an event to notify (group notifications.publishers); durable in EVENTS before the 202",
              description:
                "Body {data_source?, object_type?, data}; at most 256 KiB (→ 413). The same body may be published on NATS at derrick.events.<partition>.<type>.",
            },
            response: { 202: notificationsEventPublish.reply, ...errors },
          },
        ),
    );
};
