import type { Clock } from "../../platform/clock.ts";

/** How often held messages are renewed: twice per ack wait, so one missed renewal still keeps them. */
export function renewalPeriod(ackWaitMs: number): number {
  return Math.max(500, Math.floor(ackWaitMs / 2));
}

/** What renewal needs of a JetStream message: `working()` pushes its ack deadline back by one ack wait. */
export type Renewable = { working(): void };

/**
 * The messages a worker holds (received, not yet acked, nak'ed or terminated), with when each came.
 * `renew()`, called well within the ack wait, keeps them from being handed over again; a message held
 * longer than `renewForMs` is no longer renewed, so work stuck that long goes to another worker.
 */
export class HeldMessages<M extends Renewable> {
  private readonly since = new Map<M, number>();

  constructor(
    private readonly clock: Clock,
    private readonly renewForMs = Number.POSITIVE_INFINITY,
  ) {}

  get size(): number {
    return this.since.size;
  }

  has(msg: M): boolean {
    return this.since.has(msg);
  }

  hold(msg: M): void {
    if (!this.since.has(msg)) this.since.set(msg, this.clock.now());
  }

  /** No longer held (answered, or given back); true when it was. */
  release(msg: M): boolean {
    return this.since.delete(msg);
  }

  /** Whether the oldest message has been held past the renewal window. */
  stuck(): boolean {
    for (const at of this.since.values()) return at <= this.clock.now() - this.renewForMs;
    return false;
  }

  /** Renews every message held for less than the renewal window; with the connection closed nothing is sent. */
  renew(): void {
    const since = this.clock.now() - this.renewForMs;
    for (const [msg, at] of this.since) {
      if (at <= since) continue;
      try {
        msg.working();
      } catch {
        // The connection is closed: the ack wait hands the message to another worker.
      }
    }
  }

  clear(): void {
    this.since.clear();
  }
}
