/** A counting semaphore with an awaitable acquire: consumer loops wait here, so work in memory stays bounded. */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly max: number) {}

  get inUse(): number {
    return this.used;
  }

  acquire(): Promise<void> | void {
    if (this.used < this.max) {
      this.used++;
      return;
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) return next(); // the slot passes on
    this.used--;
    if (this.used === 0) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  idle(): Promise<void> {
    return this.used === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
