import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../../platform/logger.ts";
import type { Slots } from "../../runtime/slots.ts";
import type { Clock } from "../../../platform/clock.ts";
import { ConsumerPull } from "../consumer-pull.ts";
import type { HeldMessages } from "../held-messages.ts";
import type { DurableConsumer, Journal } from "../journal.ts";
import { parseWork, type DeliveryMessage, type Lane, type ReceivedMessage, type Work } from "./work.ts";

/** The ack wait covers one attempt plus recording; held messages are renewed well within it. */
export function ackWaitFor(timeoutMs: number): number {
  return timeoutMs + 3_000;
}

export type PullLaneDeps = {
  journal: Pick<Journal, "ensureConsumer" | "js">;
  /** Room in the process: a message starts once its items fit. */
  room: Slots;
  /** Every message received is held (renewed) from here until it is answered. */
  held: HeldMessages<DeliveryMessage>;
  /** Starts a message whose items have room (the room is the callee's to give back). */
  start(msg: DeliveryMessage, work: Work, lane: Lane): void;
  clock: Clock;
  log: Logger;
};

/**
 * One lane's pull loop: never more than `maxMessages` received and not yet started, each held from
 * receipt, started in the order received as soon as its items fit in the process's room.
 */
export class PullLane {
  private readonly pull: ConsumerPull;
  /** Received, not yet started (given back by stop()). */
  private readonly queued = new Set<ReceivedMessage>();
  private wake: (() => void) | undefined;
  /** Messages wait for room one after the other, in the order received. */
  private line: Promise<void> = Promise.resolve();

  constructor(
    readonly lane: Lane,
    private readonly durable: DurableConsumer,
    private readonly maxMessages: number,
    private readonly deps: PullLaneDeps,
  ) {
    this.pull = new ConsumerPull(
      {
        open: () => this.open(),
        reserve: () => this.reserve(),
        take: (msg) => this.receive(msg),
        pulled: () => undefined,
        failed: (error) =>
          deps.log.warn({ err: error, consumer: durable.name }, "pulling delivery work failed; opening the consumer again"),
      },
      deps.clock,
    );
  }

  /** Opens the consumer (failing when that fails) and starts pulling. */
  start(): Promise<void> {
    return this.pull.start();
  }

  /** Stops pulling; work not started goes back at once, for another process (or the next start) to deliver. */
  async stop(): Promise<void> {
    this.pull.halt();
    this.wake?.();
    await this.pull.done;
    for (const msg of this.queued) {
      this.deps.held.release(msg);
      giveBack(msg);
    }
    this.queued.clear();
  }

  private async open() {
    await this.deps.journal.ensureConsumer(this.durable);
    return this.deps.journal.js.consumers.get(this.durable.stream, this.durable.name);
  }

  private async reserve(): Promise<number> {
    while (!this.pull.stopping && this.queued.size >= this.maxMessages) await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
    return this.maxMessages - this.queued.size;
  }

  /** A message received from the consumer: held from now, started in the order received once its items have room. */
  receive(msg: ReceivedMessage): void {
    const work = parseWork(msg.data);
    if (!work) {
      msg.term("not a delivery job");
      return;
    }
    const n = work.items.length;
    this.queued.add(msg);
    this.deps.held.hold(msg);
    this.line = this.line
      .then(async () => {
        if (!this.queued.has(msg)) return;
        await this.deps.room.acquire(n);
        if (!this.queued.has(msg)) return this.deps.room.release(n);
        this.queued.delete(msg);
        this.wake?.();
        this.deps.start(msg, work, this.lane);
      })
      .catch((error: unknown) =>
        this.deps.log.error(
          { err: error, subject: msg.subject, lane: this.lane },
          "starting delivery work failed; it comes back after the ack wait",
        ),
      );
  }
}

/** Gives the message back to JetStream for redelivery now (with the connection gone, the ack wait will). */
export function giveBack(msg: Pick<JsMsg, "nak">): void {
  try {
    msg.nak();
  } catch {
    // the ack wait brings it back
  }
}
