import type { Consumer, JsMsg } from "@nats-io/jetstream";
import { sleep, type Clock } from "../../platform/clock.ts";

/** How long a pull waits for messages before the next one is sent. */
export const PULL_EXPIRES_MS = 5_000;
const PULL_RETRY_FIRST_MS = 100;
const PULL_RETRY_MAX_MS = 2_000;

/** The pause after the `failures`-th failed pull in a row (from 0): doubling from 100 ms, at most 2 s. */
export function pullRetryDelay(failures: number): number {
  return Math.min(PULL_RETRY_MAX_MS, PULL_RETRY_FIRST_MS * 2 ** failures);
}

/** What one consumer loop does with its pulls. */
export type PullWork = {
  /** Opens the consumer, creating it (and its stream) when missing. */
  open(): Promise<Consumer>;
  /** Waits until there is room and answers how many messages the next pull asks for (reserved until `pulled`). */
  reserve(): Promise<number>;
  take(msg: JsMsg): void;
  /** The pull ended (or was not sent): `received` of the `asked` came. */
  pulled(asked: number, received: number): void;
  /** A pull failed; the loop pauses, then pulls again from the consumer opened again. */
  failed(error: unknown): void;
};

/**
 * A consumer's pull loop: `fetch` with no more messages than there is room for, so every message
 * received is in the worker's hands (and renewed) at once. A failed pull (NATS away, the consumer or
 * its stream deleted on the server) is retried after a pause from the consumer opened again.
 */
export class ConsumerPull {
  private consumer: Consumer | undefined;
  private stopped = false;
  private pull: { stop(): void } | undefined;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly work: PullWork,
    private readonly clock: Clock,
  ) {}

  get stopping(): boolean {
    return this.stopped;
  }

  /** Opens the consumer (failing when that fails) and starts pulling. */
  async start(consumer?: Consumer): Promise<void> {
    this.consumer = consumer ?? (await this.work.open());
    this.loop = this.run();
  }

  /** Ends the pull under way (its messages still come to `take`); the loop goes on unless stopped. */
  interrupt(): void {
    this.pull?.stop();
  }

  /** Stops pulling; `done` resolves once the loop has ended. */
  halt(): void {
    this.stopped = true;
    this.interrupt();
  }

  get done(): Promise<void> {
    return this.loop;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const asked = await this.work.reserve();
      let received = 0;
      try {
        if (this.stopped || asked <= 0) continue;
        this.consumer ??= await this.work.open();
        const messages = await this.consumer.fetch({ max_messages: asked, expires: PULL_EXPIRES_MS });
        this.pull = messages;
        // Stopped while the pull was being sent: do not wait out its expiry.
        if (this.stopped) messages.stop();
        for await (const msg of messages) {
          received++;
          this.work.take(msg);
        }
        failures = 0;
      } catch (error) {
        this.consumer = undefined;
        if (!this.stopped) {
          this.work.failed(error);
          await sleep(this.clock, pullRetryDelay(failures++));
        }
      } finally {
        this.pull = undefined;
        this.work.pulled(asked, received);
      }
    }
  }
}
