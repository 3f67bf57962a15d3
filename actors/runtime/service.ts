/**
 * Turns an actor's endpoint list into a NATS micro-service (`@nats-io/services`: queue group, version, metadata,
 * $SRV discovery) served by one shared dispatcher: each message in its own try/catch, handlers started rather than
 * awaited, at most `concurrency` at once and a bounded queue beyond which a request is answered 503 with Retry-After,
 * 504 past the deadline, and a stop() that drains (docs/operations.md#the-service-dispatcher).
 */
import type { StoragePolicy } from "./storage.ts";
import { hostname } from "node:os";
import type { Registry } from "prom-client";
import { actorMetrics } from "./metrics.ts";
import { parseTraceparent, type TraceContext } from "../../platform/trace-context.ts";
import { noTracer, type Span, type Tracer } from "../../platform/tracing.ts";
import { Svcm, type Service, type ServiceMsg } from "@nats-io/services";
import type { NatsConnection } from "@nats-io/nats-core";
import type { TSchema, Static } from "@sinclair/typebox";
import { MsgHdrsImpl, nuid } from "@nats-io/nats-core";
import {
  Header,
  MAX_REPLY_BYTES,
  EncodedJson,
  Reply,
  check,
  gatewayTimeout,
  badRequest,
  unavailable,
  isPublishedTo,
  serviceName,
  toDerrickError,
  type DerrickError,
  type Operation,
  type ReplyOf,
  type RequestOf,
  type RequestMeta,
  NoRequest,
} from "../../subjects/index.ts";
import { readRequestMeta } from "../../platform/transport/index.ts";
import type { Logger } from "../../platform/logger.ts";
import { buildInfo } from "../../platform/build-info.ts";
import { InFlightLimiter, type QueueBound } from "./limiter.ts";
import { transientNatsProblem } from "./nats-errors.ts";
import { codedBody } from "./compressed-replies.ts";
import { bodyTag, offers } from "./body-tags.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { RequestContext } from "./context.ts";

/** What a handler may answer: the reply itself, its JSON already encoded, or either with a status and headers. */
export type HandlerResult<O> = O | EncodedJson<O> | Reply<O | EncodedJson<O>>;
export type Handler<I, O> = (input: I, ctx: RequestContext) => Promise<HandlerResult<O>> | HandlerResult<O>;

/** One endpoint as the runtime serves it: built by `endpoint(op, handler)`. */
export type EndpointSpec = {
  /** Endpoint name shown by $SRV.INFO. */
  name: string;
  subject: string;
  /** Request body schema; every request is checked against it before the handler runs. */
  input: TSchema;
  handler: Handler<unknown, unknown>;
  description?: string;
};

/** Serves an operation: the handler takes what its request schema decodes and must answer its reply type. */
export function endpoint<O extends Operation>(op: O, handler: Handler<RequestOf<O>, ReplyOf<O>>): EndpointSpec;
/** Serves a subject that is not a declared operation (tests, tools): any JSON body unless `input` says otherwise. */
export function endpoint<S extends TSchema>(spec: {
  name: string;
  subject: string;
  input?: S;
  handler: Handler<Static<S>, unknown>;
  description?: string;
}): EndpointSpec;
export function endpoint(
  op: Operation | (Omit<EndpointSpec, "input" | "handler"> & { input?: TSchema; handler: Handler<never, unknown> }),
  handler?: Handler<never, unknown>,
): EndpointSpec {
  // The overloads tie each handler to its schema; the runtime checks every input against that schema before the call.
  if (!("request" in op)) return { ...op, input: op.input ?? NoRequest, handler: op.handler as Handler<unknown, unknown> };
  return {
    name: op.endpoint,
    subject: op.subject,
    input: op.request,
    handler: handler as Handler<unknown, unknown>,
    ...(op.summary ? { description: op.summary } : {}),
  };
}

/** Handlers written as `(input, ctx, deps)`, served with one actor's deps: `const on = endpointsWith(deps); on(op, handler)`. */
export function endpointsWith<D>(deps: D) {
  return <O extends Operation>(
    op: O,
    handler: (input: RequestOf<O>, ctx: RequestContext, deps: D) => ReturnType<Handler<RequestOf<O>, ReplyOf<O>>>,
  ): EndpointSpec => endpoint(op, (input, ctx) => handler(input, ctx, deps));
}

export type ActorSpec = {
  /** Short actor name (e.g. `notifications`); the service is `derrick-<name>`. */
  name: string;
  /** Defaults to the build's version (package.json). */
  version?: string;
  description: string;
  endpoints: EndpointSpec[];
  /** What the actor tells of its background work in `$SRV.STATS` (each endpoint's `data`), e.g. a replica's applied sequence. */
  work?: () => Record<string, unknown>;
};

export type RuntimeOptions = {
  log: Logger;
  concurrency: number;
  /** What may wait for a free slot, per actor (all its endpoints); unbounded when absent. */
  queue?: QueueBound;
  /** How the streams and buckets the actor creates are replicated; one server's when absent. */
  storage?: StoragePolicy;
  /** The process's Prometheus registry, for the actor's series (none when absent). */
  metrics?: Registry;
  /** Records a span for each request handled that belongs to a trace (none exported when absent). */
  tracer?: Tracer;
};

export type ServedActor = {
  name: string;
  service: Service;
  /** Stops taking requests, then waits for those already received. */
  stop(): Promise<void>;
};

const encoder = new TextEncoder();

/**
 * Serves an actor. `release` frees what the actor holds beside its service (watchers, timers,
 * files): it runs once the service has stopped and answered what it held, or at once if serving fails.
 */
export async function serveActor(
  nc: NatsConnection,
  spec: ActorSpec,
  options: RuntimeOptions,
  release?: () => void | Promise<void>,
): Promise<ServedActor> {
  let served: ServedActor;
  try {
    served = await serve(nc, spec, options);
  } catch (error) {
    await release?.();
    throw error;
  }
  if (!release) return served;
  return {
    ...served,
    async stop() {
      await served.stop();
      await release();
    },
  };
}

async function serve(nc: NatsConnection, spec: ActorSpec, options: RuntimeOptions): Promise<ServedActor> {
  const log = options.log.child({ actor: spec.name });
  const limiter = new InFlightLimiter(options.concurrency, options.queue);
  const tracer = options.tracer ?? noTracer;
  if (options.metrics) actorMetrics(options.metrics).actorLoad(spec.name, () => limiter.load);
  const service = await new Svcm(nc).add({
    name: serviceName(spec.name),
    version: spec.version ?? buildInfo().version,
    description: spec.description,
    queue: serviceName(spec.name),
    // Where the process runs, for `derrick status` (the instance id alone names no machine).
    metadata: { actor: spec.name, host: hostname(), pid: String(process.pid) },
    statsHandler: async () => {
      const { running, waiting } = limiter.load;
      return { inflight: running, queued: waiting, ...spec.work?.() };
    },
  });
  const refused = summarizedWarning(
    log,
    "refused a message not sent as a request to this endpoint (a JetStream delivery aimed at an actor subject)",
  );
  const shed = summarizedWarning(
    log,
    "overloaded: refused requests with 503 because the queue for a free slot is full (DERRICK_ACTOR_QUEUE, DERRICK_ACTOR_QUEUE_BYTES)",
  );
  for (const ep of spec.endpoints) {
    service.addEndpoint(ep.name, {
      subject: ep.subject,
      metadata: { description: ep.description ?? ep.name },
      handler: (error, msg) => {
        if (error) {
          log.error({ err: error, endpoint: ep.name }, "endpoint subscription failed");
          return;
        }
        // A JetStream delivery aimed at this subject (see subjects/delivery.ts) is not a request.
        if (!isPublishedTo(msg, ep.subject)) return refused({ subject: msg.subject, reply: msg.reply });
        if (limiter.run(() => handleMessage(msg, ep, log, nc, spec.name, tracer), msg.data.length)) return;
        const { running, waiting, waitingBytes } = limiter.load;
        shed({ endpoint: ep.name, running, waiting, waitingBytes });
        respondProblem(
          msg,
          unavailable(`the ${spec.name} actor is overloaded (${running} requests running, ${waiting} waiting); retry shortly`),
          readRequestMeta(msg).requestId,
        );
      },
    });
  }
  // Round trip to the server: once this returns, the subscriptions are live and requests reach us.
  await nc.flush();
  log.info({ service: serviceName(spec.name), endpoints: spec.endpoints.map((e) => e.subject) }, "actor serving");
  return {
    name: spec.name,
    service,
    async stop() {
      await service.stop();
      await limiter.idle();
      log.info("actor stopped");
    },
  };
}

/** A warning for something that can happen thousands of times a second: the first at once, then at most one a minute with the count since the last. */
function summarizedWarning(log: Logger, message: string) {
  let count = 0;
  let lastWarned = 0;
  return (fields: Record<string, unknown>) => {
    count++;
    const now = Date.now();
    if (now - lastWarned < 60_000) return;
    log.warn({ ...fields, count }, message);
    lastWarned = now;
    count = 0;
  };
}

/** Handles one request; never throws. `nc` tells the server's max_payload (replies larger go in chunks). */
async function handleMessage(
  msg: ServiceMsg,
  ep: EndpointSpec,
  log: Logger,
  nc: NatsConnection,
  actor: string,
  tracer: Tracer,
): Promise<void> {
  let ctx: RequestContext | undefined;
  let span: Span | undefined;
  let status = 200;
  try {
    const meta = readRequestMeta(msg);
    const requestId = meta.requestId ?? nuid.next();
    let child: Logger | undefined;
    // Read only when first used (a log line, work carried on): most requests need neither.
    let trace: { context?: TraceContext } | undefined;
    if (tracer.exporting && meta.traceparent) {
      const parent = parseTraceparent(meta.traceparent, meta.tracestate);
      span = parent && tracer.handler(parent, actor, ep.name, ep.subject);
      trace = { context: span?.context };
    }
    const traceOfRequest = () => (trace ??= { context: parseTraceparent(meta.traceparent, meta.tracestate) }).context;
    ctx = {
      principal: meta.principal,
      partition: meta.partition,
      deadline: meta.deadline,
      requestId,
      // Decoded only for the rare handler that reads a header of its own.
      get headers() {
        return msg.headers;
      },
      get trace() {
        return traceOfRequest();
      },
      // Built only when first used: most requests never log.
      get log() {
        const traceId = traceOfRequest()?.traceId;
        return (child ??= log.child({ requestId, endpoint: ep.name, ...(traceId ? { traceId } : {}) }));
      },
    };
    if (meta.deadline && meta.deadline <= Date.now()) throw gatewayTimeout("the caller's deadline passed before the request was handled");
    const input = decodeBody(msg, ep);
    const result = await ep.handler(input, ctx);
    if (result instanceof Reply) status = result.status;
    respond(msg, result, nc.info?.max_payload, meta);
  } catch (error) {
    const problem = toDerrickError(transientNatsProblem(error) ?? error);
    status = problem.status;
    if (problem.status >= 500 && problem.status !== 503 && problem.status !== 504) {
      (ctx?.log ?? log).error({ err: error, subject: msg.subject }, "handler failed");
    }
    respondProblem(msg, problem, ctx?.requestId);
  } finally {
    span?.end({ status, ...(status >= 500 ? { error: `answered ${status}` } : {}) });
  }
}

function decodeBody(msg: ServiceMsg, ep: EndpointSpec): unknown {
  let body: unknown;
  if (msg.data.length > 0) {
    try {
      body = msg.json();
    } catch {
      throw badRequest("the request body is not valid JSON");
    }
  }
  return check(ep.input, body);
}

/**
 * A plain result goes out as its JSON alone; a Reply adds its status and headers; a held body may go compressed, and
 * goes without its bytes to a caller that holds them already (body-tags.ts).
 */
function respond(msg: ServiceMsg, result: unknown, maxPayload: number | undefined, meta: RequestMeta): void {
  const body = result instanceof Reply ? result.body : result;
  let headers = result instanceof Reply ? result.headers : undefined;
  let payload: Uint8Array | undefined;
  let tag: string | undefined;
  if (body instanceof EncodedJson) {
    ({ bytes: payload, headers } = codedBody(body, headers, meta.acceptEncoding));
    if (body.held) tag = bodyTag(payload, meta.haveBody !== undefined);
  } else if (body !== undefined) payload = encoder.encode(JSON.stringify(body));
  const status = result instanceof Reply ? result.status : 200;
  const chunkBytes = chunkSize(maxPayload);
  if (tag !== undefined) {
    const blocks = taggedHeaders(payload!, tag, status, headers);
    if (offers(meta.haveBody, tag)) return void msg.respond(undefined, { headers: blocks.same });
    if (payload!.length <= chunkBytes) return void msg.respond(payload, { headers: blocks.sent });
  }
  if (!payload || payload.length <= chunkBytes) {
    const encoded = oneMessageHeaders(status, headers);
    return void msg.respond(payload, encoded ? { headers: encoded } : undefined);
  }
  const first = headerFields(status, headersJson(headers));
  if (tag !== undefined) first.set(Header.bodyTag, tag);
  respondInChunks(msg, payload, first, chunkBytes);
}

type TaggedBlocks = { key: string; sent: MsgHdrsImpl; same: MsgHdrsImpl };

/** A tagged body's two header blocks (sent with it, and naming it instead), made and encoded once per body, status and headers. */
const taggedBlocks = new WeakMap<Uint8Array, TaggedBlocks>();

function taggedHeaders(bytes: Uint8Array, tag: string, status: number, headers: Record<string, string> | undefined): TaggedBlocks {
  const json = headersJson(headers);
  const key = `${status} ${json ?? ""}`;
  const held = taggedBlocks.get(bytes);
  if (held?.key === key) return held;
  const block = (name: string) => {
    const fields = headerFields(status, json);
    fields.set(name, tag);
    return encodedOnce(toHeaders(fields));
  };
  const blocks = { key, sent: block(Header.bodyTag), same: block(Header.sameBody) };
  // Per-resource headers (an ETag) are as stable as the bytes they go with; a hit's own header changes rarely.
  taggedBlocks.set(bytes, blocks);
  return blocks;
}

/**
 * The header block of a one-message reply, made and encoded once per distinct status and headers: a held reply goes
 * with the same ones every time. Bounded by count; headers that name one resource (an ETag, a Location) are not kept.
 */
const headerBlocks = new BoundedCache<string, MsgHdrsImpl>({ max: 256 });
const PER_RESOURCE = /"(?:etag|location)":/i;

function oneMessageHeaders(status: number, headers: Record<string, string> | undefined): MsgHdrsImpl | undefined {
  if (headers && Object.isFrozen(headers)) return frozenHeaderBlock(status, headers);
  const json = headersJson(headers);
  if (status === 200 && json === undefined) return undefined;
  if (json !== undefined && PER_RESOURCE.test(json)) return toHeaders(headerFields(status, json));
  const key = `${status} ${json ?? ""}`;
  let block = headerBlocks.get(key);
  if (block) return block;
  block = encodedOnce(toHeaders(headerFields(status, json)));
  headerBlocks.set(key, block);
  return block;
}

/**
 * A frozen headers record is one its owner answers with again and again (a twin's ETag until its next write): its block
 * is made once per record and status, and lives as long as the record does.
 */
const frozenBlocks = new WeakMap<Readonly<Record<string, string>>, { status: number; block: MsgHdrsImpl | undefined }>();

function frozenHeaderBlock(status: number, headers: Readonly<Record<string, string>>): MsgHdrsImpl | undefined {
  const held = frozenBlocks.get(headers);
  if (held?.status === status) return held.block;
  const json = headersJson(headers);
  const block = status === 200 && json === undefined ? undefined : encodedOnce(toHeaders(headerFields(status, json)));
  frozenBlocks.set(headers, { status, block });
  return block;
}

/** nats.js encodes a message's headers on each publish (MsgHdrsImpl.encode); a block kept for reuse never changes. */
function encodedOnce(block: MsgHdrsImpl): MsgHdrsImpl {
  const bytes = block.encode();
  block.encode = () => bytes;
  return block;
}

const headersJson = (headers: Record<string, string> | undefined) =>
  headers && Object.keys(headers).length ? JSON.stringify(headers) : undefined;

/** The headers a reply adds: its status when not 200, its HTTP headers (as JSON) for the edge. */
function headerFields(status: number, json: string | undefined): Map<string, string> {
  const h = new Map<string, string>();
  if (status !== 200) h.set(Header.status, String(status));
  if (json !== undefined) h.set(Header.replyHeaders, json);
  return h;
}

/** Room left in each message for its headers (status, reply headers, chunk index). */
const HEADER_ROOM = 16 * 1024;

/** The body bytes one reply message may carry: all of max_payload but the header room (unknown = one message). */
function chunkSize(maxPayload: number | undefined): number {
  return maxPayload && maxPayload > 2 * HEADER_ROOM ? maxPayload - HEADER_ROOM : Number.POSITIVE_INFINITY;
}

/**
 * A reply larger than one NATS message goes as several, in order on this connection (NATS keeps one publisher's order),
 * and the Bus joins them: a reply within the documented limits may pass an external server's 1 MB max_payload.
 */
function respondInChunks(msg: ServiceMsg, payload: Uint8Array, first: Map<string, string>, chunkBytes: number): void {
  if (payload.length > MAX_REPLY_BYTES)
    throw new Error(`the reply is ${payload.length} bytes, over the ${MAX_REPLY_BYTES} a reply may take`);
  const count = Math.ceil(payload.length / chunkBytes);
  for (let i = 0; i < count; i++) {
    const h = i === 0 ? new Map(first) : new Map<string, string>();
    h.set(Header.chunk, `${i + 1}/${count}`);
    msg.respond(payload.subarray(i * chunkBytes, Math.min(payload.length, (i + 1) * chunkBytes)), { headers: toHeaders(h) });
  }
}

function respondProblem(msg: ServiceMsg, error: DerrickError, requestId?: string): void {
  const h = new Map<string, string>();
  if (Object.keys(error.headers).length) h.set(Header.replyHeaders, JSON.stringify(error.headers));
  const body = encoder.encode(JSON.stringify(error.toProblem(requestId ? `urn:derrick:request:${requestId}` : undefined)));
  msg.respondError(error.status, error.title, body, h.size ? { headers: toHeaders(h) } : undefined);
}

/**
 * Straight into nats-core's header map, as the request side does (request-meta.ts): `set()` validates and
 * canonicalizes per key on every reply. The values cannot break the block: digits, and JSON (which escapes CR/LF).
 */
function toHeaders(entries: Map<string, string>): MsgHdrsImpl {
  const fields: Record<string, string[]> = {};
  for (const [k, v] of entries) fields[k] = [v];
  // fromRecord makes an MsgHdrsImpl (typed as the interface): oneMessageHeaders memoizes its encode().
  return MsgHdrsImpl.fromRecord(fields) as MsgHdrsImpl;
}
