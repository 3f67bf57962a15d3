/**
 * The request side of the contract: one NATS request with the caller's metadata in headers, the
 * reply decoded, and transport failures mapped to the error model (no responders → 503,
 * timeout → 504, a service error → the actor's own problem and status).
 */
import { errors as natsErrors, type NatsConnection } from "@nats-io/nats-core";
import { ServiceError } from "@nats-io/services";
import { DerrickError, gatewayTimeout, unavailable, type Problem } from "./errors.ts";
import { Header, encodeRequestMeta, type RequestMeta } from "./headers.ts";

export type BusReply<T> = {
  status: number;
  /** The reply decoded from JSON (parsed on first access). */
  readonly body: T;
  /** The reply's JSON bytes as the actor sent them (empty for no body). */
  raw: Uint8Array;
  headers: Record<string, string>;
};

export type BusOptions = {
  /** Default time to wait for a reply. */
  timeoutMs: number;
  /** Observes every request's duration (metrics). */
  onRequest?: (subject: string, seconds: number, outcome: string) => void;
};

const encoder = new TextEncoder();

export class Bus {
  constructor(
    readonly nc: NatsConnection,
    private readonly options: BusOptions,
  ) {}

  async request<T = unknown>(subject: string, body: unknown, meta: RequestMeta = {}, timeoutMs = this.options.timeoutMs): Promise<BusReply<T>> {
    const started = performance.now();
    let outcome = "ok";
    try {
      const payload = body === undefined ? undefined : encoder.encode(JSON.stringify(body));
      const headers = encodeRequestMeta({ ...meta, deadline: meta.deadline ?? Date.now() + timeoutMs });
      let msg;
      try {
        msg = await this.nc.request(subject, payload, { timeout: timeoutMs, headers });
      } catch (error) {
        throw transportError(error, subject);
      }
      if (ServiceError.isServiceError(msg)) {
        const status = Number(msg.headers?.get("Nats-Service-Error-Code")) || 500;
        let problem: Partial<Problem> = { status, detail: msg.headers?.get("Nats-Service-Error") ?? "error" };
        if (msg.data.length) {
          try {
            problem = { ...problem, ...(msg.json() as Partial<Problem>) };
          } catch {
            // keep the header text: a non-JSON error body from a foreign responder
          }
        }
        throw DerrickError.fromProblem(problem, replyHeaders(msg.headers?.get(Header.replyHeaders)));
      }
      return lazyReply<T>(msg.headers ? Number(msg.headers.get(Header.status)) || 200 : 200, msg.data, msg.headers ? replyHeaders(msg.headers.get(Header.replyHeaders)) : {});
    } catch (error) {
      outcome = error instanceof DerrickError ? String(error.status) : "error";
      throw error;
    } finally {
      this.options.onRequest?.(subject, (performance.now() - started) / 1000, outcome);
    }
  }
}

const decoder = new TextDecoder();

function lazyReply<T>(status: number, raw: Uint8Array, headers: Record<string, string>): BusReply<T> {
  let parsed: { value: T } | undefined;
  return {
    status,
    raw,
    headers,
    get body() {
      parsed ??= { value: (raw.length ? JSON.parse(decoder.decode(raw)) : undefined) as T };
      return parsed.value;
    },
  };
}

function replyHeaders(raw: string | undefined): Record<string, string> {
  if (!raw) return {};
  try {
    return JSON.parse(raw) as Record<string, string>;
  } catch {
    return {};
  }
}

function transportError(error: unknown, subject: string): Error {
  const cause = error instanceof natsErrors.RequestError ? (error.cause ?? error) : error;
  if (error instanceof natsErrors.RequestError && error.isNoResponders()) {
    return unavailable(`no actor is serving ${subject}; try again shortly`, 1);
  }
  if (cause instanceof natsErrors.NoRespondersError) return unavailable(`no actor is serving ${subject}; try again shortly`, 1);
  if (cause instanceof natsErrors.TimeoutError || error instanceof natsErrors.TimeoutError) {
    return gatewayTimeout(`no reply from ${subject} in time`);
  }
  if (error instanceof natsErrors.ClosedConnectionError || error instanceof natsErrors.DrainingConnectionError) {
    return unavailable("the message bus connection is closing", 1);
  }
  return unavailable(`message bus error: ${(error as Error).message}`, 1);
}
