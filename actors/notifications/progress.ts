/**
 * The dispatcher's progress on EVENTS, kept across restarts (KV bucket `derrick_dispatcher`, one key):
 *   events → { events_created, ack_floor }
 * so a dispatcher that starts while its consumer is missing resumes after the floor instead of sending 7 days of events
 * again. Writes are compare-and-sets that only move the progress forward, so a late lower floor or an old stream's never
 * replaces what is stored (docs/notifications.md#how-it-runs-nats).
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { SINGLE_NODE, bucketOptions, type StoragePolicy } from "../runtime/storage.ts";
import { recreatingBucket, type Guard } from "../runtime/recreate.ts";
import { casPut, readVersioned } from "../runtime/kv.ts";

export const PROGRESS_BUCKET = "derrick_dispatcher";
const KEY = "events";

export type EventsProgress = {
  /** EVENTS' creation time (its stream info's `created`): the identity of the stream the floor belongs to. */
  events_created: string;
  /** Every event up to this stream sequence is dispatched. */
  ack_floor: number;
};

/**
 * Whether `next` moves the progress forward from `current`: a higher floor on the same stream, or
 * any floor on another stream when `next`'s stream is EVENTS as it exists now (`nextIsCurrent`).
 */
export function supersedes(next: EventsProgress, current: EventsProgress | undefined, nextIsCurrent: boolean): boolean {
  if (!current) return true;
  if (next.events_created === current.events_created) return next.ack_floor > current.ack_floor;
  return nextIsCurrent;
}

/** A stored value this module could have written; anything else (a hand edit) counts as nothing stored. */
function isProgress(value: unknown): value is EventsProgress {
  const v = value as EventsProgress;
  return (
    !!v &&
    typeof v === "object" &&
    typeof v.events_created === "string" &&
    v.events_created !== "" &&
    Number.isSafeInteger(v.ack_floor) &&
    v.ack_floor >= 0
  );
}

export class DispatcherProgress {
  private constructor(
    private readonly kv: KV,
    /** A deleted bucket reads as nothing stored and is made again (runtime/recreate.ts). */
    private readonly guard: Guard,
  ) {}

  static async open(nc: NatsConnection, policy: StoragePolicy = SINGLE_NODE): Promise<DispatcherProgress> {
    const options = bucketOptions(policy, { history: 1, description: "notifications dispatcher's progress on EVENTS" });
    const kvm = new Kvm(nc);
    const kv = await kvm.create(PROGRESS_BUCKET, options);
    return new DispatcherProgress(kv, recreatingBucket(await jetstreamManager(nc), kvm, PROGRESS_BUCKET, options).guard);
  }

  /** The stored progress; undefined when nothing (valid) is stored or the bucket is gone. Other failures throw. */
  async read(): Promise<EventsProgress | undefined> {
    return (await this.entry())?.value;
  }

  /**
   * Stores `next` when it moves the progress forward; answers what is stored afterwards. `currentEvents` answers EVENTS'
   * creation time now, asked only when the stored progress is of another stream. Failures throw (the caller retries).
   */
  async advance(next: EventsProgress, currentEvents: () => Promise<string | undefined>): Promise<EventsProgress> {
    for (let tries = 0; tries < 10; tries++) {
      const current = await this.entry();
      const otherStream = current?.value !== undefined && current.value.events_created !== next.events_created;
      if (current?.value && !supersedes(next, current.value, otherStream && (await currentEvents()) === next.events_created))
        return current.value;
      if (await this.guard(() => casPut(this.kv, KEY, next, current?.revision ?? 0))) return next;
    }
    throw new Error("the dispatcher's progress kept changing under its writes; gave up");
  }

  /** The stored entry: its value (undefined when not one this module writes) and revision; undefined when there is none. */
  private async entry(): Promise<{ value: EventsProgress | undefined; revision: number } | undefined> {
    const entry = await this.guard(() => readVersioned<unknown>(this.kv, KEY));
    return entry && { value: isProgress(entry.value) ? entry.value : undefined, revision: entry.revision };
  }
}
