/**
 * The edge's one way to call an actor: an HTTP request becomes a typed operation's request (the
 * compiler checks the input against the operation's request schema), the actor's reply becomes
 * the HTTP response (forward.ts).
 */
import { Problem, type Operation, type RequestOf } from "../subjects/index.ts";
import type { Bus } from "../platform/transport/index.ts";
import { acceptsGzip, forward, type SetLike } from "./forward.ts";
import { principalOf, requestPartition } from "./plugins/auth.ts";
import { requestMeta } from "./request-state.ts";

/**
 * What a relay needs of a route's context: Elysia's `set` and `request`; the caller and the partition, when the route
 * checked them, are the request's own (plugins/auth.ts). Handlers destructure what they use (`({ set, request, body })`):
 * handed the context whole, Elysia infers that the route reads everything, and parses the cookies and copies the
 * headers into an object on every request (docs/edge.md#handlers-take-what-they-use).
 */
export type RelayContext = { set: SetLike; request: Request };

export type Relay = <O extends Operation>(c: RelayContext, op: O, input: RequestOf<O>, contentType?: string) => Promise<Response>;

/** A relay on one Bus: `relay({ set, request }, op, input)` in a route handler. */
export function relayOn(bus: Bus): Relay {
  return async (c, op, input, contentType) => {
    const meta = requestMeta(c.request, principalOf(c.request), requestPartition(c.request));
    // The reply's bytes go out as they come (forward.ts): so may a compressed body, to a client that takes it.
    if (acceptsGzip(c.request.headers.get("accept-encoding"))) meta.acceptEncoding = "gzip";
    return forward(c.set, await bus.request(op, input, meta), contentType);
  };
}

/** The problem+json responses a group of routes documents, by status. */
export function problems<const S extends readonly number[]>(...statuses: S): { [K in S[number]]: typeof Problem } {
  return Object.fromEntries(statuses.map((status) => [status, Problem])) as { [K in S[number]]: typeof Problem };
}
