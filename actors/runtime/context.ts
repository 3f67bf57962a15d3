/** What a handler knows about the request it serves, decoded from NATS headers by the runtime. */
import type { MsgHdrs } from "@nats-io/nats-core";
import { forbidden, badRequest, unauthorized, type SharedPrincipal } from "../../subjects/index.ts";
import type { Logger } from "../../platform/logger.ts";
import type { TraceContext } from "../../platform/trace-context.ts";

export type RequestContext = {
  principal?: SharedPrincipal;
  partition?: string;
  requestId: string;
  /** Absolute deadline (epoch ms) set by the caller, when any. */
  deadline?: number;
  headers?: MsgHdrs;
  /** The trace the request belongs to, at this actor's span of it: work the request leaves behind carries it on. */
  trace?: TraceContext;
  log: Logger;
};

/** The caller, or a 401 when the request came without one (e.g. straight from NATS). */
export function requirePrincipal(ctx: RequestContext): SharedPrincipal {
  if (!ctx.principal) throw unauthorized("this operation needs an authenticated caller");
  return ctx.principal;
}

/** The partition, or a 400 with `detail` (OSDU services word it their own way). */
export function requirePartition(ctx: RequestContext, detail = "this operation needs a partition"): string {
  if (!ctx.partition) throw badRequest(detail);
  return ctx.partition;
}

/** Who asks, and in which partition. */
export type Caller = { principal: SharedPrincipal; partition: string };

/** The caller and its partition: 401 without a caller, then 400 (with `missingPartition`) without a partition. */
export function caller(ctx: RequestContext, missingPartition?: string): Caller {
  return { principal: requirePrincipal(ctx), partition: requirePartition(ctx, missingPartition) };
}

/** 403 unless the caller holds one of the groups. */
export function requireGroup(ctx: RequestContext, ...groups: string[]): SharedPrincipal {
  const principal = requirePrincipal(ctx);
  if (!groups.some((group) => principal.groups.includes(group))) {
    throw forbidden(`this operation needs the group ${groups.join(" or ")}`);
  }
  return principal;
}
