/**
 * The JetStream side of notifications: the four streams, the consumers, and the reads and writes the
 * actors make on them.
 *   EVENTS      derrick.events.<partition>.<type>          limits, 7 days: every accepted event
 *   DELIVERIES  derrick.deliveries|retries.<p>.<sub>       work queue: one message per attempt to make
 *   DEAD        derrick.dead.<p>.<sub>                     limits, 30 days: exhausted or paused deliveries (with the event)
 *   ATTEMPTS    derrick.attempts.<p>.<sub>                 limits, 14 days, last 1000 messages per subscription
 * First attempts travel as batches (several events for one subscription); retries as single jobs.
 * Attempt records written in the same event-loop turn for one subscription share one message (a JSON
 * array): one stored write and one acknowledgement for many deliveries.
 */
import { SINGLE_NODE, directReads, isStreamNotFound, streamOptions, type StoragePolicy } from "../runtime/storage.ts";
import { onStreamDeleted, recreateDelay, withStream } from "../runtime/recreate.ts";
import type { Logger } from "../../platform/logger.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { traceHeaders, type TraceContext } from "../../platform/trace-context.ts";
import { traceMessageHeaders, traceOfMessage } from "../../platform/transport/index.ts";
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { check, subjects } from "../../subjects/index.ts";
import { readStream } from "../runtime/stream-read.ts";
import {
  EVENT_ID_PATTERN,
  EVENT_MAX_BYTES,
  type CarriedEvent,
  type CausingTrace,
  type DeadLetter,
  type DeliveryAttempt,
  type DeliveryBatch,
  type DeliveryJob,
  EventBody,
} from "../../subjects/notifications.ts";

export const STREAMS = { events: "EVENTS", deliveries: "DELIVERIES", dead: "DEAD", attempts: "ATTEMPTS" } as const;
export const CONSUMERS = { dispatcher: "dispatcher", deliverer: "deliverer", retries: "deliverer-retries" } as const;

/** Largest message EVENTS stores (its max_msg_size): the largest event plus room for headers. */
export const EVENTS_MESSAGE_BYTES = EVENT_MAX_BYTES + 4096;

const DAY_NS = 86_400 * 1e9;
const MS_NS = 1e6;
const ATTEMPTS_PER_SUBSCRIPTION = 1000;
/** Largest ATTEMPTS message (the stream's limit is 16 KiB); larger groups of records are split. */
const ATTEMPTS_MESSAGE_BYTES = 12 * 1024;
const EVENT_ID = new RegExp(EVENT_ID_PATTERN);
/** DEAD's message limit: a letter with an event of the largest size accepted. */
const DEAD_MESSAGE_BYTES = EVENT_MAX_BYTES + 64 * 1024;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** An attempt as stored: the listed shape plus where its event lives. */
export type AttemptRecord = DeliveryAttempt & { event_seq: number };

/** An event as read back from EVENTS. */
export type StoredEvent = EventBody & { event_id: string; event_seq: number; partition: string; type: string; time: string };

/** The part of an event that travels with a delivery (in a batch or a dead letter): body and time. */
export function carriedPart(event: StoredEvent): CarriedEvent {
  const { event_id: _i, event_seq: _s, partition: _p, type: _t, ...carried } = event;
  return carried;
}

/** An event carried with a delivery, as if read from EVENTS. */
export function fromCarried(job: Pick<DeliveryJob, "event_id" | "event_seq" | "partition" | "type">, event: CarriedEvent): StoredEvent {
  return { ...event, event_id: job.event_id, event_seq: job.event_seq, partition: job.partition, type: job.type };
}

export type Journal = {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /**
   * Creates the consumer, or updates it (ensureConsumer), first creating the streams again when its
   * stream is missing: an actor calls it at start and whenever it re-opens its consumer, so one
   * deleted on the server (consumer or stream) comes back with the configuration it started with.
   */
  ensureConsumer(spec: DurableConsumer): Promise<void>;
  /** `trace`: the publishing request's, stored in the message's headers for the deliveries to continue. */
  publishEvent(partition: string, type: string, eventId: string, body: EventBody, trace?: TraceContext): Promise<number>;
  /** Undefined when EVENTS no longer holds the event; throws when the stream cannot be read. */
  readEvent(seq: number): Promise<StoredEvent | undefined>;
  /** readEvent with the stored message's size in bytes (for callers that keep events in memory). */
  readSizedEvent(seq: number): Promise<{ event: StoredEvent; bytes: number } | undefined>;
  /** `dedupe` distinguishes re-queues of the same attempt from a re-sent job. */
  enqueue(job: DeliveryJob, lane: "deliveries" | "retries", dedupe?: string): Promise<void>;
  /** Stores first attempts of several events for one subscription; `msgID` makes a re-sent batch a no-op. */
  enqueueBatch(batch: DeliveryBatch, msgID: string): Promise<void>;
  deadLetter(letter: DeadLetter): Promise<void>;
  /** Resolves once the record is stored; records of one subscription in one turn share a message. */
  recordAttempt(partition: string, subscriptionId: string, attempt: AttemptRecord): Promise<void>;
  listAttempts(partition: string, subscriptionId: string, limit: number): Promise<AttemptRecord[]>;
  findDead(partition: string, subscriptionId: string, eventId: string): Promise<{ seq: number; letter: DeadLetter } | undefined>;
  /** Undefined when DEAD no longer holds the letter; throws when the stream cannot be read. */
  readDead(seq: number): Promise<DeadLetter | undefined>;
  forgetDead(seq: number): Promise<void>;
  /** Stops making the streams again on deletion advisories. */
  close(): void;
};

/** Creates (or updates) the streams; every actor calls it, so any start order works. */
export async function ensureStreams(jsm: JetStreamManager, policy: StoragePolicy = SINGLE_NODE): Promise<void> {
  const n = subjects.notifications;
  const specs = [
    {
      name: STREAMS.events,
      subjects: [n.allEvents()],
      retention: RetentionPolicy.Limits,
      max_age: 7 * DAY_NS,
      max_msg_size: EVENTS_MESSAGE_BYTES,
      duplicate_window: 120 * 1e9,
    },
    {
      name: STREAMS.deliveries,
      subjects: [n.allDeliveries(), n.allRetries()],
      retention: RetentionPolicy.Workqueue,
      max_age: 0,
      max_msg_size: 64 * 1024,
      duplicate_window: 120 * 1e9,
    },
    {
      name: STREAMS.dead,
      subjects: [n.allDead()],
      retention: RetentionPolicy.Limits,
      max_age: 30 * DAY_NS,
      max_msg_size: DEAD_MESSAGE_BYTES,
      duplicate_window: 120 * 1e9,
    },
    {
      name: STREAMS.attempts,
      subjects: [n.allAttempts()],
      retention: RetentionPolicy.Limits,
      max_age: 14 * DAY_NS,
      max_msg_size: 16 * 1024,
      duplicate_window: 120 * 1e9,
      max_msgs_per_subject: ATTEMPTS_PER_SUBSCRIPTION,
    },
  ];
  for (const spec of specs) {
    const config = { ...spec, storage: StorageType.File, discard: DiscardPolicy.Old, ...streamOptions(policy) };
    try {
      await jsm.streams.info(spec.name);
      await jsm.streams.update(spec.name, config);
    } catch (error) {
      if (
        !String((error as Error).message)
          .toLowerCase()
          .includes("not found")
      )
        throw error;
      try {
        await jsm.streams.add(config);
      } catch (addError) {
        // Another actor created it between our info and add.
        if (!String((addError as Error).message).includes("already in use")) throw addError;
      }
    }
  }
}

/** A durable pull consumer on a journal stream, as the actor reading it declares it (at start and on every re-opening). */
export type DurableConsumer = {
  stream: string;
  name: string;
  filter: string;
  ackWaitMs: number;
  maxAckPending: number;
  /** Where the consumer starts when it has to be created (a stream sequence); the stream's first message when absent. */
  startSeq?: number;
};

/** Creates a durable pull consumer, or updates its ack wait and ack-pending limit when it exists. */
export async function ensureConsumer(jsm: JetStreamManager, spec: DurableConsumer): Promise<void> {
  const { stream, name } = spec;
  const config = {
    durable_name: name,
    filter_subject: spec.filter,
    ack_policy: AckPolicy.Explicit,
    ...(spec.startSeq
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: spec.startSeq }
      : { deliver_policy: DeliverPolicy.All }),
    ack_wait: spec.ackWaitMs * MS_NS,
    max_deliver: -1,
    max_ack_pending: spec.maxAckPending,
  };
  try {
    await jsm.consumers.info(stream, name);
    await jsm.consumers.update(stream, name, { ack_wait: config.ack_wait, max_ack_pending: spec.maxAckPending });
  } catch {
    await jsm.consumers.add(stream, config).catch(async (error) => {
      if (!(await jsm.consumers.info(stream, name).catch(() => undefined))) throw error;
    });
  }
}

export async function openJournal(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE, log?: Logger): Promise<Journal> {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, policy);
  // A stream deleted at runtime is made again at the server's advisory: writes meanwhile fail and are retried by their
  // consumers, which come back when their loops re-open (ensureConsumer); an event makes EVENTS again itself (publishEvent).
  const ours = new Set<string>(Object.values(STREAMS));
  const deletions = onStreamDeleted(nc, (stream) => {
    if (!ours.has(stream)) return;
    log?.warn({ stream }, `stream ${stream} was deleted; making it again`);
    void recreateDelay()
      .then(() => ensureStreams(jsm, policy))
      .catch((err: unknown) => log?.warn({ err, stream }, "a deleted stream could not be made again yet; its next use tries again"));
  });
  // A message by sequence: from any replica when there is one, else from the stream leader (a
  // follower may not have a message yet that a dispatcher just stored).
  const messageAt = (stream: string, seq: number) =>
    directReads(policy) ? jsm.direct.getMessage(stream, { seq }) : jsm.streams.getMessage(stream, { seq });
  const n = subjects.notifications;
  const json = (value: unknown) => encoder.encode(JSON.stringify(value));

  // Attempt records waiting for this turn's write, per ATTEMPTS subject.
  let pendingRecords = new Map<string, Array<{ record: AttemptRecord; done: (error?: unknown) => void }>>();
  const writeRecords = () => {
    const groups = pendingRecords;
    pendingRecords = new Map();
    for (const [subject, entries] of groups) {
      for (const chunk of chunkRecords(entries.map((e) => e.record))) {
        const waiting = entries.splice(0, chunk.length);
        js.publish(subject, encoder.encode(chunk.length === 1 ? chunk[0]! : `[${chunk.join(",")}]`)).then(
          () => waiting.forEach((w) => w.done()),
          (error) => waiting.forEach((w) => w.done(error ?? new Error("attempt record not stored"))),
        );
      }
    }
  };

  const readSizedEvent = async (seq: number) => {
    // Only "not found" means gone: any other error must not make a delivery look expired.
    const stored = await messageAt(STREAMS.events, seq);
    if (!stored || stored.seq !== seq) return undefined;
    const event = storedEvent(stored);
    return event && { event, bytes: stored.data.length };
  };

  return {
    js,
    jsm,
    close: () => deletions.unsubscribe(),
    async ensureConsumer(spec) {
      try {
        await ensureConsumer(jsm, spec);
      } catch (error) {
        if (!isStreamNotFound(error)) throw error;
        await ensureStreams(jsm, policy);
        // A stream made just now holds nothing a start position was meant for: take it from its first message.
        await ensureConsumer(jsm, { ...spec, startSeq: undefined });
      }
    },
    publishEvent(partition, type, eventId, body, trace) {
      const headers = trace ? traceMessageHeaders(trace) : undefined;
      // EVENTS deleted (and the advisory not acted on yet): the streams are made again, then it is published there.
      return withStream(
        jsm,
        STREAMS.events,
        () => ensureStreams(jsm, policy),
        async () =>
          (await js.publish(subjects.events(partition, type), json(body), { msgID: eventId, ...(headers ? { headers } : {}) })).seq,
      );
    },
    async readEvent(seq) {
      return (await readSizedEvent(seq))?.event;
    },
    readSizedEvent,
    async enqueue(job, lane, dedupe) {
      const subject =
        lane === "deliveries" ? n.deliveries(job.partition, job.subscription_id) : n.retries(job.partition, job.subscription_id);
      // The id makes a re-sent job (a dispatcher redelivered after a crash) a no-op within the window.
      const msgID = `${lane}:${job.event_id}:${job.subscription_id}:${job.attempt}${job.manual ? `:m${job.due_at}` : ""}${dedupe ? `:${dedupe}` : ""}`;
      await js.publish(subject, json(job), { msgID });
    },
    async deadLetter(letter) {
      let payload = json(letter);
      // An event published on NATS can grow when written again (`1e20`: 21 digits) past DEAD's limit, headers included:
      // the letter goes without it, since one that cannot be stored would repeat the attempt for good.
      if (payload.length > DEAD_MESSAGE_BYTES - 1024 && letter.event) {
        const { event: _tooLarge, ...withoutEvent } = letter;
        payload = json(withoutEvent);
      }
      await js.publish(n.dead(letter.partition, letter.subscription_id), payload, { msgID: deadLetterId(letter) });
    },
    async enqueueBatch(batch, msgID) {
      await js.publish(n.deliveries(batch.partition, batch.subscription_id), json(batch), { msgID });
    },
    recordAttempt(partition, subscriptionId, attempt) {
      const subject = n.attempts(partition, subscriptionId);
      return new Promise<void>((resolve, reject) => {
        let group = pendingRecords.get(subject);
        if (!group) pendingRecords.set(subject, (group = []));
        if (pendingRecords.size === 1 && group.length === 0) setImmediate(writeRecords);
        group.push({ record: attempt, done: (error) => (error ? reject(error) : resolve()) });
      });
    },
    async listAttempts(partition, subscriptionId, limit) {
      // A message holds one record or an array of records; the newest `limit` records are kept.
      const records: AttemptRecord[] = [];
      await readStream(js, STREAMS.attempts, { filter: n.attempts(partition, subscriptionId) }, (m) => {
        const stored = JSON.parse(decoder.decode(m.data)) as AttemptRecord | AttemptRecord[];
        if (Array.isArray(stored)) records.push(...stored);
        else records.push(stored);
        if (records.length > 2 * limit) records.splice(0, records.length - limit);
      });
      return records.slice(-limit);
    },
    async findDead(partition, subscriptionId, eventId) {
      // Headers only: a letter carries its event (up to 256 KiB), while its message id names the event.
      let seq = 0;
      await readStream(js, STREAMS.dead, { filter: n.dead(partition, subscriptionId), headersOnly: true }, (m) => {
        if (isDeadLetterOf(m.headers?.get("Nats-Msg-Id") ?? "", eventId, subscriptionId)) seq = m.seq;
      });
      if (seq === 0) return undefined;
      const stored = await messageAt(STREAMS.dead, seq);
      if (!stored || stored.seq !== seq) return undefined;
      const letter = JSON.parse(decoder.decode(stored.data)) as DeadLetter;
      return letter.event_id === eventId ? { seq, letter } : undefined;
    },
    async readDead(seq) {
      const stored = await messageAt(STREAMS.dead, seq);
      if (!stored || stored.seq !== seq) return undefined;
      return JSON.parse(decoder.decode(stored.data)) as DeadLetter;
    },
    async forgetDead(seq) {
      await jsm.streams.deleteMessage(STREAMS.dead, seq, false).catch(() => undefined);
    },
  };
}

/** The trace an EVENTS message's headers carry, as a delivery carries it on (none when absent or invalid). */
export function causingTrace(header: { get(key: string): string } | undefined): CausingTrace {
  const trace = traceOfMessage(header);
  return trace ? traceHeaders(trace) : {};
}

/** A dead letter's message id: a letter re-sent after a crash is a duplicate, and a headers-only read finds an event's letters. */
export function deadLetterId(letter: Pick<DeadLetter, "event_id" | "subscription_id" | "attempt">): string {
  return `dead:${letter.event_id}:${letter.subscription_id}:${letter.attempt}`;
}

/** Whether a DEAD message id is a letter of this event to this subscription (an event id may hold `:`, the attempt never). */
export function isDeadLetterOf(messageId: string, eventId: string, subscriptionId: string): boolean {
  const prefix = `dead:${eventId}:${subscriptionId}:`;
  return messageId.startsWith(prefix) && /^[0-9]+$/.test(messageId.slice(prefix.length));
}

/** Encodes records and splits them into groups that fit one ATTEMPTS message. */
function chunkRecords(records: AttemptRecord[]): string[][] {
  const chunks: string[][] = [];
  let current: string[] = [];
  let bytes = 2;
  for (const record of records) {
    const text = JSON.stringify(record);
    if (current.length > 0 && bytes + text.length + 1 > ATTEMPTS_MESSAGE_BYTES) {
      chunks.push(current);
      current = [];
      bytes = 2;
    }
    current.push(text);
    bytes += text.length + 1;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

type EventsMessage = { subject: string; seq: number; data: Uint8Array; header?: { get(k: string): string }; time: Date };

/** Decodes an EVENTS message (payload, subject tokens, id header, store time). */
export function storedEvent(msg: EventsMessage): StoredEvent | undefined {
  const decoded = decodeEvent(msg, false);
  return "event" in decoded ? decoded.event : undefined;
}

/**
 * Decodes an EVENTS message and, with `strict`, checks it as the HTTP door does (size, EventBody schema, `data` present):
 * events published on NATS reach JetStream unchecked. The door's rule on `data_source` is not applied
 * (docs/notifications.md#events).
 */
export function decodeEvent(msg: EventsMessage, strict: boolean): { event: StoredEvent } | { problem: string } {
  const [, , partition, type] = msg.subject.split(".");
  if (!partition || !type) return { problem: "not on an events subject" };
  if (strict && msg.data.length > EVENT_MAX_BYTES)
    return { problem: `the event is ${msg.data.length} bytes; the limit is ${EVENT_MAX_BYTES}` };
  let body: EventBody;
  try {
    body = JSON.parse(decoder.decode(msg.data)) as EventBody;
  } catch {
    return { problem: "not JSON" };
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) return { problem: "not a JSON object" };
  if (strict) {
    try {
      check(EventBody, body, "");
    } catch (error) {
      return { problem: (error as Error).message };
    }
  }
  if (!("data" in body) || body.data === undefined) return { problem: "/data: is required" };
  const id = msg.header?.get("Nats-Msg-Id");
  return {
    event: {
      ...body,
      event_id: id && EVENT_ID.test(id) ? id : `evt_${msg.seq}`,
      event_seq: msg.seq,
      partition,
      type,
      time: msg.time.toISOString(),
    },
  };
}

/**
 * The event a dead letter holds, if any. Letters written before eventless letters existed stored a
 * placeholder (`data: null`, time 1970) when the event was gone: that is no event either.
 */
export function letterEvent(letter: DeadLetter): CarriedEvent | undefined {
  const event = letter.event;
  return event && Date.parse(event.time) > 0 ? event : undefined;
}
