/** Names of everything that travels beside a request body on NATS (their codec: platform/transport/request-meta.ts). */
import type { Principal } from "./principal.ts";

export const Header = {
  partition: "Derrick-Partition",
  principal: "Derrick-Principal",
  requestId: "Derrick-Request-Id",
  /** Absolute deadline, epoch milliseconds: actors skip work nobody waits for. */
  deadline: "Derrick-Deadline",
  /** W3C Trace Context: the trace a request belongs to (the edge starts one when the caller sent none). */
  traceparent: "traceparent",
  tracestate: "tracestate",
  /** Success status of a reply when not 200 (201, 202, 204). */
  status: "Derrick-Status",
  /** JSON object of HTTP headers the edge should send with the reply (Location, ETag …). */
  replyHeaders: "Derrick-Reply-Headers",
  /**
   * `i/n` on each message of a reply too large for one NATS message (the server's max_payload):
   * the body in n messages sent in order; the first also carries the status and reply headers.
   */
  chunk: "Derrick-Chunk",
  /**
   * `gzip` when the caller takes a reply body compressed, as HTTP's Accept-Encoding says for the edge's client. An actor
   * may then answer a body it holds compressed, naming it in the reply headers' Content-Encoding. Absent: plain JSON.
   */
  acceptEncoding: "Derrick-Accept-Encoding",
  /**
   * On a reply: the tag of its body, which the actor holds and answers again (a cache's): the first 22 characters of the
   * base64url SHA-256 of the bytes (platform/transport/body-tags.ts). A caller may keep the body and offer the tag back.
   */
  bodyTag: "Derrick-Body-Tag",
  /** On a request: the tags of bodies the caller keeps from earlier replies to a request like it, comma-separated (a few). */
  haveBody: "Derrick-Have-Body",
  /**
   * On a reply sent without its body: the body is the caller's copy with this tag, one the request offered.
   * Status and reply headers come as with the body.
   */
  sameBody: "Derrick-Same-Body",
} as const;

/** What a reply sent in chunks may add up to: actors refuse to send more, the Bus to join more. */
export const MAX_REPLY_BYTES = 64 * 1024 * 1024;

export type RequestMeta = {
  partition?: string;
  principal?: Principal;
  requestId?: string;
  deadline?: number;
  traceparent?: string;
  tracestate?: string;
  acceptEncoding?: "gzip";
  /** `Derrick-Have-Body`: set by the Bus from the bodies it keeps (its callers' value is replaced). */
  haveBody?: string;
};
