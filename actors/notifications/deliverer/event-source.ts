import { BoundedCache } from "../../../platform/bounded-cache.ts";
import { fromCarried, letterEvent, type Journal, type StoredEvent } from "../journal.ts";
import { cloudEvent } from "../matching.ts";
import type { Item } from "./work.ts";

const EVENT_CACHE_SIZE = 2048;
/** Bytes of events read from EVENTS, and as many of CloudEvent bodies, kept for reuse across subscriptions. */
const EVENT_CACHE_BYTES = 16 * 1024 * 1024;

type Body = { id: string; partition: string; time: string; body: string };

/**
 * Where a delivery's event and its CloudEvent body come from: carried in its batch, held by the dead
 * letter it replays, or read from EVENTS by sequence; events read and bodies made are reused across
 * the subscriptions an event goes to.
 */
export class EventSource {
  // Read with peek: the entry stored longest ago goes first, whatever was read since.
  private readonly events = new BoundedCache<number, Promise<StoredEvent | undefined>>({
    max: EVENT_CACHE_SIZE,
    maxWeight: EVENT_CACHE_BYTES,
  });
  private readonly bodies = new BoundedCache<number, Body>({ max: EVENT_CACHE_SIZE, maxWeight: EVENT_CACHE_BYTES });

  constructor(private readonly journal: Pick<Journal, "readSizedEvent" | "readDead">) {}

  /** The item's event, or undefined when it is no longer stored. */
  eventOf(item: Item): StoredEvent | undefined | Promise<StoredEvent | undefined> {
    if (item.event) return fromCarried(item, item.event);
    if (item.dead_seq !== undefined) return this.fromDeadLetter(item, item.dead_seq);
    return this.storedEventOf(item);
  }

  /** The CloudEvent body of an event: the same bytes for every subscription it goes to. */
  bodyOf(eventId: string, event: StoredEvent): string {
    const cached = this.bodies.peek(event.event_seq);
    // The id alone does not tell: `evt_<sequence>` names another event on an EVENTS stream created again.
    if (cached?.id === eventId && cached.partition === event.partition && cached.time === event.time) return cached.body;
    const body = JSON.stringify(cloudEvent(eventId, event));
    this.bodies.set(event.event_seq, { id: eventId, partition: event.partition, time: event.time, body }, body.length);
    return body;
  }

  private read(seq: number): Promise<StoredEvent | undefined> {
    let found = this.events.peek(seq);
    if (!found) {
      const read = this.journal.readSizedEvent(seq);
      found = read.then((sized) => sized?.event);
      this.events.set(seq, found, 0);
      const entry = found;
      // Weighed once read; an event that is not there is not kept.
      void read.then(
        (sized) => (sized ? this.events.weigh(seq, entry, sized.bytes) : this.events.deleteIfHolds(seq, entry)),
        () => this.events.deleteIfHolds(seq, entry),
      );
    }
    return found;
  }

  /**
   * The item's event as EVENTS holds it at its sequence, only if it is that event: an EVENTS stream
   * created again numbers its events from 1 again, so the sequence (or this process's copy) may hold another.
   */
  private async storedEventOf(item: Item): Promise<StoredEvent | undefined> {
    const isItems = (e: StoredEvent | undefined) => e?.event_id === item.event_id && e.partition === item.partition && e.type === item.type;
    const event = await this.read(item.event_seq);
    if (!event || isItems(event)) return event;
    // A copy from before the stream was created again: read what the sequence holds now.
    this.events.delete(item.event_seq);
    const current = await this.read(item.event_seq);
    return isItems(current) ? current : undefined;
  }

  private async fromDeadLetter(item: Item, deadSeq: number): Promise<StoredEvent | undefined> {
    const letter = await this.journal.readDead(deadSeq);
    const event = letter?.event_id === item.event_id && letter.subscription_id === item.subscription_id ? letterEvent(letter) : undefined;
    // The letter may be gone already (a concurrent replay succeeded): EVENTS may still hold the event.
    return event ? fromCarried(item, event) : this.storedEventOf(item);
  }
}
