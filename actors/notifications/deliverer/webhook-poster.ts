import { checkServerIdentity, type PeerCertificate } from "node:tls";
import type { Logger } from "../../../platform/logger.ts";
import { CallbackRefused, resolveCallback, type CallbackPolicy, type ResolvedTarget } from "../callback-policy.ts";
import type { Clock } from "../../../platform/clock.ts";
import { parseRetryAfter } from "../schedule.ts";
import { webhookHeaders } from "../signing.ts";
import type { SubscriptionRecord } from "../store.ts";
import { traceHeaders, type TraceContext } from "../../../platform/trace-context.ts";

const USER_AGENT = "derrick-webhooks/1";
/** Resolved and checked callback targets are reused this long (DNS answers are re-checked after). */
const TARGET_TTL_MS = 5_000;
const TARGET_CACHE_SIZE = 4096;
/** A receiver's answer body up to this size is read (so its connection can be reused); a longer one is cut off. */
export const RESPONSE_DRAIN_BYTES = 64 * 1024;

/** What one HTTP call came to: its status (and Retry-After, in ms), or why there was none. */
export type CallOutcome = { status?: number; retryAfter?: number; error?: string };

/** A checked callback as fetch wants it: the URL of the checked address, the Host header, TLS names. */
export type Target = {
  connect: string;
  host: string;
  tls?: { serverName: string; checkServerIdentity: (name: string, cert: PeerCertificate) => Error | undefined };
};

/** Posts signed CloudEvents to subscriptions' callbacks, at the address the callback policy checked. */
export class WebhookPoster {
  private readonly targets = new Map<string, { at: number; target: Promise<Target> }>();

  constructor(
    private readonly options: { policy: CallbackPolicy; timeoutMs: number },
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** One POST of `body` (the event's CloudEvent) to the subscription's callback, in the attempt's span of `trace`. */
  async call(subscription: SubscriptionRecord, eventId: string, body: string, trace: TraceContext): Promise<CallOutcome> {
    try {
      const response = await this.post(subscription, eventId, body, trace);
      return { status: response.status, retryAfter: parseRetryAfter(response.retryAfter, this.clock.now()) };
    } catch (e) {
      if (e instanceof CallbackRefused)
        this.log.warn({ subscription: subscription.subscription_id, detail: e.detail, traceId: trace.traceId }, e.message);
      return { error: describeFailure(e, this.options.timeoutMs) };
    }
  }

  private async post(
    subscription: SubscriptionRecord,
    eventId: string,
    body: string,
    trace: TraceContext,
  ): Promise<{ status: number; retryAfter: string | null }> {
    const target = await this.targetOf(subscription.callback_uri);
    const secrets = [subscription.secret];
    if (subscription.previous_secret && (subscription.previous_secret_until ?? 0) > this.clock.now())
      secrets.push(subscription.previous_secret);
    const headers: Record<string, string> = {
      ...(subscription.callback_headers ?? {}),
      "content-type": "application/cloudevents+json",
      "user-agent": USER_AGENT,
      host: target.host,
      ...webhookHeaders(secrets, eventId, body),
      ...traceHeaders(trace),
    };
    const response = await fetch(target.connect, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: AbortSignal.timeout(this.options.timeoutMs),
      ...(target.tls ? { tls: target.tls } : {}),
    } as RequestInit);
    await discardBody(response, RESPONSE_DRAIN_BYTES);
    return { status: response.status, retryAfter: response.headers.get("retry-after") };
  }

  /** The checked target of a callback, reused for a few seconds (a refusal is never reused). */
  private targetOf(uri: string): Promise<Target> {
    const now = this.clock.now();
    const cached = this.targets.get(uri);
    if (cached && now - cached.at < TARGET_TTL_MS) return cached.target;
    const target = resolveCallback(this.options.policy, uri).then(prepare);
    if (this.targets.size >= TARGET_CACHE_SIZE) this.targets.clear();
    this.targets.set(uri, { at: now, target });
    target.catch(() => this.targets.get(uri)?.target === target && this.targets.delete(uri));
    return target;
  }
}

/** Connect to the address that was checked; the Host header (and TLS server name) keep the name. */
export function prepare(target: ResolvedTarget): Target {
  const connect = new URL(target.url);
  connect.hostname = target.family === 6 ? `[${target.address}]` : target.address;
  const serverName = target.url.hostname.replace(/^\[|\]$/g, "");
  return {
    connect: connect.href,
    host: target.url.host,
    ...(target.url.protocol === "https:"
      ? { tls: { serverName, checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(serverName, cert) } }
      : {}),
  };
}

export function describeFailure(error: unknown, timeoutMs: number): string {
  const e = error as Error & { code?: string; cause?: { code?: string } };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return `timed out after ${timeoutMs} ms`;
  const code = e?.code ?? e?.cause?.code;
  return `${code ? `${code}: ` : ""}${e?.message ?? String(error)}`.slice(0, 500);
}

/**
 * Reads and drops a response body of at most `maxBytes`, cancelling a longer one: only the status
 * counts, and a receiver that streams an endless body must not fill the deliverer's memory.
 */
export async function discardBody(response: Response, maxBytes: number): Promise<void> {
  const reader = response.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
      if (read > maxBytes) {
        await reader.cancel();
        return;
      }
    }
  } catch {
    // Reset or timed out mid-body: the status has arrived, and that is the answer.
  }
}
