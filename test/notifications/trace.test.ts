/**
 * Webhook POSTs continue the trace of the request that caused them (W3C Trace Context), with no span export set up:
 * the event's publication (its traceparent and tracestate carried through EVENTS and the stored delivery work, a span
 * id of its own per attempt) or the replay that asked for it. Work stored without a trace (an event published on NATS,
 * a job stored before traces were carried) still delivers, each attempt in a trace of its own. A failed attempt's
 * warning names the trace.
 */
import { describe, expect } from "vitest";
import { Writable } from "node:stream";
import pino from "pino";
import { jetstream } from "@nats-io/jetstream";
import { loadConfig } from "../../config/index.ts";
import { boot } from "../../bin/boot.ts";
import { eventually, TEST_CLIENTS } from "../harness/index.ts";
import { edgeClient } from "../harness/derrick.ts";
import { natsTest } from "../harness/fixture.ts";
import { startReceiver } from "./receiver.ts";
import { parseTraceparent } from "../../platform/trace-context.ts";
import { subjects } from "../../subjects/index.ts";
import type { DeliveryJob } from "../../subjects/notifications.ts";
import { DELIVERY_ACTORS, DELIVERY_ENV, deliveriesOnce, deliveryTest, publish, publishOnNats, remove, subscribe } from "./helpers.ts";

const it = deliveryTest();
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER = `00-${CALLER_TRACE}-00f067aa0ba902b7-01`;

const traceOf = (headers: Record<string, string>) => parseTraceparent(headers.traceparent, headers.tracestate);

describe("notifications trace context", () => {
  it("trace - every attempt's POST continues the publishing request's trace with a span id of its own, tracestate with it", async ({
    derrick,
    receiver: r,
  }) => {
    // The traced event's first attempt fails, so a retry follows.
    let failed = false;
    r.respond = (req) => {
      const fail = !failed && traceOf(req.headers)?.traceId === CALLER_TRACE;
      failed ||= fail;
      return new Response(null, { status: fail ? 500 : 204 });
    };
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: `${r.url}/hook` });
    const res = await publish(derrick, "PlanShared", { data: { plan: 1 } });
    expect(res.status).toBe(202);
    // The helper sends no trace headers: publish again the same way with them.
    const traced = await derrick.call("/v1/notifications/events/PlanShared", {
      method: "POST",
      body: JSON.stringify({ data: { plan: 2 } }),
      headers: { traceparent: CALLER, tracestate: "congo=t61rcWkgMzE" },
    });
    expect(traced.status).toBe(202);
    const { event_id } = (await traced.json()) as { event_id: string };
    const attempts = await eventually(
      () => {
        const got = r.received.filter((x) => x.id === event_id);
        return got.length >= 2 ? got : undefined;
      },
      { what: "a failed attempt and its retry" },
    );
    const [first, second] = attempts.map((a) => traceOf(a.headers));
    for (const trace of [first, second]) expect(trace).toMatchObject({ traceId: CALLER_TRACE, flags: "01", state: "congo=t61rcWkgMzE" });
    expect(new Set([first!.spanId, second!.spanId, "00f067aa0ba902b7"]).size).toBe(3);
    // The untraced publication got a trace of its own at the edge, which its delivery continues.
    const untraced = await eventually(() => r.received.find((x) => x.id !== event_id), { what: "the other event's delivery" });
    expect(traceOf(untraced.headers)?.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceOf(untraced.headers)?.traceId).not.toBe(CALLER_TRACE);
    await remove(derrick, sub.subscription_id);
  });

  it("trace - a replay's POST continues the trace of the request that asked for it", async ({ derrick, receiver: r }) => {
    r.respond = () => new Response(null, { status: 503 });
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: r.url });
    const res = await publish(derrick, "PlanShared", { data: "replayed" });
    const { event_id } = (await res.json()) as { event_id: string };
    await deliveriesOnce(derrick, sub.subscription_id, "dead", "the dead delivery");
    r.respond = () => new Response(null, { status: 204 });
    const replay = await derrick.call(`/v1/notifications/subscriptions/${sub.subscription_id}/deliveries/${event_id}/retry`, {
      method: "POST",
      headers: { traceparent: CALLER },
    });
    expect(replay.status).toBe(202);
    const replayed = await eventually(() => r.received.find((x, i) => i >= 3 && x.id === event_id), { what: "the replayed POST" });
    expect(traceOf(replayed.headers)?.traceId).toBe(CALLER_TRACE);
    expect(traceOf(r.received[0]!.headers)?.traceId).not.toBe(CALLER_TRACE);
    await remove(derrick, sub.subscription_id);
  });

  it("trace - an event published on NATS without a trace, and a retry job stored without one, deliver in traces of their own", async ({
    derrick,
    receiver: r,
  }) => {
    const sub = await subscribe(derrick, "PlanShared", { callback_uri: r.url });
    await publishOnNats(derrick, "PlanShared", { data: "from nats" }, "evt_untraced-1");
    const first = await eventually(() => r.received.find((x) => x.id === "evt_untraced-1"), { what: "the NATS event's delivery" });
    // A retry job as stored before traces were carried: no traceparent, no tracestate.
    const seq = await publishOnNats(derrick, "PlanShared", { data: "old job" }, "evt_untraced-2");
    await eventually(() => r.received.find((x) => x.id === "evt_untraced-2"), { what: "its first delivery" });
    const job: DeliveryJob = {
      event_id: "evt_untraced-2",
      event_seq: seq,
      partition: "opendes",
      type: "PlanShared",
      subscription_id: sub.subscription_id,
      attempt: 2,
      due_at: Date.now(),
    };
    await jetstream(derrick.nc).publish(subjects.notifications.retries("opendes", sub.subscription_id), JSON.stringify(job));
    const again = await eventually(() => r.received.filter((x) => x.id === "evt_untraced-2")[1], { what: "the old job's delivery" });
    const traces = [first, again].map((x) => traceOf(x.headers));
    for (const trace of traces) expect(trace?.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traces[0]!.traceId).not.toBe(traces[1]!.traceId);
    await remove(derrick, sub.subscription_id);
  });
});

const logged = natsTest();

describe("notifications trace context in the logs", () => {
  logged("trace - a failed attempt's warning carries the trace id of the request that published the event", async ({ nats, dataDir }) => {
    const lines: Array<{ msg: string; traceId?: string; eventId?: string }> = [];
    const sink = new Writable({
      write: (chunk, _enc, done) => {
        for (const line of String(chunk).trim().split("\n")) lines.push(JSON.parse(line));
        done();
      },
    });
    const cfg = loadConfig({
      ...DELIVERY_ENV,
      NATS_URL: nats.url,
      DERRICK_HTTP_PORT: "0",
      DERRICK_DATA_DIR: dataDir,
      DERRICK_ACCESS_LOG: "off",
      DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.alpha]),
    });
    const booted = await boot({
      cfg,
      natsUrl: nats.url,
      log: pino({ level: "warn" }, sink),
      edge: true,
      actors: [...DELIVERY_ACTORS],
      processMetrics: false,
    });
    const receiver = startReceiver();
    receiver.respond = () => new Response(null, { status: 500 });
    try {
      const client = edgeClient(booted.edge!.url);
      const sub = await client.call("/v1/notifications/subscriptions/types/PlanShared", {
        method: "POST",
        body: JSON.stringify({ subscriber: "logs", callback_uri: receiver.url }),
      });
      expect(sub.status).toBe(200);
      const res = await client.call("/v1/notifications/events/PlanShared", {
        method: "POST",
        body: JSON.stringify({ data: "logged" }),
        headers: { traceparent: CALLER },
      });
      const { event_id } = (await res.json()) as { event_id: string };
      const warning = await eventually(() => lines.find((l) => l.msg === "a delivery attempt failed" && l.eventId === event_id), {
        what: "the failed attempt's warning",
      });
      expect(warning.traceId).toBe(CALLER_TRACE);
    } finally {
      receiver.stop();
      await booted.stop();
    }
  });
});
