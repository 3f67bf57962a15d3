/** Time as the replica sees it: injected, so that its decisions over time are tested without waiting. */
export interface Clock {
  /** Epoch milliseconds (the replica uses only differences). */
  now(): number;
  /** Calls `fn` once after `ms`; the function returned cancels it (harmless once it ran). */
  after(ms: number, fn: () => void): () => void;
  /** Calls `fn` every `ms` without keeping the process alive; the function returned stops it. */
  every(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref?.();
    return () => clearInterval(timer);
  },
};
