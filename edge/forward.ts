/** Turns an actor's reply into the HTTP answer: its status, its headers, its body. */
import type { BusReply } from "../subjects/index.ts";

type SetLike = { status?: number | string; headers: Record<string, string | number> };

export function forward<T>(set: SetLike, reply: BusReply<T>): T {
  set.status = reply.status;
  for (const [name, value] of Object.entries(reply.headers)) set.headers[name] = value;
  return reply.body;
}
