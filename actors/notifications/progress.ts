/**
 * The dispatcher's progress on EVENTS, kept across restarts (KV bucket `derrick_dispatcher`, one key):
 *   events → { events_created, ack_floor }
 * `ack_floor` is the dispatcher consumer's ack floor (every event up to it is dispatched) on the
 * EVENTS stream created at `events_created`. A dispatcher that starts while its consumer is missing
 * creates it after this floor instead of at EVENTS' first event (7 days of events sent again to every
 * subscriber); a floor of another EVENTS stream (created again since) means nothing and is ignored.
 *
 * Several dispatchers share the consumer, and each writes the floor it read. A write is a
 * compare-and-set from the revision just read, made only when it moves the progress forward: a
 * higher floor on the same stream, or any floor on a newer stream (later creation time). A lower
 * floor read earlier and written late therefore never replaces a higher one, and a dispatcher that
 * has not yet noticed EVENTS being created again cannot take the progress back to the old stream.
 * (Plain max semantics on the value alone would be the same rule; the revision is what makes it hold
 * between two writers racing.)
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { SINGLE_NODE, bucketOptions, streamInfoIfAny, type StoragePolicy } from "../runtime/storage.ts";
import { casPut, readVersioned } from "../runtime/kv.ts";

export const PROGRESS_BUCKET = "derrick_dispatcher";
const KEY = "events";

export type EventsProgress = {
  /** EVENTS' creation time (its stream info's `created`): the identity of the stream the floor belongs to. */
  events_created: string;
  /** Every event up to this stream sequence is dispatched. */
  ack_floor: number;
};

/** Whether `next` moves the progress forward from `current` (see the module comment). */
export function supersedes(next: EventsProgress, current: EventsProgress | undefined): boolean {
  if (!current) return true;
  if (next.events_created === current.events_created) return next.ack_floor > current.ack_floor;
  return createdMs(next.events_created) > createdMs(current.events_created);
}

/** A creation time in ms; nats-server writes RFC 3339 with nanoseconds, which Date.parse reads to the ms. */
const createdMs = (created: string): number => {
  const ms = Date.parse(created);
  return Number.isFinite(ms) ? ms : 0;
};

/** A stored value this module could have written; anything else (a hand edit) counts as nothing stored. */
function isProgress(value: unknown): value is EventsProgress {
  const v = value as EventsProgress;
  return !!v && typeof v === "object" && typeof v.events_created === "string" && v.events_created !== "" && Number.isSafeInteger(v.ack_floor) && v.ack_floor >= 0;
}

export class DispatcherProgress {
  private constructor(
    private kv: KV,
    private readonly jsm: JetStreamManager,
    private readonly open: () => Promise<KV>,
  ) {}

  static async open(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): Promise<DispatcherProgress> {
    const open = () => new Kvm(nc).create(PROGRESS_BUCKET, bucketOptions(policy, { history: 1, description: "notifications dispatcher's progress on EVENTS" }));
    return new DispatcherProgress(await open(), await jetstreamManager(nc), open);
  }

  /** The stored progress; undefined when nothing (valid) is stored or the bucket is gone. Other failures throw. */
  async read(): Promise<EventsProgress | undefined> {
    return (await this.entry())?.value;
  }

  /**
   * Stores `next` when it moves the progress forward; answers what is stored afterwards (`next`, or
   * the progress that was already further). Failures throw (the caller tries again later).
   */
  async advance(next: EventsProgress): Promise<EventsProgress> {
    for (let tries = 0; tries < 10; tries++) {
      const current = await this.entry();
      if (current?.value && !supersedes(next, current.value)) return current.value;
      try {
        if (await casPut(this.kv, KEY, next, current?.revision ?? 0)) return next;
      } catch (error) {
        if (!(await this.recreatedIfGone())) throw error;
      }
    }
    throw new Error("the dispatcher's progress kept changing under its writes; gave up");
  }

  /** The stored entry: its value (undefined when not one this module writes) and revision; undefined when there is none. */
  private async entry(): Promise<{ value: EventsProgress | undefined; revision: number } | undefined> {
    try {
      const entry = await readVersioned<unknown>(this.kv, KEY);
      return entry && { value: isProgress(entry.value) ? entry.value : undefined, revision: entry.revision };
    } catch (error) {
      // The bucket deleted on the server (a direct get then times out): nothing is stored.
      if (await this.recreatedIfGone()) return undefined;
      throw error;
    }
  }

  /** Creates the bucket again when it was deleted on the server; whether it had been. */
  private async recreatedIfGone(): Promise<boolean> {
    if (await streamInfoIfAny(this.jsm, `KV_${PROGRESS_BUCKET}`)) return false;
    this.kv = await this.open();
    return true;
  }
}
