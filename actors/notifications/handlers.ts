/**
 * The notifications operations as plain functions over their dependencies (store, journal, policy):
 * subscription upsert/list/delete, secrets, the delivery log, replay, and the HTTP door for events.
 */
import { randomBytes } from "node:crypto";
import {
  check,
  contentTooLarge,
  gone,
  invalidField,
  quoteValue,
  notFound,
  unavailable,
  validationError,
  type FieldError,
} from "../../subjects/index.ts";
import {
  DRILL_PLAN_OBJECT_TYPES,
  EVENT_MAX_BYTES,
  EventBody,
  NOTIFICATION_TYPES,
  SubscriptionBase,
  type ClientForget,
  type ClientForgotten,
  type DeliveryList,
  type EventAccepted,
  type NotificationType,
  type SecretReply,
  type Subscription,
} from "../../subjects/notifications.ts";
import { canonicalCallbackUri, refuseCallbackUri, type CallbackPolicy } from "./callback-policy.ts";
import { deliveryLog } from "./delivery-log.ts";
import { newSecret } from "./signing.ts";
import type { SubscriptionCache, SubscriptionRecord, SubscriptionStore } from "./store.ts";
import { letterEvent, type Journal } from "./journal.ts";
import type { Caller } from "../runtime/context.ts";
import { traceHeaders, type TraceContext } from "../../platform/trace-context.ts";

export type NotificationDeps = {
  store: SubscriptionStore;
  /** The watched copy reads are answered from (after `fresh()`, so they see every acknowledged write). */
  view: SubscriptionCache;
  journal: Journal;
  policy: CallbackPolicy;
  /** How long a rotated-out secret keeps signing. */
  rotationOverlapMs?: number;
  now?: () => number;
};

const ROTATION_OVERLAP_MS = 24 * 3600_000;
/** How long a read waits for the subscriptions view before it reads the bucket instead. */
const VIEW_WAIT_MS = 1_500;
const DELIVERIES_LISTED = 100;
const DRILL_TYPES = new Set(DRILL_PLAN_OBJECT_TYPES);
/** Headers a subscription may not set: they belong to the delivery itself (Svix's forbidden list, plus CloudEvents and Standard Webhooks). */
const RESERVED_HEADERS = new Set([
  "content-type",
  "content-length",
  "content-encoding",
  "transfer-encoding",
  "host",
  "user-agent",
  "connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "upgrade",
  "expect",
  "cookie",
  // W3C Trace Context: each attempt sends the trace of the request that caused it.
  "traceparent",
  "tracestate",
]);
const RESERVED_PREFIXES = ["webhook-", "ce-", "x-derrick-", "proxy-", "sec-"];
/** RFC 9110 token. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/**
 * RFC 9110 field-value as fetch sends it and receivers take it: visible ASCII and Latin-1 (no C1 controls), inner spaces
 * or tabs. Anything else fetch throws on, receivers refuse or trims silently: a subscription that never delivers what it
 * was given (docs/notifications.md#subscriptions).
 */
const HEADER_VALUE = /^(?:[\x21-\x7E\xA0-\xFF](?:[\t\x20-\x7E\xA0-\xFF]*[\x21-\x7E\xA0-\xFF])?)?$/;
/** Replays look this far back in a subscription's attempt log for the event's last attempt. */
const ATTEMPTS_SCANNED = 1000;

export function checkType(type: string, pointer = "/params/subscritpionType"): NotificationType {
  if (!(NOTIFICATION_TYPES as readonly string[]).includes(type))
    throw invalidField(pointer, `${quoteValue(type)} is not a notification type; use one of ${NOTIFICATION_TYPES.join(", ")}`);
  return type as NotificationType;
}

/** Strict validation of a base-form body, beyond the schema: URI safety, headers, object types, data_source. */
export function validateSubscription(body: unknown, type: NotificationType, policy: CallbackPolicy): SubscriptionBase {
  const input = check(SubscriptionBase, body);
  const errors: FieldError[] = [];
  if (input.subscriber.trim() === "") errors.push({ pointer: "/body/subscriber", message: "must not be blank" });
  const uriProblem = refuseCallbackUri(policy, input.callback_uri);
  if (uriProblem) errors.push({ pointer: "/body/callback_uri", message: uriProblem });
  if (input.data_source != null && type !== "PublishData") {
    errors.push({ pointer: "/body/data_source", message: `applies only to PublishData subscriptions; send null or omit it for ${type}` });
  }
  errors.push(...headerErrors(input.callback_headers ?? {}));
  const seen = new Set<string>();
  (input.drill_plan_object_types ?? []).forEach((value, i) => {
    if (!DRILL_TYPES.has(value))
      errors.push({ pointer: `/body/drill_plan_object_types/${i}`, message: `"${value}" is not a supported drill plan object type` });
    else if (seen.has(value)) errors.push({ pointer: `/body/drill_plan_object_types/${i}`, message: `"${value}" is listed twice` });
    seen.add(value);
  });
  if (errors.length) throw validationError(errors);
  // Stored as it will be called: what the owner reads back is the URL the deliverer posts to.
  return { ...input, callback_uri: canonicalCallbackUri(input.callback_uri) };
}

/** What is wrong with callback headers: each must be sendable by fetch and must not touch the delivery's own. */
function headerErrors(headers: Record<string, string>): FieldError[] {
  const errors: FieldError[] = [];
  const seen = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    const pointer = `/body/callback_headers/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    const lower = name.toLowerCase();
    const twin = seen.get(lower);
    seen.set(lower, name);
    if (!HEADER_NAME.test(name)) errors.push({ pointer, message: "is not a valid header name (RFC 9110 token)" });
    else if (RESERVED_HEADERS.has(lower) || RESERVED_PREFIXES.some((p) => lower.startsWith(p))) {
      errors.push({ pointer, message: `would override a delivery header; ${name} cannot be set` });
    } else if (twin !== undefined) errors.push({ pointer, message: `is the same header as ${twin} (names are case-insensitive)` });
    else if (!HEADER_VALUE.test(value)) {
      errors.push({
        pointer,
        message:
          "must be visible ASCII or Latin-1 characters with inner spaces or tabs only (no control characters, nothing beyond U+00FF, no surrounding whitespace)",
      });
    }
  }
  return errors;
}

/** The full form as returned to its owner: nothing internal. */
export function publicForm(record: SubscriptionRecord): Subscription {
  return {
    subscriber: record.subscriber,
    callback_uri: record.callback_uri,
    data_source: record.data_source ?? null,
    callback_headers: record.callback_headers ?? null,
    drill_plan_object_types: record.drill_plan_object_types ?? null,
    contact_email: record.contact_email ?? null,
    subscription_id: record.subscription_id,
    client_id: record.client_id,
    updated_at: record.updated_at,
    subscription_type: record.subscription_type,
  };
}

export function newSubscriptionId(): string {
  return `sub_${randomBytes(16)
    .toString("base64url")
    .replace(/[^A-Za-z0-9]/g, "x")}`;
}

/** Create or update: one subscription per (partition, client, type), kept under concurrent posts. */
export async function upsertSubscription(rawType: string, body: unknown, caller: Caller, deps: NotificationDeps): Promise<Subscription> {
  const type = checkType(rawType);
  const input = validateSubscription(body, type, deps.policy);
  const now = new Date(deps.now?.() ?? Date.now()).toISOString();
  const fields = {
    subscriber: input.subscriber,
    callback_uri: input.callback_uri,
    data_source: input.data_source ?? null,
    callback_headers: input.callback_headers ?? null,
    drill_plan_object_types: input.drill_plan_object_types ?? null,
    contact_email: input.contact_email ?? null,
    updated_at: now,
  };
  const clientId = caller.principal.clientId;
  for (let tries = 0; tries < 20; tries++) {
    const existingId = await deps.store.indexOf(caller.partition, clientId, type);
    if (existingId) {
      // Re-posting replaces the fields and resumes a paused subscription; id and secret stay.
      const updated = await deps.store.modify(existingId, (current) => {
        const { paused_at: _p, paused_reason: _r, failing_since: _f, ...rest } = current;
        return { ...rest, ...fields };
      });
      if (updated) return publicForm(updated);
      continue; // deleted meanwhile: create anew
    }
    const record: SubscriptionRecord = {
      ...fields,
      subscription_id: newSubscriptionId(),
      client_id: clientId,
      subscription_type: type,
      partition: caller.partition,
      created_at: now,
      secret: newSecret(),
    };
    if (await deps.store.create(record)) return publicForm(record);
  }
  throw unavailable("the subscription kept changing under concurrent requests; try again", 1);
}

export async function listSubscriptions(caller: Caller, deps: NotificationDeps): Promise<Subscription[]> {
  const records = (await fromView(deps))
    ? deps.view.ownedBy(caller.partition, caller.principal.clientId)
    : await deps.store.listOwn(caller.partition, caller.principal.clientId);
  return records.map(publicForm).sort((a, b) => a.subscription_type.localeCompare(b.subscription_type));
}

/**
 * Whether reads may come from the view: true once it holds every acknowledged write; false when it cannot catch up in
 * time (a watch on a lost cluster server), and the read goes to the bucket, the truth the view copies.
 */
async function fromView(deps: NotificationDeps): Promise<boolean> {
  return deps.view.fresh(VIEW_WAIT_MS).then(
    () => true,
    () => false,
  );
}

/** The caller's own subscription, or 404 for unknown ids and other owners alike. */
export async function ownSubscription(id: string, caller: Caller, deps: NotificationDeps): Promise<SubscriptionRecord> {
  let found: SubscriptionRecord | undefined;
  if (/^[A-Za-z0-9_-]{1,128}$/.test(id)) found = (await fromView(deps)) ? deps.view.get(id) : (await deps.store.get(id))?.value;
  if (!found || found.partition !== caller.partition || found.client_id !== caller.principal.clientId) {
    throw notFound(`subscription ${id} does not exist`);
  }
  return found;
}

export async function deleteSubscription(id: string, caller: Caller, deps: NotificationDeps): Promise<void> {
  const record = await ownSubscription(id, caller, deps);
  await deps.store.remove(record);
}

export async function getSecret(id: string, caller: Caller, deps: NotificationDeps): Promise<SecretReply> {
  return { key: (await ownSubscription(id, caller, deps)).secret };
}

export async function rotateSecret(id: string, caller: Caller, deps: NotificationDeps): Promise<SecretReply> {
  await ownSubscription(id, caller, deps);
  const key = newSecret();
  const now = deps.now?.() ?? Date.now();
  const updated = await deps.store.modify(id, (current) => ({
    ...current,
    previous_secret: current.secret,
    previous_secret_until: now + (deps.rotationOverlapMs ?? ROTATION_OVERLAP_MS),
    secret: key,
  }));
  if (!updated) throw notFound(`subscription ${id} does not exist`);
  return { key };
}

export async function listDeliveries(id: string, caller: Caller, deps: NotificationDeps): Promise<DeliveryList> {
  await ownSubscription(id, caller, deps);
  const attempts = await deps.journal.listAttempts(caller.partition, id, DELIVERIES_LISTED);
  return { deliveries: deliveryLog(attempts, DELIVERIES_LISTED) };
}

/**
 * A client was deleted (identity actor): its subscriptions made before `created_before`, in every partition, go with
 * their secrets, so a later client of that id inherits nothing. Idempotent: the identity actor repeats it until
 * answered (docs/notifications.md#deleted-clients).
 */
export async function forgetClient(input: ClientForget, deps: Pick<NotificationDeps, "store">): Promise<ClientForgotten> {
  const before = Date.parse(input.created_before);
  let removed = 0;
  for (const record of await deps.store.listOfClient(input.client_id)) {
    if (!(Date.parse(record.created_at) < before)) continue;
    await deps.store.remove(record);
    removed++;
  }
  return { removed };
}

/**
 * Replays one event to one subscription (also from DEAD, from the letter, which outlives EVENTS): one manual attempt, a
 * job for this subscription only, since publishing to EVENTS again would reach every subscriber of the type. The letter
 * stays in DEAD until an attempt succeeds (docs/notifications.md#retries-dead-letters-pausing).
 */
export async function retryDelivery(
  id: string,
  eventId: string,
  caller: Caller,
  deps: NotificationDeps,
  trace?: TraceContext,
): Promise<EventAccepted> {
  const record = await ownSubscription(id, caller, deps);
  const [dead, attempts] = await Promise.all([
    deps.journal.findDead(caller.partition, id, eventId),
    deps.journal.listAttempts(caller.partition, id, ATTEMPTS_SCANNED),
  ]);
  const last = attempts.findLast((a) => a.event_id === eventId);
  if (!dead && !last) throw notFound(`no delivery of event ${eventId} is known for subscription ${id}`);
  const eventSeq = dead?.letter.event_seq ?? last!.event_seq;
  const replayable = (dead && letterEvent(dead.letter)) || (await deps.journal.readEvent(eventSeq))?.event_id === eventId;
  if (!replayable) throw gone(`event ${eventId} is no longer stored (its retention passed), so it cannot be replayed`);
  await deps.journal.enqueue(
    {
      event_id: eventId,
      event_seq: eventSeq,
      partition: caller.partition,
      type: record.subscription_type,
      subscription_id: id,
      // Numbered after the last attempt logged; the log may have rolled over before DEAD did.
      attempt: (last?.attempt ?? dead?.letter.attempt ?? 0) + 1,
      due_at: deps.now?.() ?? Date.now(),
      manual: true,
      ...(dead ? { dead_seq: dead.seq } : {}),
      // The replay's attempt continues the trace of the request that asked for it.
      ...(trace ? traceHeaders(trace) : {}),
    },
    "retries",
  );
  return { event_id: eventId };
}

/** The HTTP door for events: group check by the caller of this function, size and shape here. */
export async function publishEvent(
  rawType: string,
  body: unknown,
  caller: Caller,
  deps: Pick<NotificationDeps, "journal">,
  eventId: string,
  trace?: TraceContext,
): Promise<EventAccepted> {
  const type = checkType(rawType, "/params/type");
  const size = Buffer.byteLength(JSON.stringify(body ?? null));
  if (size > EVENT_MAX_BYTES) throw contentTooLarge(`the event is ${size} bytes; the limit is ${EVENT_MAX_BYTES}`);
  const event = check(EventBody, body);
  if (!("data" in (event as object))) throw invalidField("/body/data", "is required");
  // As for subscriptions: data_source filters PublishData only, so on another type it could never mean anything
  // (docs/notifications.md#events).
  if ((event as { data_source?: unknown }).data_source != null && type !== "PublishData") {
    throw invalidField("/body/data_source", `applies only to PublishData events; send null or omit it for ${type}`);
  }
  await deps.journal.publishEvent(caller.partition, type, eventId, event, trace);
  return { event_id: eventId };
}
