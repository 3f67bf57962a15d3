/**
 * The tracer that exports: OpenTelemetry's SDK with a batching OTLP/HTTP exporter (protobuf or JSON). Imported only
 * when an endpoint is configured (platform/tracing.ts). Each span is started under the context the hop received, so
 * exported spans carry the trace and parent ids the W3C headers carry, and the headers sent next name these spans.
 */
import {
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  diag,
  trace,
  type Attributes,
  type Span as OtelSpan,
} from "@opentelemetry/api";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
} from "@opentelemetry/sdk-trace";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { Config } from "../config/index.ts";
import type { Logger } from "./logger.ts";
import { LogThrottle } from "./log-throttle.ts";
import { buildInfo } from "./build-info.ts";
import type { TraceContext } from "./trace-context.ts";
import type { DeliveryAttemptInfo, Span, SpanOutcome, Tracer } from "./tracing.ts";

export type OtlpSettings = {
  url: string;
  protocol: "http/protobuf" | "http/json";
  headers: Record<string, string>;
  serviceName: string;
  batchDelayMs: number;
  sampler: Config["tracing"]["sampler"];
  samplerRatio: number;
};

// Incubating in the semantic conventions (not in their stable entry point): copied, as they advise.
const ATTR_MESSAGING_SYSTEM = "messaging.system";
const ATTR_MESSAGING_DESTINATION_NAME = "messaging.destination.name";

export async function otelTracer(settings: OtlpSettings, log: Logger): Promise<Tracer> {
  routeDiagnostics(log);
  const exporter = await exporterFor(settings);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName, [ATTR_SERVICE_VERSION]: buildInfo().version }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: settings.batchDelayMs })],
    sampler: samplerOf(settings),
  });
  const tracer = provider.getTracer("derrick", buildInfo().version);
  const start = (name: string, kind: SpanKind, parent: TraceContext | undefined, attributes: Attributes, startTime?: number) =>
    recorded(
      tracer.startSpan(name, { kind, attributes, ...(startTime !== undefined ? { startTime } : {}) }, parentContext(parent)),
      parent,
    );
  return {
    exporting: true,
    httpServer: (parent, method, startTime) =>
      start(method, SpanKind.SERVER, parent, { [ATTR_HTTP_REQUEST_METHOD]: method }, startTime).naming((o) =>
        o.route ? `${method} ${o.route}` : undefined,
      ),
    busRequest: (parent, subject) =>
      start(`send ${subject}`, SpanKind.CLIENT, parent, { [ATTR_MESSAGING_SYSTEM]: "nats", [ATTR_MESSAGING_DESTINATION_NAME]: subject }),
    handler: (parent, actor, endpoint, subject) =>
      start(`${actor} ${endpoint}`, SpanKind.SERVER, parent, {
        [ATTR_MESSAGING_SYSTEM]: "nats",
        [ATTR_MESSAGING_DESTINATION_NAME]: subject,
        "derrick.actor": actor,
      }),
    contentTask: (parent, task) =>
      start("content task", SpanKind.CONSUMER, parent, {
        [ATTR_MESSAGING_SYSTEM]: "nats",
        "derrick.task_id": task.taskId,
        "derrick.delivery.attempt": task.attempt,
      }),
    delivery: (parent, attempt) => start("POST webhook", SpanKind.CLIENT, parent, deliveryAttributes(attempt)),
    async shutdown() {
      await provider.shutdown();
    },
  };
}

/** OTEL_TRACES_SAMPLER's samplers by name, as the specification defines them. */
function samplerOf({ sampler, samplerRatio }: Pick<OtlpSettings, "sampler" | "samplerRatio">): Sampler {
  const root = sampler.endsWith("always_off")
    ? new AlwaysOffSampler()
    : sampler.endsWith("traceidratio")
      ? new TraceIdRatioBasedSampler(samplerRatio)
      : new AlwaysOnSampler();
  return sampler.startsWith("parentbased_") ? new ParentBasedSampler({ root }) : root;
}

async function exporterFor(settings: OtlpSettings): Promise<SpanExporter> {
  const options = { url: settings.url, headers: settings.headers };
  if (settings.protocol === "http/json") return new (await import("@opentelemetry/exporter-trace-otlp-http")).OTLPTraceExporter(options);
  return new (await import("@opentelemetry/exporter-trace-otlp-proto")).OTLPTraceExporter(options);
}

/** The hop's received context as an OpenTelemetry parent (none: the span starts a trace). */
function parentContext(parent: TraceContext | undefined) {
  if (!parent) return ROOT_CONTEXT;
  const flags = Number.parseInt(parent.flags, 16) & TraceFlags.SAMPLED;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: flags, isRemote: true });
}

/** Where a callback is, without its path and query (they may hold a receiver's token). */
function deliveryAttributes(attempt: DeliveryAttemptInfo): Attributes {
  const url = URL.parse(attempt.callbackUri);
  return {
    [ATTR_HTTP_REQUEST_METHOD]: "POST",
    ...(url ? { [ATTR_SERVER_ADDRESS]: url.hostname, [ATTR_URL_SCHEME]: url.protocol.replace(/:$/, "") } : {}),
    "derrick.event_id": attempt.eventId,
    "derrick.subscription_id": attempt.subscriptionId,
    "derrick.delivery.attempt": attempt.attempt,
  };
}

type NamedSpan = Span & { naming(rename: (outcome: SpanOutcome) => string | undefined): NamedSpan };

/** An SDK span as derrick's Span: its context in W3C form (the received tracestate passed on), ended with an outcome. */
function recorded(span: OtelSpan, parent: TraceContext | undefined): NamedSpan {
  const own = span.spanContext();
  const flags = (own.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  let rename: ((outcome: SpanOutcome) => string | undefined) | undefined;
  const wrapped: NamedSpan = {
    context: { traceId: own.traceId, spanId: own.spanId, flags, ...(parent?.state ? { state: parent.state } : {}) },
    naming(fn) {
      rename = fn;
      return wrapped;
    },
    end(outcome = {}) {
      const name = rename?.(outcome);
      if (name) span.updateName(name);
      if (outcome.route) span.setAttribute(ATTR_HTTP_ROUTE, outcome.route);
      if (outcome.status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.status);
      if (outcome.error !== undefined) {
        span.setAttribute(ATTR_ERROR_TYPE, outcome.status !== undefined ? String(outcome.status) : "error");
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
      }
      span.end();
    },
  };
  return wrapped;
}

let diagnosticsRouted = false;

/** The SDK's own warnings (an export that failed) into the process log, at most one a minute per message. */
function routeDiagnostics(log: Logger): void {
  if (diagnosticsRouted) return;
  diagnosticsRouted = true;
  const throttle = new LogThrottle();
  const warn = (message: string, ...args: unknown[]) => {
    const heldBack = throttle.take(message);
    if (heldBack !== undefined) log.warn({ detail: args.map(String).join(" ").slice(0, 500), heldBack }, `OpenTelemetry: ${message}`);
  };
  const ignore = () => undefined;
  diag.setLogger({ error: warn, warn, info: ignore, debug: ignore, verbose: ignore }, DiagLogLevel.WARN);
}
