/** Bounds how many handlers run at once; `idle()` lets drain wait for the ones in flight. */
export class InFlightLimiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly max: number) {}

  get active(): number {
    return this.running;
  }

  /** Resolves when a slot is free; synchronous fast path when below the bound. */
  acquire(): Promise<void> | void {
    if (this.running < this.max) {
      this.running++;
      return;
    }
    return new Promise((resolve) => this.waiting.push(() => (this.running++, resolve())));
  }

  release(): void {
    this.running--;
    const next = this.waiting.shift();
    if (next) next();
    else if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  idle(): Promise<void> {
    return this.running === 0 && this.waiting.length === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
