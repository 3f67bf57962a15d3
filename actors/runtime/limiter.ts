/**
 * Runs tasks with at most `max` in flight; the rest wait in arrival order. `idle()` lets a drain
 * wait until nothing is waiting or running.
 */
export class InFlightLimiter {
  private running = 0;
  private readonly waiting: Array<() => Promise<void>> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(private readonly max: number) {}

  run(task: () => Promise<void>): void {
    if (this.running < this.max) this.start(task);
    else this.waiting.push(task);
  }

  private start(task: () => Promise<void>): void {
    this.running++;
    task()
      .catch(() => undefined) // tasks handle their own errors; a stray rejection must not stop the queue
      .finally(() => {
        this.running--;
        const next = this.waiting.shift();
        if (next) this.start(next);
        else if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      });
  }

  idle(): Promise<void> {
    return this.running === 0 && this.waiting.length === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}
