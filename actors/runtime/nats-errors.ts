/**
 * NATS and JetStream failures that pass (a stream electing a leader after a server was lost, a
 * reconnect) answered as such: 503 with Retry-After when nothing answered the operation, 504 when
 * it timed out and its outcome is unknown, instead of the 500 of an unexpected error.
 */
import { NoRespondersError, RequestError, TimeoutError } from "@nats-io/nats-core";
import { JetStreamApiError } from "@nats-io/jetstream";
import { DerrickError, gatewayTimeout, unavailable } from "../../subjects/index.ts";

/** The problem to answer for `error` when it is such a failure; undefined for anything else (a DerrickError included). */
export function transientNatsProblem(error: unknown): DerrickError | undefined {
  if (error instanceof DerrickError) return undefined;
  for (let e = error; e instanceof Error; e = e.cause) {
    // A publish nobody received (no stream leader for its subject) stored nothing: safe to repeat.
    if (e instanceof NoRespondersError || (e instanceof RequestError && e.isNoResponders()))
      return unavailable("JetStream did not answer (a stream may be electing a leader); retry shortly", 1);
    if (e instanceof JetStreamApiError && e.status === 503) return unavailable(`JetStream is unavailable (${e.message}); retry shortly`, 1);
    if (e instanceof TimeoutError)
      return gatewayTimeout("JetStream did not answer in time: whether the operation was carried out is unknown");
  }
  return undefined;
}

/** Waits before each new try of a start that met a passing NATS failure: about half a minute in all. */
export const START_RETRY_DELAYS_MS = [500, 1_000, 2_000, 4_000, 8_000, 15_000];

/**
 * Runs `attempt` again after a passing NATS failure (transientNatsProblem), waiting the given delays; any other
 * failure, or one past the last delay, is thrown. Processes starting together on a new cluster race to make the same
 * replicated streams, and one may time out while another's creation settles: a retry finds the stream made.
 */
export async function retryTransient<T>(
  attempt: () => Promise<T>,
  onRetry: (error: unknown, delayMs: number) => void,
  delaysMs: readonly number[] = START_RETRY_DELAYS_MS,
): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      const delayMs = delaysMs[i];
      if (delayMs === undefined || !transientNatsProblem(error)) throw error;
      onRetry(error, delayMs);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}
