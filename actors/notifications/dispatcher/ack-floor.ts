import type { Consumer } from "@nats-io/jetstream";
import { LogThrottle } from "../../../platform/log-throttle.ts";
import type { Logger } from "../../../platform/logger.ts";
import { streamInfoIfAny } from "../../runtime/storage.ts";
import type { Clock } from "../../../platform/clock.ts";
import { CONSUMERS, STREAMS, type DurableConsumer, type Journal } from "../journal.ts";
import type { DispatcherProgress, EventsProgress } from "../progress.ts";

/** A failing progress write is logged at most this often (it is tried again at every floor read). */
const PROGRESS_WARN_EVERY_MS = 60_000;

/** The floors known on one EVENTS stream (its creation time; "" before the first opening). */
export type FloorState = { stream: string; ackFloor: number; storedFloor: number };

/**
 * Where a consumer created now on EVENTS starts: after the higher of the floor read here and the stored one, each only
 * if of this stream (0: its first event). A floor past the last event cannot be this stream's: it comes down to the last
 * event, and `pastLast` tells the floor that was past it (docs/notifications.md#how-it-runs-nats).
 */
export function resumeFloor(
  events: { created: string; lastSeq: number } | undefined,
  known: FloorState,
  stored: EventsProgress | undefined,
): { floor: number; ackFloor: number; pastLast?: number } {
  let floor = events !== undefined && events.created === known.stream ? known.ackFloor : 0;
  if (stored && events && stored.events_created === events.created) floor = Math.max(floor, stored.ack_floor);
  if (events && floor > events.lastSeq)
    return { floor: events.lastSeq, ackFloor: Math.min(known.ackFloor, events.lastSeq), pastLast: floor };
  return { floor, ackFloor: known.ackFloor };
}

/**
 * The floors once the consumer is open on EVENTS as it is `after` (it was `before` when the floor was
 * chosen): another stream than the floors were read on starts over; on the same one, every event up
 * to the floor the consumer started after is dispatched.
 */
export function afterOpening(
  known: FloorState,
  opened: { before: string | undefined; after: string | undefined; floor: number; stored: EventsProgress | undefined },
): FloorState {
  const { before, after, floor, stored } = opened;
  let next = known;
  if (after !== before || before !== known.stream) next = { stream: after ?? "", ackFloor: 0, storedFloor: 0 };
  if (floor > 0 && after === before) {
    next = {
      ...next,
      ackFloor: Math.max(next.ackFloor, floor),
      storedFloor: stored?.events_created === next.stream ? Math.max(next.storedFloor, stored.ack_floor) : next.storedFloor,
    };
  }
  return next;
}

/** The progress to store now: the floor read, when it moved past what is known stored on a known stream. */
export function progressToStore(known: FloorState): EventsProgress | undefined {
  if (known.stream === "" || known.ackFloor <= known.storedFloor) return undefined;
  return { events_created: known.stream, ack_floor: known.ackFloor };
}

/**
 * The dispatcher's position on EVENTS: opens its consumer after the ack floor, since one created again from the first
 * event would send 7 days of events again, and stores the floor (progress.ts) for a dispatcher starting while the
 * consumer is missing. `stats` carries `ackFloor` and `storedFloor` as the dispatcher's stats show them.
 */
export class AckFloor {
  private stream = "";
  private tickRunning: Promise<void> | undefined;
  private readonly progressWarnings: LogThrottle;

  constructor(
    private readonly journal: Pick<Journal, "ensureConsumer" | "js" | "jsm">,
    private readonly progress: Pick<DispatcherProgress, "read" | "advance">,
    private readonly durable: DurableConsumer,
    readonly stats: { ackFloor: number; storedFloor: number },
    clock: Clock,
    private readonly log: Logger,
  ) {
    this.progressWarnings = new LogThrottle(PROGRESS_WARN_EVERY_MS, 1, () => clock.now());
  }

  private get state(): FloorState {
    return { stream: this.stream, ackFloor: this.stats.ackFloor, storedFloor: this.stats.storedFloor };
  }

  private set state(next: FloorState) {
    this.stream = next.stream;
    this.stats.ackFloor = next.ackFloor;
    this.stats.storedFloor = next.storedFloor;
  }

  /**
   * Opens the consumer, creating it (or EVENTS) when missing: at start, and after a failed pull. The
   * stream is checked again once the consumer exists: were it made again in between, the floor would
   * mean nothing on it, and a consumer started there would skip what the new stream already holds.
   */
  async open(): Promise<Consumer> {
    const info = await streamInfoIfAny(this.journal.jsm, STREAMS.events);
    const before = info?.created;
    // Read even when the consumer exists (its start position is then ignored): checking first would
    // leave a window where a consumer deleted in between is created from the first event.
    const stored = before !== undefined ? await this.progress.read() : undefined;
    const events = info ? { created: info.created, lastSeq: info.state.last_seq } : undefined;
    const resume = resumeFloor(events, this.state, stored);
    if (resume.pastLast !== undefined) {
      this.log.warn(
        { ackFloor: resume.pastLast, lastSeq: resume.floor },
        "the dispatcher's ack floor is past EVENTS' last event: starting after its last event",
      );
      this.stats.ackFloor = resume.ackFloor;
    }
    const { floor } = resume;
    await this.journal.ensureConsumer(floor > 0 ? { ...this.durable, startSeq: floor + 1 } : this.durable);
    let after = await this.eventsCreated();
    if (floor > 0 && after !== before) {
      this.log.warn(
        { ackFloor: floor },
        "EVENTS was created again while the dispatcher's consumer was being opened: starting at its first event",
      );
      await this.journal.jsm.consumers.delete(STREAMS.events, CONSUMERS.dispatcher).catch(() => undefined);
      await this.journal.ensureConsumer(this.durable);
      after = await this.eventsCreated();
    }
    this.state = afterOpening(this.state, { before, after, floor, stored });
    return this.journal.js.consumers.get(STREAMS.events, CONSUMERS.dispatcher);
  }

  /** Reads the floor and stores it; one at a time (a slow server must not pile them up). */
  tick(): Promise<void> {
    this.tickRunning ??= (async () => {
      try {
        await this.read();
        await this.store();
      } finally {
        this.tickRunning = undefined;
      }
    })();
    return this.tickRunning;
  }

  /** The floor with the last acks, after the tick under way (if any). */
  async last(): Promise<void> {
    await this.tickRunning;
    await this.tick();
  }

  /** EVENTS' creation time; undefined when there is no such stream. Any other failure throws (the pull loop retries). */
  private async eventsCreated(): Promise<string | undefined> {
    return (await streamInfoIfAny(this.journal.jsm, STREAMS.events))?.created;
  }

  /** Reads the consumer's ack floor (it only moves forward on one stream; a failed read changes nothing). */
  private async read(): Promise<void> {
    const stream = this.stream;
    const info = await this.journal.jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher).catch(() => undefined);
    if (info && stream === this.stream) this.stats.ackFloor = Math.max(this.stats.ackFloor, info.ack_floor.stream_seq);
  }

  /**
   * Stores the floor as the progress when it moved. A failure is logged (at most once a minute) and
   * tried again at the next read; it never stops the dispatcher (the consumer holds the position anyway).
   */
  private async store(): Promise<void> {
    const next = progressToStore(this.state);
    if (!next) return;
    try {
      const stored = await this.progress.advance(next, () => this.eventsCreated());
      // What is stored now may be another dispatcher's higher floor, or another stream's progress.
      if (this.stream === next.events_created && stored.events_created === next.events_created)
        this.stats.storedFloor = Math.max(this.stats.storedFloor, stored.ack_floor);
    } catch (error) {
      if (this.progressWarnings.take("progress") === undefined) return;
      this.log.warn(
        { err: error, ackFloor: next.ack_floor },
        "storing the dispatcher's progress failed; trying again at the next ack floor read",
      );
    }
  }
}
