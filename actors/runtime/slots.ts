/**
 * A counting semaphore with a weighted, awaitable acquire, so the consumer loops (dispatcher, deliverer, content worker)
 * keep work in memory bounded (n deliveries take n slots). Waiters go in order; a request over the whole capacity is let
 * through when nothing else is held, so it cannot wait forever.
 */
export class Slots {
  private used = 0;
  private readonly waiting: Array<{ n: number; wake: () => void }> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly max: number) {}

  get inUse(): number {
    return this.used;
  }

  acquire(n = 1): Promise<void> | void {
    if (this.waiting.length === 0 && this.fits(n)) {
      this.used += n;
      return;
    }
    return new Promise((wake) => this.waiting.push({ n, wake }));
  }

  release(n = 1): void {
    this.used -= n;
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.n)) {
      const next = this.waiting.shift()!;
      this.used += next.n;
      next.wake();
    }
    if (this.used === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  idle(): Promise<void> {
    return this.used === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private fits(n: number): boolean {
    return this.used + n <= this.max || this.used === 0;
  }
}
