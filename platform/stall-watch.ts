/**
 * Warns when this process's event loop was blocked: every request an actor or the edge holds waits
 * meanwhile, so a stall shows up elsewhere as timeouts (504) with no error of its own. The log line
 * says when and for how long, which is what an operator needs to line the two up.
 */
import type { Logger } from "./logger.ts";

export type StallWatchOptions = { everyMs?: number; warnAfterMs?: number };

/** Starts watching; returns the stop. The timer is unref'd: it never keeps a process alive. */
export function watchStalls(log: Logger, options: StallWatchOptions = {}): () => void {
  const everyMs = options.everyMs ?? 100;
  const warnAfterMs = options.warnAfterMs ?? 500;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const blockedMs = now - last - everyMs;
    last = now;
    if (blockedMs >= warnAfterMs)
      log.warn({ blockedMs: Math.round(blockedMs) }, "event loop blocked: requests held by this process waited meanwhile");
  }, everyMs);
  timer.unref?.();
  return () => clearInterval(timer);
}
