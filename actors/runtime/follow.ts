/**
 * Background loops that last as long as the process: following a KV bucket (followBucket) and consuming a durable
 * JetStream consumer (consumeForever). A nats.js iterator can end silently or by throwing, which would end a bare loop
 * for good or crash the process: these re-open it with backoff, and an entry that cannot be handled is logged and
 * skipped (docs/operations.md#loops-that-outlive-their-iterators).
 */
import { Bucket, KvWatchInclude, type KV, type KvEntry } from "@nats-io/kv";
import { onStreamDeleted } from "./recreate.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import type { ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../platform/logger.ts";

export type RetryOptions = {
  /** Pause before re-opening an iterator that ended, doubled per failed attempt up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
};

export type FollowOptions = RetryOptions & {
  /** What is followed, in logs (e.g. "catalog"). */
  what: string;
  /** Key filter; every key by default. */
  key?: string;
  /**
   * "all" (default): each key's last value, then every change; "history": every revision the bucket
   * holds, oldest first, then every change (for a follower that applies a protocol over revisions,
   * such as a twin's commit records); "updates": only changes from now on.
   */
  from?: "all" | "history" | "updates";
  /**
   * The bucket was deleted and made again (its stream's creation time changed; revisions start over):
   * called before the watch starts over from the beginning, delivering the current values again.
   */
  onRecreated?: (created: string) => void;
  /** How often the stream's creation time is checked while the watch runs (30 s by default). */
  checkEveryMs?: number;
  /**
   * The connection to hear the server's deletion advisories on: the watch then learns of a bucket made
   * again within a quarter second, not at the next check.
   */
  nc?: NatsConnection;
};

/** A running loop. */
export type Loop = {
  /** Ends the loop; resolves once it has returned (an entry being handled is finished first). */
  stop(): Promise<void>;
  /** How often the iterator was re-opened after it ended. */
  readonly restarts: number;
};

/**
 * A followed bucket: `recheck` looks at once whether it was made again (starting the watch over if so; true then);
 * `reopen` opens the watch again after the last entry delivered (for a watch that stopped delivering, e.g. on a lost server).
 */
export type FollowedBucket = Loop & { recheck(): Promise<boolean>; reopen(): void };

/** A supervised loop, plus closing its iterator so that it is re-opened. */
type Supervisor = Loop & { reopen(): void };

const DEFAULT_RETRY_MS = 250;
const DEFAULT_MAX_RETRY_MS = 10_000;

/**
 * Follows a KV bucket: `onEntry` gets each entry in revision order, forever, a re-opened watch resuming after the last
 * one delivered. Open when this resolves (watch, then load, miss nothing); a bucket made again restarts its revisions,
 * so its creation time is watched and the follow starts over (docs/operations.md#loops-that-outlive-their-iterators).
 */
const AFTER_DELETION_CHECK_MS = 250;
const AFTER_DELETION_CHECKS = 40;

export async function followBucket(
  kv: Pick<KV, "watch" | "status">,
  options: FollowOptions,
  onEntry: (entry: KvEntry) => void | Promise<void>,
  log: Logger,
): Promise<FollowedBucket> {
  const key = options.key ?? ">";
  // The next revision to deliver; 0 = none known yet. "updates" starts after the bucket's last
  // message, so a watch re-opened before the first update still misses none.
  const status = (await kv.status()).streamInfo;
  let resumeAt = options.from === "updates" ? status.state.last_seq + 1 : 0;
  let created = status.created;
  const open = () =>
    kv.watch({
      key,
      ...(resumeAt > 0 ? { resumeFromRevision: resumeAt } : options.from === "history" ? { include: KvWatchInclude.AllHistory } : {}),
    });
  /** The stream's creation time now; undefined while it cannot be told (no stream yet, JetStream away). */
  const createdNow = () =>
    kv.status().then(
      (s) => s.streamInfo.created,
      () => undefined,
    );
  const reopen = async () => {
    const now = await createdNow();
    if (now !== undefined && now !== created) {
      log.warn(
        { follow: options.what, created: now, before: created, resumeAt },
        `KV watch of ${options.what}: the bucket was deleted and made again; starting over from its beginning`,
      );
      created = now;
      resumeAt = 0;
      options.onRecreated?.(now);
    }
    return open();
  };
  const loop = supervise({
    what: `KV watch of ${options.what}`,
    log,
    retry: options,
    first: await open(),
    open: reopen,
    close: (watch) => watch.stop(),
    handle: async (entry: KvEntry) => {
      try {
        await onEntry(entry);
      } finally {
        resumeAt = entry.revision + 1;
      }
    },
    unhandled: {
      fields: (entry) => ({ follow: options.what, key: entry.key, revision: entry.revision }),
      outcome: "a KV entry could not be handled; skipped",
    },
    position: () => ({ resumeAt }),
  });
  const recreated = () =>
    createdNow().then((now) => {
      if (now === undefined || now === created) return false;
      loop.reopen();
      return true;
    });
  const check = setInterval(() => void recreated(), options.checkEveryMs ?? 30_000);
  check.unref?.();
  // Without this, a watch learns of a bucket made again only at the next check (30 s): a dispatcher
  // sent new events to no subscription meanwhile.
  let watching: ReturnType<typeof setInterval> | undefined;
  const deletions =
    options.nc && kv instanceof Bucket
      ? onStreamDeleted(
          options.nc,
          () => {
            clearInterval(watching);
            let tries = 0;
            // Its own handle: a slow check of an earlier deletion must not stop this one's polling.
            const poll: ReturnType<typeof setInterval> = setInterval(() => {
              if (++tries > AFTER_DELETION_CHECKS) return clearInterval(poll);
              void recreated().then((done) => done && clearInterval(poll));
            }, AFTER_DELETION_CHECK_MS);
            poll.unref?.();
            watching = poll;
          },
          kv.stream,
        )
      : undefined;
  return {
    get restarts() {
      return loop.restarts;
    },
    recheck: recreated,
    reopen: () => loop.reopen(),
    stop() {
      clearInterval(check);
      clearInterval(watching);
      deletions?.unsubscribe();
      return loop.stop();
    },
  };
}

/**
 * Consumes a durable consumer forever; a message whose handling throws is logged and left unacknowledged for the ack
 * wait to bring back (unless the handler settled it). `reopen()` opens the iterator again at once, for an owner that
 * learns first that the stream was deleted (nats.js notices only after missed heartbeats).
 */
export async function consumeForever(
  open: () => Promise<ConsumerMessages>,
  onMessage: (msg: JsMsg) => void | Promise<void>,
  options: RetryOptions & { what: string; log: Logger },
): Promise<Loop & { reopen(): void }> {
  const { log } = options;
  return supervise({
    what: `consumer ${options.what}`,
    log,
    retry: options,
    first: await open(),
    open,
    close: (messages) => void messages.close().catch(() => undefined),
    handle: onMessage,
    unhandled: {
      fields: (msg) => ({ consumer: options.what, subject: msg.subject, seq: msg.seq }),
      outcome: "a message could not be handled; it comes back after the ack wait",
    },
    position: () => ({}),
  });
}

type Supervised<I, E> = {
  what: string;
  log: Logger;
  retry: RetryOptions;
  first: I;
  open(): Promise<I>;
  close(iterator: I): void;
  handle(item: E): void | Promise<void>;
  /** What is logged of an item whose handling threw; the loop goes on with the next. */
  unhandled: { fields(item: E): Record<string, unknown>; outcome: string };
  /** Where a re-opened iterator starts, for the logs. */
  position(): Record<string, unknown>;
};

/** The connection is closing or closed: nothing can be re-opened, and nothing should be. */
function connectionGone(error: unknown): boolean {
  const name = (error as Error | undefined)?.name ?? "";
  return name === "ClosedConnectionError" || name === "DrainingConnectionError";
}

function supervise<I extends AsyncIterable<E>, E>(loop: Supervised<I, E>): Supervisor {
  const { log, what } = loop;
  const retryMs = loop.retry.retryMs ?? DEFAULT_RETRY_MS;
  const maxRetryMs = loop.retry.maxRetryMs ?? DEFAULT_MAX_RETRY_MS;
  let current: I | undefined = loop.first;
  let stopped = false;
  let restarts = 0;
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  const handleLogged = async (item: E) => {
    try {
      await loop.handle(item);
    } catch (error) {
      log.error({ err: error, ...loop.unhandled.fields(item) }, loop.unhandled.outcome);
    }
  };

  const running = (async () => {
    // Attempts since the last item: a watch that keeps ending before it delivers anything backs off.
    let failures = 0;
    while (!stopped) {
      if (!current) {
        try {
          current = await loop.open();
        } catch (error) {
          if (connectionGone(error)) {
            if (!stopped) log.warn({ err: error }, `${what}: the NATS connection is closing; not re-opened`);
            return;
          }
          log.warn({ err: error, attempt: failures + 1, ...loop.position() }, `${what}: cannot re-open it yet; retrying`);
          await pause(Math.min(maxRetryMs, retryMs * 2 ** failures++));
          continue;
        }
        if (stopped) {
          loop.close(current);
          return;
        }
        restarts++;
        log.warn({ restarts, ...loop.position() }, `${what}: re-opened`);
      }
      let thrown: unknown;
      try {
        for await (const item of current) {
          failures = 0;
          await handleLogged(item);
          if (stopped) break;
        }
      } catch (error) {
        thrown = error;
      }
      current = undefined;
      if (stopped) return;
      log.warn(
        { ...(thrown ? { err: thrown } : {}), ...loop.position() },
        `${what} ended ${thrown ? "with an error" : "by itself (nats.js gave it up)"} while still needed; re-opening it`,
      );
      await pause(Math.min(maxRetryMs, retryMs * 2 ** failures++));
    }
  })();

  return {
    get restarts() {
      return restarts;
    },
    reopen() {
      if (current && !stopped) loop.close(current);
    },
    async stop() {
      stopped = true;
      wake?.();
      if (current) loop.close(current);
      await running;
    },
  };
}
