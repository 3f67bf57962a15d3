/**
 * Turns an actor's reply into the HTTP answer: its status, its headers, its body. The JSON bytes
 * pass through untouched (no parse and re-serialize on the edge): the actor built them from its
 * schema-checked result. The route's response schema documents the shape in OpenAPI.
 */
import type { BusReply } from "../subjects/index.ts";

type SetLike = { status?: number | string; headers: Record<string, string | number> };

export function forward<T>(set: SetLike, reply: BusReply<T>): T {
  set.status = reply.status; // metrics and logs read it
  const headers = new Headers();
  for (const [name, value] of Object.entries(set.headers)) headers.set(name, String(value));
  for (const [name, value] of Object.entries(reply.headers)) headers.set(name, value);
  if (reply.status === 204 || reply.raw.length === 0) return new Response(null, { status: reply.status, headers }) as unknown as T;
  headers.set("content-type", "application/json");
  // Typed as the body the route documents; Elysia sends a Response as it is.
  return new Response(reply.raw, { status: reply.status, headers }) as unknown as T;
}
