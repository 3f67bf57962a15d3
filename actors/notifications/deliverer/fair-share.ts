import { Slots } from "../../runtime/slots.ts";
import type { Clock } from "../../../platform/clock.ts";

/**
 * Pace assumed for a subscription not seen yet (items per ms), optimistic: work booked too early only
 * costs another nak, work booked too late leaves the receiver idle. It is learnt from completions.
 */
export const INITIAL_PACE = 8;
/** Booked delays are shortened by this factor for the same reason. */
const BOOKING_FACTOR = 0.75;
/** Bookings are spread by up to this share, so work sent away together does not all come back at once. */
const BOOKING_JITTER = 0.1;
export const PACE_WINDOW_MS = 250;
/**
 * The longest work of a saturated subscription is sent away for (booked again if it returns too early):
 * short for fast receivers, whose pace estimate can be off while the process is congested; long for slow
 * ones, whose pace is what the receiver sets.
 */
export const MAX_BOOKING_FAST_MS = 1_000;
export const MAX_BOOKING_SLOW_MS = 60_000;
/** Below this pace (items per ms, i.e. 100/s) a subscription counts as slow. */
export const SLOW_PACE = 0.1;
/** A saturated subscription that is not slow parks up to this long of its work at its pace: parked work starts the moment there is room. */
export const PARK_MS = 1000;
/** How many sent-away messages are remembered (to count them back in); beyond, the count is reset. */
export const AWAY_REMEMBERED = 100_000;
/** A subscription's learnt pace is forgotten after this long unseen (bounded memory). */
export const FORGET_AFTER_MS = 5 * 60_000;

export type FairShareOptions = { concurrency: number; perSubscription: number };

/**
 * One subscription's share of this process: requests running, items held in memory (running, waiting
 * or being recorded), work parked (received, not started, not counted as held), items sent away to come
 * back later, and its pace: items completed per ms while it was saturated (over PACE_WINDOW_MS windows).
 */
export type Share<T> = {
  active: number;
  held: number;
  waiting: Array<() => void>;
  parked: Array<{ entry: T; n: number }>;
  parkedItems: number;
  away: number;
  pace: number;
  completed: number;
  windowStart: number;
  usedAt: number;
};

/** What becomes of work offered for a subscription. */
export type Decision<T> =
  /** Held here (its items count in the share) and started. */
  | { kind: "hold"; share: Share<T> }
  /** Parked: kept (unacknowledged) until the share has room, then handed back by `finish`. */
  | { kind: "park" }
  /** Sent away: nak'ed with this delay, its place in the subscription's queue. */
  | { kind: "send-away"; delayMs: number };

/**
 * The deliverer's fair-share scheduler: the process's room, each subscription's share, parking and sent-away bookings at
 * the subscription's pace (docs/notifications.md#how-it-runs-nats, "Fairness"). Decisions only: the caller acks, naks and
 * posts. `T` is what the caller parks (its message and work); `key` names a message sent away (its stream sequence).
 */
export class FairShare<T> {
  /** Room in the process, in items: taken before a message starts, given back when it is done. */
  readonly room: Slots;
  private readonly shares = new Map<string, Share<T>>();
  /** Messages sent away (key → items and their share), counted back when they return. */
  private readonly away = new Map<number, { share: Share<T>; n: number }>();
  /** Items one subscription may hold beyond its running requests. */
  private readonly queueLimit: number;
  /** Parked items in the process, at most `parkTotal`, half of it for one subscription. */
  private readonly parkTotal: number;
  private parkedItems = 0;
  private requests = 0;
  private closed = false;

  constructor(
    private readonly options: FairShareOptions,
    private readonly clock: Clock,
    private readonly random: () => number = Math.random,
  ) {
    this.room = new Slots(options.concurrency);
    // Enough to keep one busy receiver saturated, bounded so a slow one cannot take it all.
    this.queueLimit = Math.max(options.perSubscription, Math.floor(options.concurrency / 4));
    this.parkTotal = 8 * options.concurrency;
  }

  /** Requests running now, over all subscriptions. */
  get running(): number {
    return this.requests;
  }

  /** Items parked now, over all subscriptions. */
  get parked(): number {
    return this.parkedItems;
  }

  /** The most items one subscription holds at once (running and waiting for a request slot). */
  get holdLimit(): number {
    return this.options.perSubscription + this.queueLimit;
  }

  /** The subscription's share, if it is known. */
  shareOf(subscriptionId: string): Share<T> | undefined {
    return this.shares.get(subscriptionId);
  }

  /** Work of `n` items for the subscription: held when it fits, else parked or sent away. */
  offer(subscriptionId: string, n: number, key: number, entry: T): Decision<T> {
    const share = this.use(subscriptionId);
    if (this.admits(share, n)) {
      share.held += n;
      return { kind: "hold", share };
    }
    if (this.park(share, n, entry)) return { kind: "park" };
    return { kind: "send-away", delayMs: this.sendAway(share, n, key) };
  }

  /** A message back from being sent away no longer counts as away. */
  returned(key: number): void {
    if (this.away.size === 0) return;
    const entry = this.away.get(key);
    if (!entry) return;
    this.away.delete(key);
    entry.share.away = Math.max(0, entry.share.away - entry.n);
  }

  /**
   * Runs one request of the subscription in one of its slots, waiting for one if need be. `fn` may
   * `release` the slot early (once the HTTP call is over, recording overlaps the next request).
   */
  async attempt<R>(share: Share<T>, fn: (release: () => void) => Promise<R>): Promise<R> {
    await this.slot(share);
    this.requests++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.requests--;
      this.leave(share);
    };
    try {
      return await fn(release);
    } finally {
      release();
      this.completed(share);
    }
  }

  /** `n` held items are done; answers the parked work that fits now, in order, its items already held. */
  finish(share: Share<T>, n: number): T[] {
    share.held -= n;
    const start: T[] = [];
    while (share.parked.length > 0) {
      const next = share.parked[0]!;
      if (!this.admits(share, next.n)) break;
      share.parked.shift();
      share.parkedItems -= next.n;
      this.parkedItems -= next.n;
      share.held += next.n;
      start.push(next.entry);
    }
    return start;
  }

  /** Forgets subscriptions not seen for FORGET_AFTER_MS with nothing held, parked or away. */
  sweep(): void {
    const idleSince = this.clock.now() - FORGET_AFTER_MS;
    for (const [id, share] of this.shares)
      if (share.held === 0 && share.away === 0 && share.parked.length === 0 && share.usedAt < idleSince) this.shares.delete(id);
  }

  /** Parks nothing more; answers all parked work (to give back). */
  close(): T[] {
    this.closed = true;
    const all: T[] = [];
    for (const share of this.shares.values()) {
      for (const p of share.parked.splice(0)) all.push(p.entry);
      share.parkedItems = 0;
    }
    this.parkedItems = 0;
    return all;
  }

  private use(subscriptionId: string): Share<T> {
    const now = this.clock.now();
    let share = this.shares.get(subscriptionId);
    if (!share) {
      share = {
        active: 0,
        held: 0,
        waiting: [],
        parked: [],
        parkedItems: 0,
        away: 0,
        pace: INITIAL_PACE,
        completed: 0,
        windowStart: now,
        usedAt: 0,
      };
      this.shares.set(subscriptionId, share);
    }
    share.usedAt = now;
    return share;
  }

  /** Whether `n` more items of the subscription fit in memory (an idle subscription takes any message). */
  private admits(share: Share<T>, n: number): boolean {
    return share.held === 0 || share.held + n <= this.holdLimit;
  }

  private slot(share: Share<T>): Promise<void> | void {
    if (share.active < this.options.perSubscription) {
      share.active++;
      return;
    }
    return new Promise<void>((resolve) => share.waiting.push(resolve));
  }

  private leave(share: Share<T>): void {
    const next = share.waiting.shift();
    // The slot passes to the next waiter.
    if (next) next();
    else share.active--;
  }

  /** Counts completed items; while the subscription is saturated, the window's rate becomes its pace. */
  private completed(share: Share<T>): void {
    share.completed++;
    const now = this.clock.now();
    const elapsed = now - share.windowStart;
    if (elapsed < PACE_WINDOW_MS) return;
    if (share.held >= this.options.perSubscription || share.away > 0 || share.parkedItems > 0)
      share.pace += (share.completed / elapsed - share.pace) / 2;
    share.completed = 0;
    share.windowStart = now;
  }

  private park(share: Share<T>, n: number, entry: T): boolean {
    if (this.closed || share.pace < SLOW_PACE) return false;
    if (this.parkedItems + n > this.parkTotal || share.parkedItems + n > Math.min(share.pace * PARK_MS, this.parkTotal / 2)) return false;
    share.parked.push({ entry, n });
    share.parkedItems += n;
    this.parkedItems += n;
    return true;
  }

  /** Books `n` items for when the items ahead of them (held, parked or sent away before) have drained at the subscription's pace. */
  private booking(share: Share<T>, n: number): number {
    const ahead = share.held + share.parkedItems + share.away + n - this.holdLimit;
    const longest = share.pace < SLOW_PACE ? MAX_BOOKING_SLOW_MS : MAX_BOOKING_FAST_MS;
    return Math.round(Math.min(Math.max((BOOKING_FACTOR * ahead) / share.pace, 1), longest) * (1 + this.random() * BOOKING_JITTER));
  }

  private sendAway(share: Share<T>, n: number, key: number): number {
    const delay = this.booking(share, n);
    if (this.away.size >= AWAY_REMEMBERED) {
      for (const entry of this.away.values()) entry.share.away = 0;
      this.away.clear();
    }
    this.away.set(key, { share, n });
    share.away += n;
    return delay;
  }
}
