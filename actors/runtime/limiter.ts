import { Slots } from "./slots.ts";

/** How much may wait behind the running tasks: a count and the bytes the waiting requests hold. */
export type QueueBound = { requests: number; bytes: number };

const UNBOUNDED: QueueBound = { requests: Number.POSITIVE_INFINITY, bytes: Number.POSITIVE_INFINITY };

/**
 * Runs tasks with at most `max` in flight; the rest wait in arrival order, up to `bound`. `idle()`
 * lets a drain wait until nothing is waiting or running.
 */
export class InFlightLimiter {
  private running = 0;
  private readonly waiting: Array<{ task: () => Promise<void>; bytes: number }> = [];
  private waitingBytes = 0;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly max: number,
    private readonly bound: QueueBound = UNBOUNDED,
  ) {}

  /** Starts `task` or queues it; false (the task is not taken) when it would have to wait and the queue is full. */
  run(task: () => Promise<void>, bytes = 0): boolean {
    if (this.running < this.max) {
      this.start(task);
      return true;
    }
    if (this.waiting.length >= this.bound.requests || this.waitingBytes + bytes > this.bound.bytes) return false;
    this.waiting.push({ task, bytes });
    this.waitingBytes += bytes;
    return true;
  }

  /** Tasks running and waiting now, and the bytes the waiting ones hold. */
  get load(): { running: number; waiting: number; waitingBytes: number } {
    return { running: this.running, waiting: this.waiting.length, waitingBytes: this.waitingBytes };
  }

  private start(task: () => Promise<void>): void {
    this.running++;
    task()
      .catch(() => undefined) // tasks handle their own errors; a stray rejection must not stop the queue
      .finally(() => {
        this.running--;
        const next = this.waiting.shift();
        if (next) {
          this.waitingBytes -= next.bytes;
          this.start(next.task);
        } else if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      });
  }

  idle(): Promise<void> {
    return this.running === 0 && this.waiting.length === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/**
 * Admission with a bounded queue (`max` running, `queueMax` waiting; `tryRun` answers undefined beyond both), for
 * expensive work anyone can ask for (a password hash per token request): a flood is refused cheaply instead of
 * piling up until every request waiting behind it times out.
 */
export class AdmissionGate {
  private readonly slots: Slots;
  private queued = 0;

  constructor(
    private readonly max: number,
    private readonly queueMax: number,
  ) {
    this.slots = new Slots(max);
  }

  /** Tasks running and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.slots.inUse, waiting: this.queued };
  }

  /** Runs `task` now or once a slot frees; undefined (task not run) when the slots and the queue are full. */
  tryRun<T>(task: () => Promise<T>): Promise<T> | undefined {
    if (this.slots.inUse >= this.max && this.queued >= this.queueMax) return undefined;
    return this.run(task);
  }

  private async run<T>(task: () => Promise<T>): Promise<T> {
    const wait = this.slots.acquire();
    if (wait) {
      this.queued++;
      try {
        await wait;
      } finally {
        this.queued--;
      }
    }
    try {
      return await task();
    } finally {
      this.slots.release();
    }
  }
}
