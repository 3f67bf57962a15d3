/**
 * The spans of one request's hops: the edge's HTTP request, the NATS request, the actor's handling, content tasks and
 * each webhook delivery attempt. Without an OTLP endpoint no OpenTelemetry SDK is loaded: `noTracer` makes only the
 * span ids the W3C headers need. With one, platform/otel.ts is imported and the spans are exported
 * (docs/operations.md#following-one-request-trace-context).
 */
import type { Config } from "../config/index.ts";
import type { Logger } from "./logger.ts";
import { childContext, type TraceContext } from "./trace-context.ts";

export type SpanOutcome = {
  /** The HTTP status answered (edge) or received (delivery). */
  status?: number;
  /** The route that matched (edge): it names the span, `GET /v1/projects/:projectId`. */
  route?: string;
  /** Why it failed, when it did. */
  error?: string;
};

export type Span = {
  /** This span's place in its trace: the parent the next hop names in its traceparent. */
  readonly context: TraceContext;
  end(outcome?: SpanOutcome): void;
};

/** What a delivery attempt's span records. */
export type DeliveryAttemptInfo = { callbackUri: string; eventId: string; subscriptionId: string; attempt: number };

/** What a content task run's span records: the task and which delivery of its work-queue message this is. */
export type ContentTaskInfo = { taskId: string; attempt: number };

export type Tracer = {
  /** True when spans are exported; otherwise nothing is recorded and only the spans that make a header exist. */
  readonly exporting: boolean;
  /** The edge's span of one HTTP request (server), begun at `startTime` (a performance.now() reading). */
  httpServer(parent: TraceContext | undefined, method: string, startTime: number): Span;
  /** A request sent on NATS (client). */
  busRequest(parent: TraceContext, subject: string): Span;
  /** An actor handling a NATS request (server). */
  handler(parent: TraceContext, actor: string, endpoint: string, subject: string): Span;
  /** A content task run, taken from its work queue (consumer). */
  contentTask(parent: TraceContext, task: ContentTaskInfo): Span;
  /** One webhook POST (client); a new trace when the event came without one. */
  delivery(parent: TraceContext | undefined, attempt: DeliveryAttemptInfo): Span;
  /** Exports what is still buffered, then stops (the graceful stop). */
  shutdown(): Promise<void>;
};

const ended = () => undefined;
/** A span of the hop's own that is not recorded: a new span id where a header needs one, else the parent's. */
const unrecorded = (context: TraceContext): Span => ({ context, end: ended });

/** No export: the edge and each delivery attempt still get span ids of their own for the headers they send. */
export const noTracer: Tracer = {
  exporting: false,
  httpServer: (parent) => unrecorded(childContext(parent)),
  busRequest: (parent) => unrecorded(parent),
  handler: (parent) => unrecorded(parent),
  contentTask: (parent) => unrecorded(parent),
  delivery: (parent) => unrecorded(childContext(parent)),
  shutdown: async () => undefined,
};

/** Where spans go: the traces endpoint as given, else the general endpoint's `/v1/traces`; undefined: nowhere. */
export function otlpTracesUrl(settings: Config["tracing"]): string | undefined {
  if (settings.disabled) return undefined;
  if (settings.tracesEndpoint) return settings.tracesEndpoint;
  return settings.endpoint ? `${settings.endpoint.replace(/\/+$/, "")}/v1/traces` : undefined;
}

/** The process's tracer: `noTracer` unless an OTLP endpoint is configured, and only then is the SDK imported. */
export async function startTracing(settings: Config["tracing"], log: Logger): Promise<Tracer> {
  const url = otlpTracesUrl(settings);
  if (!url) return noTracer;
  const { otelTracer } = await import("./otel.ts");
  const tracer = await otelTracer(
    {
      url,
      protocol: settings.protocol,
      headers: { ...settings.headers, ...settings.tracesHeaders },
      serviceName: settings.serviceName,
      batchDelayMs: settings.batchDelayMs,
      sampler: settings.sampler,
      samplerRatio: settings.samplerRatio,
    },
    log,
  );
  log.info({ url, protocol: settings.protocol, serviceName: settings.serviceName }, "exporting spans over OTLP");
  return tracer;
}
