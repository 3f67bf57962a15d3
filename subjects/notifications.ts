/**
 * Messages of the notifications capability: subscriptions (the notifications API's base and full forms), events,
 * delivery jobs and attempt records. The edge validates and documents with these schemas; the actors
 * decode with them.
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { SUBJECT_TOKEN_PATTERN } from "../config/schema.ts";
import { NoRequest, operation, type OperationOf } from "./operation.ts";

/** The notifications API's NotificationType enumeration. */
export const NOTIFICATION_TYPES = ["PublishData", "ReviewStateChanged", "PlanShared", "ProjectCreated", "MasterPlanChanged"] as const;
export const NotificationType = Type.Union(
  [
    Type.Literal("PublishData"),
    Type.Literal("ReviewStateChanged"),
    Type.Literal("PlanShared"),
    Type.Literal("ProjectCreated"),
    Type.Literal("MasterPlanChanged"),
  ],
  { description: "Notification type (NotificationType)" },
);
export type NotificationType = Static<typeof NotificationType>;

/** The notifications API's list of supported drill_plan_object_types, accepted literally. */
export const DRILL_PLAN_OBJECT_TYPES: readonly string[] = [
  "/well/api/wells",
  "/customParameters/api/custom-parameters",
  "/location/api/surface-locations",
  "/well/api/wellbores",
  "/WellheadAndBop/wellhead-and-bops",
  "/WellBarrier/api/data/v1/well-barriers",
  "/ghg-emissions-footprint/api/configurations",
  "/WellMontage/api/well-montages",
  "/geology/api/formation-tops",
  "/geomechanics/api/mwws",
  "/geomechanics/api/temperatures",
  "/location/api/targets",
  "/Rig/api/rigsets",
  "/Traj/api/trajectories",
  "/well/api/wbgs",
  "/ComposerReverseProxy/SidetrackPoint/api/sidetrack-points",
  "/risks/api/risk-sets",
  "/composer/api/cs/activity-plans",
  "/afe/api/cs/afes",
  "/CasingDesign/casing-designs",
  "/<simulator>-thermal/<simulator>-thermals",
  "/KickTolerance/api/kick-tolerance-criteria",
  "/dynamic-well-control/api/configurations",
  "/TaskManager/api/v1/corporate-deliverables",
  "/well/api/sections",
  "/Schedule/api/l2-activities",
  "/Schedule/api/l3-activities",
  "/Schedule/api/l3-complete-wells",
  "/cementing/api/cementing",
  "/cementing/api/tieback-cementing",
  "/cementing/api/digital-cement-plan",
  "/casing/api/casings",
  "/casing/api/liners",
  "/casing/api/tiebacks",
  "/completionfluid/api/completion-fluids",
  "/drillingfluid/api/drilling-fluid-programs",
  "/evaluation/api/v1/cits",
  "/evaluation/api/v1/evaluations",
  "/Schedule/api/l5-activities",
  "/Schedule/api/l5-completion-runs",
  "/Completion/completion-integrity",
  "/Schedule/api/l5-casing-runs",
  "/Schedule/api/l5-casing-drilling-runs",
  "/Schedule/api/runs",
  "/OperationParameter/api/casing-operation-parameter-sets",
  "/OperationParameter/api/liner-operation-parameter-sets",
  "/OperationParameter/api/tieback-operation-parameter-sets",
  "/Completion/completion-string",
  "/OperationParameter/api/operation-parameter-sets",
  "/BhaBuilder/api/bhas",
  "/BhaBuilder/api/mud-pulse-telemetry-parameter",
  "/zone/api/zones",
  "/well/api/wellbore-completions",
  "/completionplan/api/completion-plans",
  "reporting",
];

/** Documented size limits of subscription fields. */
export const SUBSCRIPTION_LIMITS = {
  subscriber: 256,
  callbackUri: 2048,
  dataSource: 256,
  headers: 32,
  headerName: 128,
  headerValue: 4096,
  objectTypes: 64,
  objectType: 256,
  email: 320,
} as const;

/** Largest event accepted, in bytes of JSON (HTTP body or NATS payload). */
export const EVENT_MAX_BYTES = 256 * 1024;

const L = SUBSCRIPTION_LIMITS;
const nullable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

const baseFields = {
  subscriber: Type.String({ minLength: 1, maxLength: L.subscriber, description: "Readable name of the subscribing client; display only" }),
  callback_uri: Type.String({
    format: "uri",
    minLength: 1,
    maxLength: L.callbackUri,
    description: "Absolute http(s) URI that receives each notification as a POST",
  }),
  data_source: nullable(Type.String({ minLength: 1, maxLength: L.dataSource, description: "PublishData only: the data source to match" })),
  callback_headers: nullable(
    Type.Record(Type.String(), Type.String({ maxLength: L.headerValue }), {
      maxProperties: L.headers,
      description: "Headers sent with every delivery (e.g. Authorization, appkey); delivery headers cannot be overridden",
    }),
  ),
  drill_plan_object_types: nullable(
    Type.Array(Type.String({ minLength: 1, maxLength: L.objectType }), {
      maxItems: L.objectTypes,
      description: "Object types of interest (the supported list)",
    }),
  ),
  contact_email: nullable(Type.String({ format: "email", maxLength: L.email })),
};

/** Subscription as sent on create or update (the API's base form). */
export const SubscriptionBase = Type.Object(baseFields, { additionalProperties: false });
export type SubscriptionBase = Static<typeof SubscriptionBase>;

/** Subscription as returned (the API's full form). */
export const Subscription = Type.Object(
  {
    ...baseFields,
    subscription_id: Type.String(),
    client_id: Type.String(),
    updated_at: Type.String({ format: "date-time" }),
    subscription_type: NotificationType,
  },
  { additionalProperties: false },
);
export type Subscription = Static<typeof Subscription>;

export const SubscriptionList = Type.Array(Subscription);
export type SubscriptionList = Static<typeof SubscriptionList>;

/** Upsert request on NATS: the type from the path beside the base-form body (nested, as the actor has always received it). */
export const SubscriptionUpsert = Type.Object({ type: NotificationType, subscription: SubscriptionBase }, { additionalProperties: false });
export type SubscriptionUpsert = Static<typeof SubscriptionUpsert>;

/**
 * What an event id (= CloudEvents id = webhook-id) may be. No `.`: Standard Webhooks signs
 * `<webhook-id>.<webhook-timestamp>.<body>`, so the id must not contain the separator. A Nats-Msg-Id
 * outside this pattern is not used as the id (the event gets `evt_<stream sequence>`).
 */
export const EVENT_ID_PATTERN = "^[A-Za-z0-9_:-]{1,128}$";

// Not the path's pattern: an id of another form is answered 404, as an unknown one is.
const subscriptionId = Type.String({ minLength: 1, maxLength: 128 });
const eventId = Type.String({ pattern: EVENT_ID_PATTERN });

/** Any operation addressing one subscription (an event id, when sent, is accepted and unused). */
export const SubscriptionRef = Type.Object(
  { subscription_id: subscriptionId, event_id: Type.Optional(eventId) },
  { additionalProperties: false },
);
export type SubscriptionRef = Static<typeof SubscriptionRef>;

/** `subscription.retry`: one event of one subscription. */
export const DeliveryRef = Type.Object({ subscription_id: subscriptionId, event_id: eventId }, { additionalProperties: false });
export type DeliveryRef = Static<typeof DeliveryRef>;

/**
 * `client.forget`: a deleted client's subscriptions in every partition created before `created_before` are
 * removed with their secrets (a client made again with that id keeps its own). Sent by the identity actor until
 * a notifications actor answers (docs/authentication.md, "Deleting a client"); idempotent.
 */
export const ClientForget = Type.Object(
  { client_id: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }), created_before: Type.String({ format: "date-time" }) },
  { additionalProperties: false },
);
export type ClientForget = Static<typeof ClientForget>;
export const ClientForgotten = Type.Object({ removed: Type.Integer({ minimum: 0, description: "Subscriptions removed by this request" }) });
export type ClientForgotten = Static<typeof ClientForgotten>;

export const SecretReply = Type.Object({ key: Type.String({ description: "Standard Webhooks secret, `whsec_` + base64" }) });
export type SecretReply = Static<typeof SecretReply>;

/** An event to notify, as published on NATS or posted over HTTP. */
export const EventBody = Type.Object(
  {
    data_source: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: L.dataSource }), Type.Null()])),
    object_type: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: L.objectType }), Type.Null()])),
    data: Type.Unknown({ description: "Any JSON value" }),
  },
  { additionalProperties: false },
);
export type EventBody = Static<typeof EventBody>;

/** Publish request on NATS (the HTTP door): the type from the path beside the event body. */
export const EventPublish = Type.Object({ type: NotificationType, event: EventBody }, { additionalProperties: false });
export type EventPublish = Static<typeof EventPublish>;

export const EventAccepted = Type.Object({ event_id: Type.String() });
export type EventAccepted = Static<typeof EventAccepted>;

export const DeliveryState = { pending: "pending", succeeded: "succeeded", failed: "failed", dead: "dead" } as const;
export type DeliveryState = (typeof DeliveryState)[keyof typeof DeliveryState];

/** One delivery attempt as listed by `GET …/deliveries` (and stored in the ATTEMPTS stream). */
export const DeliveryAttempt = Type.Object({
  event_id: Type.String(),
  attempt: Type.Integer({ minimum: 1 }),
  state: Type.Union([Type.Literal("pending"), Type.Literal("succeeded"), Type.Literal("failed"), Type.Literal("dead")]),
  status_code: Type.Optional(Type.Integer()),
  error: Type.Optional(Type.String()),
  duration_ms: Type.Optional(Type.Number()),
  attempted_at: Type.Optional(Type.String({ format: "date-time" })),
  next_attempt_at: Type.Optional(Type.String({ format: "date-time" })),
});
export type DeliveryAttempt = Static<typeof DeliveryAttempt>;

export const DeliveryList = Type.Object({ deliveries: Type.Array(DeliveryAttempt) });
export type DeliveryList = Static<typeof DeliveryList>;

const counter = Type.Integer({ minimum: 0 });
/** `dispatcher.stats`: what one dispatcher did since it started, and the ack floor it last read and stored. */
export const DispatcherStatsReply = Type.Object({
  events: counter,
  jobs: counter,
  batches: counter,
  /** Events skipped without delivery: not a valid event body (checked as over HTTP), each logged with subject, sequence and reason. */
  dropped: counter,
  failures: counter,
  /** The consumer's ack floor as last read (every event up to it is dispatched): a consumer created again starts after it. */
  ackFloor: counter,
  /** The ack floor last known stored as the progress (0: none on this EVENTS stream yet). */
  storedFloor: counter,
});
export type DispatcherStatsReply = Static<typeof DispatcherStatsReply>;
/** `deliverer.stats`: what one deliverer did since it started, and the attempts running now. */
export const DelivererStatsReply = Type.Object({
  attempts: counter,
  succeeded: counter,
  failed: counter,
  dead: counter,
  overflowed: counter,
  parked: counter,
  inFlight: counter,
});
export type DelivererStatsReply = Static<typeof DelivererStatsReply>;

/** An operation on one subscription: it takes the subscription's reference. */
function onSubscription<Rep extends TSchema>(op: OperationOf<"notifications">, reply: Rep) {
  return operation("notifications", op, { request: SubscriptionRef, reply });
}
/** The stats of a dispatcher or deliverer; both keep the $SRV endpoint name they were first served under. */
function workerStats<Rep extends TSchema>(op: OperationOf<"notifications">, reply: Rep) {
  return operation("notifications", op, { request: NoRequest, reply, endpoint: "stats" });
}

export const notificationsSubscriptionUpsert = operation("notifications", "subscription.upsert", {
  request: SubscriptionUpsert,
  reply: Subscription,
});
export const notificationsSubscriptionList = operation("notifications", "subscription.list", {
  request: NoRequest,
  reply: SubscriptionList,
});
export const notificationsSubscriptionDelete = onSubscription("subscription.delete", Type.Object({}));
export const notificationsSubscriptionSecret = onSubscription("subscription.secret", SecretReply);
export const notificationsSubscriptionSecretRotate = onSubscription("subscription.secret.rotate", SecretReply);
export const notificationsSubscriptionDeliveries = onSubscription("subscription.deliveries", DeliveryList);
export const notificationsSubscriptionRetry = operation("notifications", "subscription.retry", {
  request: DeliveryRef,
  reply: EventAccepted,
});
export const notificationsEventPublish = operation("notifications", "event.publish", { request: EventPublish, reply: EventAccepted });
export const notificationsClientForget = operation("notifications", "client.forget", { request: ClientForget, reply: ClientForgotten });
export const notificationsDispatcherStats = workerStats("dispatcher.stats", DispatcherStatsReply);
export const notificationsDelivererStats = workerStats("deliverer.stats", DelivererStatsReply);

/** A unit of delivery work (DELIVERIES stream): one event for one subscription, one attempt. */
export type DeliveryJob = {
  event_id: string;
  /** Sequence of the event in the EVENTS stream (the payload is read from there). */
  event_seq: number;
  partition: string;
  type: string;
  subscription_id: string;
  /** 1-based attempt number this job performs. */
  attempt: number;
  /** Epoch ms before which the attempt must not run. */
  due_at: number;
  /** A replay requested by an operator: one attempt, not rescheduled. */
  manual?: boolean;
  /**
   * A replay of a dead letter: its sequence in DEAD. The event is read from the letter (it outlives
   * EVENTS), and the letter is deleted only after this attempt succeeds.
   */
  dead_seq?: number;
} & CausingTrace;

/**
 * The W3C trace context of the request that caused a delivery (the event's publication, or a replay), carried with
 * the work so every attempt's POST continues that trace. Absent in work stored before traces were carried, and for
 * events published on NATS without one.
 */
export type CausingTrace = { traceparent?: string; tracestate?: string };

/** An event as carried inside a delivery batch when it is small (its EVENTS timestamp included). */
export type CarriedEvent = EventBody & { time: string };

/**
 * First attempts of several events for one subscription (DELIVERIES, first-attempt lane): the
 * dispatcher groups the events it handles together, so one stored message, one delivery and one ack
 * carry many deliveries. Small events travel inside (no read from EVENTS); large ones by sequence.
 */
export type DeliveryBatch = {
  partition: string;
  type: string;
  subscription_id: string;
  /** Epoch ms before which no attempt of the batch may run. */
  due_at: number;
  events: Array<{ event_id: string; event_seq: number; event?: CarriedEvent } & CausingTrace>;
};

/**
 * A dead letter (DEAD stream): the job plus the event, so a replay works after EVENTS expired. No
 * `event` when it had already left EVENTS when the delivery died: there is nothing to replay then.
 */
export type DeadLetter = DeliveryJob & { reason: string; event?: CarriedEvent };
