/**
 * Span export over OTLP/HTTP to a real receiver this test starts on loopback: a request sent with a traceparent yields
 * the edge's span (server) under the caller's span, the NATS request's (client) under it, the actor's (server) under
 * that, a delivery attempt's (client, with the receiver's status) under the actor's, whose id the webhook POST's
 * traceparent names, and a content task's run (consumer) under the projects actor's span. One trace id throughout.
 * Both encodings arrive: JSON (decoded here) and protobuf (the trace id's 16 bytes found in the body). Without an
 * endpoint, no module of the SDK is even loaded.
 */
import { afterAll, describe, expect, it as plainIt } from "vitest";
import { fileURLToPath } from "node:url";
import { eventually } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { parseTraceparent } from "../../platform/trace-context.ts";
import { startReceiver } from "../notifications/receiver.ts";

type OtlpSpan = {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
};
type ExportRequest = { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }> };

/** OTLP span kinds (opentelemetry-proto): what each hop must be. */
const KIND = { server: 2, client: 3, consumer: 5 } as const;

/** An OTLP/HTTP traces receiver: every span of JSON exports kept decoded, protobuf exports kept as bytes. */
function startOtlpReceiver() {
  const spans: OtlpSpan[] = [];
  const protobufBodies: Uint8Array[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      if (request.method !== "POST" || new URL(request.url).pathname !== "/v1/traces") return new Response(null, { status: 404 });
      const type = request.headers.get("content-type") ?? "";
      if (type.startsWith("application/x-protobuf")) {
        protobufBodies.push(new Uint8Array(await request.arrayBuffer()));
        return new Response(new Uint8Array(), { headers: { "content-type": "application/x-protobuf" } });
      }
      const body = (await request.json()) as ExportRequest;
      for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []));
      return Response.json({});
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, spans, protobufBodies, stop: () => server.stop(true) };
}

const otlp = startOtlpReceiver();
const protobufOtlp = startOtlpReceiver();
const webhooks = startReceiver();
afterAll(() => {
  otlp.stop();
  protobufOtlp.stop();
  webhooks.stop();
});

const DELIVERY = {
  DERRICK_CALLBACK_ALLOW_HTTP: "true",
  DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32",
  DERRICK_DELIVERY_SCHEDULE: "0",
  OTEL_BSP_SCHEDULE_DELAY: "100",
};
const ACTORS = ["system", "identity", "notifications", "dispatcher", "deliverer", "projects", "content-worker"] as const;
const it = derrickTest({
  actors: [...ACTORS],
  env: { ...DELIVERY, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_SERVICE_NAME: "derrick-test" },
});
// Spans wait a minute to be exported: only the graceful stop's flush sends them within the test.
const itProtobuf = derrickTest({
  actors: ["system", "identity"],
  env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${protobufOtlp.url}/v1/traces`, OTEL_BSP_SCHEDULE_DELAY: "60000" },
});

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const CALLER = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  return value && Object.values(value)[0];
};

/** The one span of the caller's trace whose parent is `parentId` and whose kind and name match. */
function childOf(parentId: string, kind: number, name: RegExp, traceId = CALLER_TRACE): OtlpSpan | undefined {
  return otlp.spans.find((s) => s.traceId === traceId && s.parentSpanId === parentId && s.kind === kind && name.test(s.name));
}

describe("span export over OTLP (JSON)", () => {
  it("otlp - the edge, NATS request, actor and delivery attempt spans of one request arrive in its trace, each under the one before", async ({
    derrick,
  }) => {
    const sub = await derrick.call("/v1/notifications/subscriptions/types/PlanShared", {
      method: "POST",
      body: JSON.stringify({ subscriber: "otlp", callback_uri: `${webhooks.url}/hook` }),
    });
    expect(sub.status).toBe(200);
    const published = await derrick.call("/v1/notifications/events/PlanShared", {
      method: "POST",
      body: JSON.stringify({ data: { plan: "traced" } }),
      headers: { traceparent: CALLER, tracestate: "congo=t61rcWkgMzE" },
    });
    expect(published.status).toBe(202);
    const { event_id } = (await published.json()) as { event_id: string };
    const post = await eventually(() => webhooks.received.find((r) => r.id === event_id), { what: "the webhook POST" });
    const posted = parseTraceparent(post.headers.traceparent, post.headers.tracestate);
    expect(posted).toMatchObject({ traceId: CALLER_TRACE, state: "congo=t61rcWkgMzE" });

    const edge = await eventually(() => childOf(CALLER_SPAN, KIND.server, /^POST \/v1\/notifications\/events\//), {
      what: "the edge span",
    });
    expect(attribute(edge, "http.response.status_code")).toBe(202);
    expect(attribute(edge, "http.request.method")).toBe("POST");
    const bus = await eventually(() => childOf(edge.spanId, KIND.client, /notifications/), { what: "the NATS request span" });
    const handler = await eventually(() => childOf(bus.spanId, KIND.server, /^notifications /), { what: "the actor span" });
    const delivery = await eventually(() => childOf(handler.spanId, KIND.client, /webhook/), { what: "the delivery attempt span" });
    expect(delivery.spanId).toBe(posted!.spanId);
    expect(attribute(delivery, "http.response.status_code")).toBe(204);
    expect(attribute(delivery, "derrick.event_id")).toBe(event_id);
    expect(attribute(delivery, "server.address")).toBe("127.0.0.1");
    // Every span of the request is in the caller's trace; none of its ids repeats.
    const ids = [edge, bus, handler, delivery].map((s) => s.spanId);
    expect(new Set([...ids, CALLER_SPAN]).size).toBe(5);
  });

  it("otlp - a caller's unsampled trace is continued unrecorded: its flag travels on, none of its spans is exported", async ({
    derrick,
  }) => {
    const unsampled = "1f0e8d7c6b5a49382716051423324150";
    const echo = (traceparent: string) =>
      derrick.call("/v1/system/echo", { method: "POST", body: "{}", headers: { traceparent } }).then((res) => res.status);
    expect(await echo(`00-${unsampled}-1111111111111111-00`)).toBe(200);
    const sampled = "2f0e8d7c6b5a49382716051423324150";
    expect(await echo(`00-${sampled}-2222222222222222-01`)).toBe(200);
    await eventually(() => childOf("2222222222222222", KIND.server, /^POST /, sampled), { what: "the sampled request's span" });
    expect(otlp.spans.filter((span) => span.traceId === unsampled)).toEqual([]);
  });

  it("otlp - a content task's run is a span under the projects actor's span of the request that queued it", async ({ derrick }) => {
    const trace = "0af7651916cd43dd8448eb211c80319c";
    const project = await derrick.call("/v1/projects/otlp-p", {
      method: "PUT",
      as: "admin",
      body: JSON.stringify({ name: "traced", members: ["alpha"], values: { displayItems: { "well-name": "F-21" } } }),
    });
    expect(project.status).toBe(201);
    const requested = await derrick.call("/v1/projects/otlp-p/display-items/content/requests", {
      method: "POST",
      body: JSON.stringify({ ids: ["well-name"] }),
      headers: { traceparent: `00-${trace}-b7ad6b7169203331-01` },
    });
    expect(requested.status).toBe(202);
    const { taskId } = (await requested.json()) as { taskId: string };
    const edge = await eventually(() => childOf("b7ad6b7169203331", KIND.server, /content\/requests/, trace), { what: "the edge span" });
    const bus = await eventually(() => childOf(edge.spanId, KIND.client, /projects/, trace), { what: "the NATS request span" });
    const handler = await eventually(() => childOf(bus.spanId, KIND.server, /^projects /, trace), { what: "the actor span" });
    const run = await eventually(() => childOf(handler.spanId, KIND.consumer, /content task/, trace), { what: "the content task span" });
    expect(attribute(run, "derrick.task_id")).toBe(taskId);
  });
});

describe("span export over OTLP (protobuf, the default encoding)", () => {
  itProtobuf(
    "otlp - the graceful stop exports the spans still waiting, as protobuf to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    async ({ derrick }) => {
      const res = await fetch(`${derrick.url}/v1/system/echo`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: CALLER },
        body: "{}",
      });
      expect(res.status).toBe(200);
      const traceBytes = Buffer.from(CALLER_TRACE, "hex");
      const exported = () => protobufOtlp.protobufBodies.some((body) => Buffer.from(body).includes(traceBytes));
      expect(exported()).toBe(false);
      await derrick.stop();
      expect(exported()).toBe(true);
    },
  );
});

describe("no OTLP endpoint", () => {
  plainIt("otlp - without an endpoint (or with OTEL_SDK_DISABLED) no module of OpenTelemetry's SDK or exporters is loaded", async () => {
    const script = fileURLToPath(new URL("./fixtures/tracing-modules.ts", import.meta.url));
    const run = async (env: Record<string, string>) => {
      const clean = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("OTEL_")));
      const child = Bun.spawn([process.execPath, script], { env: { ...clean, ...env }, stdout: "pipe", stderr: "inherit" });
      const out = await new Response(child.stdout).text();
      expect(await child.exited).toBe(0);
      return JSON.parse(out) as { exporting: boolean; sdkModules: number };
    };
    expect(await run({})).toEqual({ exporting: false, sdkModules: 0 });
    expect(await run({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SDK_DISABLED: "true" })).toEqual({ exporting: false, sdkModules: 0 });
    // The check can fail: with an endpoint the SDK is there.
    const on = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
    expect(on.exporting).toBe(true);
    expect(on.sdkModules).toBeGreaterThan(0);
  });
});
