/**
 * Errors nobody caught: a rejected promise nobody handles, or an exception thrown in a timer or an
 * event callback. Bun (like Node) ends the process on either at once, with exit code 1 and no drain:
 * under `derrick start` that takes the edge and every actor down with requests and messages in hand.
 * A serving derrick process instead logs the error (level fatal, with its stack) and stops
 * gracefully, the same drain as on SIGTERM, then exits non-zero so its supervisor restarts it. It
 * never carries on as if nothing happened: after such an error its state is unknown.
 */
import type { Logger } from "./logger.ts";

export type UncaughtKind = "unhandledRejection" | "uncaughtException";

/**
 * Installs the process's handlers; `onFirst` runs once, at the first error (later ones are logged
 * too). Returns the uninstall.
 */
export function onUncaughtError(log: Logger, onFirst: (error: unknown, kind: UncaughtKind) => void): () => void {
  let seen = false;
  const handler = (kind: UncaughtKind) => (error: unknown) => {
    const fields = error instanceof Error ? { err: error, kind } : { reason: String(error), kind };
    log.fatal(
      fields,
      seen ? `${kind} while stopping` : `${kind}: a background task failed and nothing caught it; stopping (drain), then exiting with 1`,
    );
    if (seen) return;
    seen = true;
    onFirst(error, kind);
  };
  const onRejection = handler("unhandledRejection");
  const onException = handler("uncaughtException");
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return () => {
    process.off("unhandledRejection", onRejection);
    process.off("uncaughtException", onException);
  };
}
