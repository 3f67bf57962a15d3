/**
 * W3C Trace Context through the edge: a caller's traceparent continues (same trace id, the edge's own
 * span id) into the NATS request the actor gets, tracestate with it; without one the edge starts a
 * trace. A plain subscription beside the actor's queue group sees each request's headers.
 */
import { describe, expect } from "vitest";
import type { Msg } from "@nats-io/nats-core";
import { systemEcho } from "../../subjects/system.ts";
import { parseTraceparent } from "../../platform/trace-context.ts";
import { derrickTest } from "../harness/fixture.ts";

const it = derrickTest({ actors: ["system", "identity"] });
const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("trace context", () => {
  it("trace - the actor's request carries the caller's trace with the edge's span, or a new trace when none came", async ({
    derrick,
    nc,
  }) => {
    const seen: Msg[] = [];
    const sub = nc.subscribe(systemEcho.subject, { callback: (_e, msg) => void seen.push(msg) });
    await nc.flush();
    try {
      const post = (headers: Record<string, string>) =>
        fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{}" });
      expect((await post({ traceparent: CALLER, tracestate: "congo=t61rcWkgMzE" })).status).toBe(200);
      expect((await post({})).status).toBe(200);
      expect((await post({ traceparent: "not-a-traceparent" })).status).toBe(200);
      await nc.flush();
      expect(seen).toHaveLength(3);
      const [continued, started, replaced] = seen.map((m) => parseTraceparent(m.headers?.get("traceparent"), m.headers?.get("tracestate")));
      expect(continued).toMatchObject({ traceId: "4bf92f3577b34da6a3ce929d0e0e4736", flags: "01", state: "congo=t61rcWkgMzE" });
      expect(continued!.spanId).not.toBe("00f067aa0ba902b7");
      for (const trace of [started, replaced]) {
        expect(trace?.traceId).toMatch(/^[0-9a-f]{32}$/);
        expect(trace?.traceId).not.toBe("4bf92f3577b34da6a3ce929d0e0e4736");
      }
      expect(started!.traceId).not.toBe(replaced!.traceId);
    } finally {
      sub.unsubscribe();
    }
  });
});
