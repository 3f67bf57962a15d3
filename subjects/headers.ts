/** Header names and codecs for everything that travels beside a request body on NATS. */
import { headers as natsHeaders, type MsgHdrs } from "@nats-io/nats-core";
import type { Principal } from "./principal.ts";

export const Header = {
  partition: "Derrick-Partition",
  principal: "Derrick-Principal",
  requestId: "Derrick-Request-Id",
  /** Absolute deadline, epoch milliseconds: actors skip work nobody waits for. */
  deadline: "Derrick-Deadline",
  traceparent: "traceparent",
  /** Success status of a reply when not 200 (201, 202, 204). */
  status: "Derrick-Status",
  /** JSON object of HTTP headers the edge should send with the reply (Location, ETag …). */
  replyHeaders: "Derrick-Reply-Headers",
} as const;

export type RequestMeta = {
  partition?: string;
  principal?: Principal;
  requestId?: string;
  deadline?: number;
  traceparent?: string;
};

export function encodeRequestMeta(meta: RequestMeta): MsgHdrs {
  const h = natsHeaders();
  if (meta.partition) h.set(Header.partition, meta.partition);
  if (meta.principal) h.set(Header.principal, JSON.stringify(meta.principal));
  if (meta.requestId) h.set(Header.requestId, meta.requestId);
  if (meta.deadline) h.set(Header.deadline, String(meta.deadline));
  if (meta.traceparent) h.set(Header.traceparent, meta.traceparent);
  return h;
}

export function decodeRequestMeta(h: MsgHdrs | undefined): RequestMeta {
  if (!h) return {};
  const principal = h.get(Header.principal);
  const deadline = Number(h.get(Header.deadline));
  return {
    partition: h.get(Header.partition) || undefined,
    principal: principal ? (JSON.parse(principal) as Principal) : undefined,
    requestId: h.get(Header.requestId) || undefined,
    deadline: Number.isFinite(deadline) && deadline > 0 ? deadline : undefined,
    traceparent: h.get(Header.traceparent) || undefined,
  };
}
