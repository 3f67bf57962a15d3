import { Slots } from "../../runtime/slots.ts";
import { EVENTS_MESSAGE_BYTES } from "../journal.ts";
import { ROUND_EVENTS } from "./batches.ts";

/** Events held at once (received, not yet acked). */
export const IN_FLIGHT = 1024;
/** Events one pull asks for at most (reserved before it is sent): a round's worth. */
export const PULL_EVENTS = ROUND_EVENTS;
/** Per-message bookkeeping counted with its payload (headers, the message and parsed objects' own fields). */
const MESSAGE_OVERHEAD_BYTES = 512;
/** What one event held can weigh at most: a pull reserves this much per event it asks for. */
export const EVENT_WEIGHT_MAX = EVENTS_MESSAGE_BYTES + MESSAGE_OVERHEAD_BYTES;

/** What an event of `payloadBytes` weighs while held. */
export function weightOf(payloadBytes: number): number {
  return payloadBytes + MESSAGE_OVERHEAD_BYTES;
}

/**
 * The dispatcher's hold on memory: at most IN_FLIGHT events and `inFlightBytes` of them. A pull asks
 * only for as many events as fit in what is free at their largest size, and the part an event does not
 * use is freed when it arrives, so the bound holds whatever the events weigh.
 */
export class PullBudget {
  private readonly events = new Slots(IN_FLIGHT);
  private readonly bytes: Slots;

  constructor(private readonly inFlightBytes: number) {
    this.bytes = new Slots(Math.max(inFlightBytes, EVENT_WEIGHT_MAX));
  }

  /** Bytes reserved or held now. */
  get bytesInUse(): number {
    return this.bytes.inUse;
  }

  /** Events reserved or held now. */
  get eventsInUse(): number {
    return this.events.inUse;
  }

  /** Waits for room for a pull and answers how many events it asks for (at least one), all reserved at their largest size. */
  async reserve(): Promise<number> {
    await this.events.acquire(PULL_EVENTS);
    // At least one event of the largest size must fit; then as many more as fit now (the pull loop is
    // the only one reserving bytes, so that part is taken at once).
    await this.bytes.acquire(EVENT_WEIGHT_MAX);
    const wanted = 1 + Math.max(0, Math.min(PULL_EVENTS - 1, Math.floor((this.inFlightBytes - this.bytes.inUse) / EVENT_WEIGHT_MAX)));
    void this.bytes.acquire((wanted - 1) * EVENT_WEIGHT_MAX);
    return wanted;
  }

  /** An event arrived: its reservation becomes its own, at what it weighs. */
  arrived(payloadBytes: number): void {
    this.bytes.release(EVENT_WEIGHT_MAX - weightOf(payloadBytes));
  }

  /** The pull ended: what was reserved for events that did not come is free again. */
  pulled(asked: number, received: number): void {
    this.events.release(PULL_EVENTS - received);
    this.bytes.release((asked - received) * EVENT_WEIGHT_MAX);
  }

  /** Events answered (acked, nak'ed or terminated with their round): their room is free again. */
  done(payloadSizes: number[]): void {
    let weight = 0;
    for (const size of payloadSizes) weight += weightOf(size);
    this.events.release(payloadSizes.length);
    this.bytes.release(weight);
  }

  /** Resolves once no event is held or reserved. */
  idle(): Promise<void> {
    return this.events.idle();
  }
}
