/** Pure functions of the console: what its views derive from the API's answers (tested in test/console/). */
import type { DeliveryAttempt } from "../../subjects/notifications.ts";
import type { TwinGetReply, TwinValue } from "../../subjects/twins.ts";

/**
 * The dead letters still open, from a subscription's attempts (newest first): an event whose newest
 * `dead` attempt has no `succeeded` attempt after it. A failed replay leaves the letter open, as DEAD does.
 */
export function openDeadLetters(attempts: readonly DeliveryAttempt[]): DeliveryAttempt[] {
  const succeeded = new Set<string>();
  const seen = new Set<string>();
  const open: DeliveryAttempt[] = [];
  for (const attempt of attempts) {
    if (attempt.state === "succeeded") succeeded.add(attempt.event_id);
    if (attempt.state !== "dead" || succeeded.has(attempt.event_id) || seen.has(attempt.event_id)) continue;
    seen.add(attempt.event_id);
    open.push(attempt);
  }
  return open;
}

/** One property of a twin's group: its desired and reported values side by side, by name. */
export type TwinRow = { name: string; desired?: TwinValue; reported?: TwinValue };
export function twinRows(twin: TwinGetReply, group: string): TwinRow[] {
  const desired = twin.desired[group] ?? {};
  const reported = twin.reported[group] ?? {};
  const names = [...new Set([...Object.keys(desired), ...Object.keys(reported)])].sort();
  return names.map((name) => ({ name, desired: desired[name], reported: reported[name] }));
}
