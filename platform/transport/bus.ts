/**
 * The request side of the contract: one NATS request with the caller's metadata in headers, the
 * reply decoded, and transport failures mapped to the error model (no responders → 503,
 * timeout → 504, a service error → the actor's own problem and status).
 */
import { gunzipSync } from "node:zlib";
import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Status, type Subscription } from "@nats-io/nats-core";
import { ServiceErrorCodeHeader, ServiceErrorHeader } from "@nats-io/services";
import {
  DerrickError,
  Header,
  MAX_REPLY_BYTES,
  badGateway,
  contentTooLarge,
  gatewayTimeout,
  unavailable,
  type Operation,
  type Problem,
  type ReplyOf,
  type RequestOf,
  type RequestMeta,
} from "../../subjects/index.ts";
import { encodeRequestMeta, parseHeaderBlock, rawHeaderBlock } from "./request-meta.ts";
import { headerNamed } from "./header-names.ts";
import { bodyTagOf } from "./body-tags.ts";
import { BoundedCache } from "../bounded-cache.ts";
import { noTracer, type Span, type Tracer } from "../tracing.ts";
import { formatTraceparent, parseTraceparent } from "../trace-context.ts";

export type BusReply<T> = {
  status: number;
  /** The reply decoded from JSON (parsed on first access). */
  readonly body: T;
  /**
   * The reply's bytes as the actor sent them (empty for no body): JSON, or gzip of it when the request took gzip
   * (RequestMeta.acceptEncoding) and the reply headers say `Content-Encoding: gzip`. A kept body's bytes are shared
   * with every later reply that names it (docs/edge.md#bodies-not-sent-twice): never change them; copy first.
   */
  readonly raw: Uint8Array;
  /** The HTTP headers the actor set, shared between replies alike (frozen): copy before changing. */
  headers: Readonly<Record<string, string>>;
};

export type BusOptions = {
  /** Default time to wait for a reply. */
  timeoutMs: number;
  /** Observes every request's duration (metrics). */
  onRequest?: (subject: string, seconds: number, outcome: string) => void;
  /** The server refused the reply inbox: every request fails with 503 from then on (log it). */
  onInboxError?: (error: Error) => void;
  /** Records a client span for each request that belongs to a trace (when it exports). */
  tracer?: Tracer;
  /** Each successful reply's body size, and whether the actor named a kept body instead of sending it (metrics). */
  onReplyBody?: (bytes: number, named: boolean) => void;
  /** The bound of the tagged bodies kept to offer back (KEPT_BODIES by default; `false`: none kept, none offered). */
  keptBodies?: KeptBodiesLimits | false;
};

export type KeptBodiesLimits = { entries: number; bytes: number };

/**
 * Tagged reply bodies kept by request, so that the next request like it offers their tags and the actor need not send the
 * same bytes again (docs/edge.md#bodies-not-sent-twice). Bounded by count and bytes, the least recently used first.
 */
export const KEPT_BODIES: KeptBodiesLimits = { entries: 1_000, bytes: 16 * 1024 * 1024 };

/** Bodies kept per request: one per replica or per caller's view that answers it differently, the newest first. */
export const BODIES_PER_REQUEST = 4;

/** A request body longer than this is not a key: such requests are writes, not reads answered again. */
const MAX_KEY_CHARS = 4096;

type KeptBody = { tag: string; raw: Uint8Array };
/** What a request kept: its bodies, the newest first, and the `Derrick-Have-Body` value offering them (empty: seen once, none kept yet). */
type Kept = { bodies: readonly KeptBody[]; offer: string };
const SEEN_ONCE: Kept = Object.freeze({ bodies: Object.freeze([]), offer: "" });

const encoder = new TextEncoder();

/** A reply message and its headers by name (the first message's, for a reply sent in chunks). */
type Received = { msg: Msg; header: HeaderOf };
type HeaderOf = (name: string) => string | undefined;

type Pending = {
  resolve(received: Received): void;
  reject(error: Error): void;
  timer: ReturnType<typeof setTimeout>;
  /** The messages so far of a reply sent in chunks (`Derrick-Chunk`). */
  chunks?: { first: Received; count: number; parts: Uint8Array[]; bytes: number };
};

/**
 * Requests go out with a reply subject under one wildcard inbox subscription of this Bus, and the reply settles
 * the waiting promise by its token: nats.js' muxed `request()` without its per-request Error, timer race and
 * deferred (docs/edge.md#the-transports-own-paths).
 */
export class Bus {
  private readonly inbox: string;
  private readonly pending = new Map<string, Pending>();
  private sequence = 0;
  /** Set while the connection is down: nothing sent then can be answered (nats.js drops it). */
  private disconnected = false;
  /** Set for good when the server refused the inbox subscription (e.g. a user without `_INBOX.>`). */
  private inboxRefused: Error | undefined;
  /** Set by close(): requests are refused, the inbox and the status listener are released. */
  private closedError: Error | undefined;
  private readonly sub: Subscription;
  /** The connection's status events, stopped by close(): a Bus on a connection that outlives it must not keep a listener there. */
  private readonly statuses: AsyncIterable<Status> & { stop?: () => void };
  private readonly bodies: BoundedCache<string, Kept> | undefined;
  /** What one request may keep in all: more would push most others out. */
  private readonly keptPerRequest: number = 0;

  constructor(
    readonly nc: NatsConnection,
    private readonly options: BusOptions,
  ) {
    this.inbox = `${createInbox()}.`;
    const kept = options.keptBodies ?? KEPT_BODIES;
    if (kept) {
      this.bodies = new BoundedCache({ max: kept.entries, maxWeight: kept.bytes });
      this.keptPerRequest = kept.bytes / 16;
    }
    this.statuses = nc.status();
    this.sub = nc.subscribe(`${this.inbox}*`, {
      callback: (error, msg) => {
        if (error) {
          // nats.js closes a refused subscription: without this every request would wait out its timeout.
          this.inboxRefused = unavailable(`the message bus refused this process's reply inbox: ${error.message}`, 30);
          this.options.onInboxError?.(error);
          return this.failAll(this.inboxRefused);
        }
        const token = msg.subject.slice(this.inbox.length);
        const waiting = this.pending.get(token);
        if (!waiting) return; // answered after its timeout
        const received = { msg, header: headersOf(msg) };
        const chunk = received.header(Header.chunk);
        const reply = chunk ? collectChunk(waiting, received, chunk) : received;
        if (reply === undefined) return; // more chunks to come
        this.pending.delete(token);
        clearTimeout(waiting.timer);
        if (reply instanceof Error) waiting.reject(reply);
        else waiting.resolve(reply);
      },
    });
    void this.followConnection();
  }

  /**
   * Waiters fail the moment the connection drops or closes, not at their timeout. Their requests were sent and
   * may have been carried out: 504 like a timeout, not 503 with Retry-After, which would invite a repeat (an event
   * published twice, a second task). Requests refused before they are sent get 503.
   */
  private async followConnection(): Promise<void> {
    void this.nc.closed().then(() => this.failAll(outcomeUnknown("closed")));
    for await (const status of this.statuses) {
      if (status.type === "disconnect") {
        this.disconnected = true;
        this.failAll(outcomeUnknown("dropped"));
      } else if (status.type === "reconnect") {
        this.disconnected = false;
      }
    }
  }

  /**
   * Releases what this Bus holds on its connection (the reply inbox subscription, the status
   * listener) for a Bus that ends before its connection does. Requests still waiting were sent: they
   * fail with 504 (outcome unknown, like a dropped connection), new ones with 503.
   */
  close(): void {
    if (this.closedError) return;
    this.closedError = unavailable("the message bus client is closed", 1);
    this.statuses.stop?.();
    if (!this.sub.isClosed()) this.sub.unsubscribe();
    this.failAll(gatewayTimeout("the message bus client was closed after the request was sent: whether it was carried out is unknown"));
  }

  /** Calls an operation: the compiler checks the input against its request schema and types the reply. */
  request<O extends Operation>(op: O, input: RequestOf<O>, meta?: RequestMeta, timeoutMs?: number): Promise<BusReply<ReplyOf<O>>>;
  /** A request to a subject that is not a declared operation (tools, tests, foreign responders). */
  request<T = unknown>(subject: string, body: unknown, meta?: RequestMeta, timeoutMs?: number): Promise<BusReply<T>>;
  async request(
    target: string | Operation,
    body: unknown,
    meta: RequestMeta = {},
    timeoutMs = this.options.timeoutMs,
  ): Promise<BusReply<unknown>> {
    const subject = typeof target === "string" ? target : target.subject;
    const started = performance.now();
    let outcome = "ok";
    const span = this.spanOf(subject, meta);
    if (span) meta = { ...meta, traceparent: formatTraceparent(span.context) };
    try {
      const json = body === undefined ? undefined : JSON.stringify(body);
      const payload = json === undefined ? undefined : encoder.encode(json);
      const key = this.bodies && (json?.length ?? 0) <= MAX_KEY_CHARS ? bodyKey(subject, meta, json) : undefined;
      // Taken now: a reply to another request like this one may replace it while this one is under way.
      const had = key === undefined ? undefined : this.bodies!.get(key);
      const headers = encodeRequestMeta({ ...meta, haveBody: had?.offer || undefined, deadline: meta.deadline ?? Date.now() + timeoutMs });
      const { msg, header } = await this.exchange(subject, payload, headers, timeoutMs);
      // A reply that names the body kept here comes empty too: read before nats.js decodes the headers for their status.
      if (msg.data.length === 0 && header(Header.sameBody) === undefined && msg.headers?.code === 503)
        throw unavailable(`no actor is serving ${subject}; try again shortly`, 1);
      // What ServiceError.isServiceError(msg) tests, read from the block parsed once.
      const errorCode = header(ServiceErrorCodeHeader);
      if (errorCode) {
        const status = Number(errorCode) || 500;
        let problem: Partial<Problem> = { status, detail: header(ServiceErrorHeader) || "error" };
        if (msg.data.length) {
          try {
            problem = { ...problem, ...(msg.json() as Partial<Problem>) };
          } catch {
            // keep the header text: a non-JSON error body from a foreign responder
          }
        }
        throw DerrickError.fromProblem(problem, replyHeaders(header(Header.replyHeaders)));
      }
      const raw = this.bodyOf(msg, header, key, had);
      if (raw.length) this.options.onReplyBody?.(raw.length, msg.data.length === 0);
      return lazyReply(Number(header(Header.status)) || 200, raw, replyHeaders(header(Header.replyHeaders)));
    } catch (error) {
      outcome = error instanceof DerrickError ? String(error.status) : "error";
      throw error;
    } finally {
      this.options.onRequest?.(subject, (performance.now() - started) / 1000, outcome);
      // A refusal (4xx) is the actor's answer, not a failed request.
      span?.end(outcome === "error" || Number(outcome) >= 500 ? { error: outcome } : {});
    }
  }

  /**
   * The reply's body: the copy this Bus kept when the actor sent it without (`Derrick-Same-Body`), else the bytes that
   * came. Tagged bytes are kept from the request's second tagged reply on (a request asked once is not worth a hash and
   * a copy), with their tag checked against them, and within the request's share of the bound.
   */
  private bodyOf(msg: Msg, header: HeaderOf, key: string | undefined, had: Kept | undefined): Uint8Array {
    const data = msg.data;
    const same = header(Header.sameBody);
    if (same !== undefined) {
      const kept = had?.bodies.find((body) => body.tag === same);
      if (kept && data.length === 0) return kept.raw;
      throw badGateway("the actor answered with a body this process does not hold");
    }
    const tag = header(Header.bodyTag);
    if (key === undefined || !tag || data.length > this.keptPerRequest) return data;
    const now = this.bodies!.peek(key);
    if (!now) {
      this.bodies!.set(key, SEEN_ONCE, key.length * 2);
      return data;
    }
    const known = now.bodies.find((body) => body.tag === tag);
    if (!known && bodyTagOf(data) !== tag) return data;
    // A copy when the bytes are a view: part of a larger read buffer would stay alive with them.
    const raw = known?.raw ?? (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : new Uint8Array(data));
    const bodies = [{ tag, raw }];
    let bytes = raw.length;
    for (const body of now.bodies) {
      if (bodies.length === BODIES_PER_REQUEST || bytes + body.raw.length > this.keptPerRequest) break;
      if (body.tag === tag) continue;
      bodies.push(body);
      bytes += body.raw.length;
    }
    this.bodies!.set(key, { bodies, offer: bodies.map((body) => body.tag).join(",") }, bytes + key.length * 2);
    return raw;
  }

  /** The request's client span, when spans are exported and the request is part of a trace. */
  private spanOf(subject: string, meta: RequestMeta): Span | undefined {
    const tracer = this.options.tracer ?? noTracer;
    if (!tracer.exporting || !meta.traceparent) return undefined;
    const parent = parseTraceparent(meta.traceparent, meta.tracestate);
    return parent && tracer.busRequest(parent, subject);
  }

  private exchange(subject: string, payload: Uint8Array | undefined, headers: MsgHdrs, timeoutMs: number): Promise<Received> {
    return new Promise<Received>((resolve, reject) => {
      if (this.closedError) return reject(this.closedError);
      if (this.inboxRefused) return reject(this.inboxRefused);
      if (this.disconnected) return reject(disconnected());
      if (this.nc.isClosed() || this.nc.isDraining()) return reject(unavailable("the message bus connection is closing", 1));
      const token = (this.sequence++).toString(36);
      const timer = setTimeout(() => {
        this.pending.delete(token);
        reject(gatewayTimeout(`no reply from ${subject} in time`));
      }, timeoutMs);
      this.pending.set(token, { resolve, reject, timer });
      try {
        this.nc.publish(subject, payload, { reply: this.inbox + token, headers });
      } catch (error) {
        this.pending.delete(token);
        clearTimeout(timer);
        // Too large for the server: no retry helps, so not a 503 with Retry-After.
        const message = (error as Error).message;
        reject(
          /max_payload|payload.*exceeded/i.test(message)
            ? contentTooLarge(`the request is too large for the message bus (${message})`)
            : unavailable(`message bus error: ${message}`, 1),
        );
      }
    });
  }

  private failAll(error: Error): void {
    for (const [token, waiting] of this.pending) {
      this.pending.delete(token);
      clearTimeout(waiting.timer);
      waiting.reject(error);
    }
  }
}

const decoder = new TextDecoder();

/** What a kept body is found by: requests alike but for who asks (the actor checks that per request, tags name bytes). */
const bodyKey = (subject: string, meta: RequestMeta, json: string | undefined) =>
  `${subject}\u0000${meta.partition ?? ""}\u0000${meta.acceptEncoding ?? ""}\u0000${json ?? ""}`;

/**
 * Adds one message of a reply sent in chunks: the whole reply once the last is in (the first
 * message's headers, every message's body in order), undefined before, a 502 when the messages do
 * not make one reply (out of order, or more than a reply may take).
 */
function collectChunk(waiting: Pending, received: Received, chunk: string): Received | Error | undefined {
  const [index, count] = chunk.split("/").map(Number) as [number, number];
  const held = waiting.chunks;
  const expected = held ? held.parts.length + 1 : 1;
  if (!Number.isInteger(index) || !Number.isInteger(count) || index !== expected || count < 2 || (held && held.count !== count)) {
    return badGateway(`the actor's reply came in chunks that do not fit together (${chunk} after ${expected - 1})`);
  }
  const state = (waiting.chunks ??= { first: received, count, parts: [], bytes: 0 });
  state.parts.push(received.msg.data);
  state.bytes += received.msg.data.length;
  if (state.bytes > MAX_REPLY_BYTES) return badGateway(`the actor's reply is over ${MAX_REPLY_BYTES} bytes`);
  if (index < count) return undefined;
  const data = new Uint8Array(state.bytes);
  let offset = 0;
  for (const part of state.parts) {
    data.set(part, offset);
    offset += part.length;
  }
  return { msg: joinedReply(state.first.msg, data), header: state.first.header };
}

/**
 * A reply's headers by name, from its raw block parsed once when nats-core exposes it (its own decode runs a
 * regex per line, and every `get` filters the keys: docs/edge.md#the-transports-own-paths), else through `headers`.
 */
function headersOf(msg: Msg): HeaderOf {
  const block = rawHeaderBlock(msg);
  if (block === null) return () => undefined;
  if (block === undefined) return (name) => msg.headers?.get(name) || undefined;
  const fields = parseHeaderBlock(block);
  return (name) => fields.get(name);
}

/** The first message of a chunked reply with the whole body: what request() reads of a reply. */
function joinedReply(first: Msg, data: Uint8Array): Msg {
  return {
    subject: first.subject,
    sid: first.sid,
    reply: first.reply,
    data,
    headers: first.headers,
    respond: () => false,
    json: <T>() => JSON.parse(decoder.decode(data)) as T,
    string: () => decoder.decode(data),
  } as unknown as Msg;
}

function lazyReply<T>(status: number, raw: Uint8Array, headers: Readonly<Record<string, string>>): BusReply<T> {
  let parsed: { value: T } | undefined;
  return {
    status,
    raw,
    headers,
    get body() {
      if (!parsed) {
        const json = isGzip(headers) ? gunzipSync(raw) : raw;
        parsed = { value: (json.length ? JSON.parse(decoder.decode(json)) : undefined) as T };
      }
      return parsed.value;
    },
  };
}

/** Whether the reply's bytes are gzip: HTTP header names and this coding's name are case-insensitive (RFC 9110 §8.4.1). */
function isGzip(headers: Readonly<Record<string, string>>): boolean {
  const name = headerNamed(headers, "content-encoding");
  return name !== undefined && headers[name]!.trim().toLowerCase() === "gzip";
}

/**
 * Reply headers by their JSON: a held reply comes with the same ones every time. Frozen, being shared; bounded by
 * count (ETags and Locations differ per resource and simply pass through).
 */
const headersByJson = new BoundedCache<string, Record<string, string>>({ max: 256 });
const NO_HEADERS: Record<string, string> = Object.freeze({});

function replyHeaders(raw: string | undefined): Record<string, string> {
  if (!raw) return NO_HEADERS;
  let headers = headersByJson.get(raw);
  if (headers) return headers;
  try {
    const parsed: unknown = JSON.parse(raw);
    // Anyone in the account may answer on an inbox: only an object of strings passes for HTTP headers.
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return NO_HEADERS;
    if (!Object.values(parsed).every((value) => typeof value === "string")) return NO_HEADERS;
    headers = Object.freeze(parsed as Record<string, string>);
  } catch {
    return NO_HEADERS;
  }
  headersByJson.set(raw, headers);
  return headers;
}

const disconnected = () => unavailable("the message bus connection is down; try again shortly", 1);
const outcomeUnknown = (how: "dropped" | "closed") =>
  gatewayTimeout(`the message bus connection ${how} after the request was sent: whether it was carried out is unknown`);
