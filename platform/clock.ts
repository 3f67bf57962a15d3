/**
 * Time as the background workers see it: injected, so their decisions (fair share, renewal, backoff,
 * restarts) are tested without waiting for real time.
 */
export type Clock = {
  now(): number;
  /** Calls `fn` after `ms`; the answer cancels it. */
  after(ms: number, fn: () => void): () => void;
  /** Calls `fn` every `ms` until cancelled; it never keeps the process alive on its own. */
  every(ms: number, fn: () => void): () => void;
};

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref?.();
    return () => clearInterval(timer);
  },
};

export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

/** A clock for tests: time moves only with `advance`, which runs the timers due in order. */
export class ManualClock implements Clock {
  private timers: Array<{ at: number; id: number; fn: () => void; every?: number }> = [];
  private nextId = 0;

  constructor(private time = 0) {}

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): () => void {
    return this.schedule(ms, fn);
  }

  every(ms: number, fn: () => void): () => void {
    return this.schedule(ms, fn, Math.max(1, ms));
  }

  /** Moves time forward by `ms`; promise callbacks run before each timer and at the end. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await settle();
    for (;;) {
      const next = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!next) break;
      this.time = next.at;
      if (next.every) next.at += next.every;
      else this.timers = this.timers.filter((t) => t !== next);
      next.fn();
      await settle();
    }
    this.time = end;
  }

  /** Timers not yet run or cancelled. */
  get pending(): number {
    return this.timers.length;
  }

  private schedule(ms: number, fn: () => void, every?: number): () => void {
    const timer = { at: this.time + Math.max(0, ms), id: this.nextId++, fn, ...(every ? { every } : {}) };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }
}

/** Lets every promise callback that is ready run (a macrotask runs after all of them). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The promise's value, or a rejection saying "<what> within <ms> ms" once `ms` pass first (the promise goes on). */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
