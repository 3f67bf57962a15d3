/**
 * Follows a twin bucket with direct gets: every stored message from a sequence on, in order, then waits for a
 * change notice (the bucket's subjects seen live) or the poll interval and reads on. No consumer: a device account
 * may not create one (docs/security.md#what-each-account-can-do). Notices (core NATS) may be lost: the poll catches up.
 */
import type { NatsConnection, Subscription } from "@nats-io/nats-core";
import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import type { TwinEntry } from "../../platform/twin-commit.ts";

const DEFAULT_POLL_MS = 2_000;

/** A stored message of a KV stream as a twin entry (KV-Operation header: DEL, PURGE; else PUT). */
export function storedToTwinEntry(bucket: string, msg: StoredMsg): TwinEntry {
  const op = msg.header?.get("KV-Operation");
  return {
    key: msg.subject.slice(`$KV.${bucket}.`.length),
    revision: msg.seq,
    operation: op === "DEL" || op === "PURGE" ? op : "PUT",
    value: new TextDecoder().decode(msg.data),
    created: msg.time,
  };
}

export class BucketFollower {
  private next: number;
  private stopped = false;
  private wake?: () => void;
  private notices?: Subscription;
  private running?: Promise<void>;

  constructor(
    private readonly options: {
      nc: NatsConnection;
      /** The JetStream API the bucket is read through (a device account's imported one, or the account's own). */
      jsm: JetStreamManager;
      bucket: string;
      /** First sequence to read (1: the whole history the bucket holds). */
      from: number;
      onEntry: (entry: TwinEntry) => Promise<void> | void;
      /** A read that failed; it is tried again at the next notice or poll. */
      onError?: (error: unknown) => void;
      pollMs?: number;
    },
  ) {
    this.next = options.from;
  }

  start(): void {
    const { nc, bucket } = this.options;
    this.notices = nc.subscribe(`$KV.${bucket}.>`, { callback: () => this.poke() });
    this.running = this.loop();
  }

  /** Reads on now (a notice, a reconnect). */
  poke(): void {
    this.wake?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.notices?.unsubscribe();
    this.poke();
    await this.running;
  }

  private async loop(): Promise<void> {
    const { jsm, bucket, onEntry, onError } = this.options;
    const stream = `KV_${bucket}`;
    while (!this.stopped) {
      // Armed before reading: a notice that arrives during the reads still wakes the next wait.
      const woken = new Promise<void>((resolve) => (this.wake = resolve));
      try {
        for (;;) {
          if (this.stopped) return;
          const msg = await jsm.direct.getMessage(stream, { seq: this.next, next_by_subj: `$KV.${bucket}.>` });
          if (!msg) break;
          this.next = msg.seq + 1;
          await onEntry(storedToTwinEntry(bucket, msg));
        }
      } catch (error) {
        if (this.stopped) return;
        onError?.(error);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.pollMs ?? DEFAULT_POLL_MS)))]);
      clearTimeout(timer);
    }
  }
}
