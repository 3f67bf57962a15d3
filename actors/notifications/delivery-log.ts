/**
 * The delivery log as `GET …/deliveries` lists it, built from the attempt records in ATTEMPTS: one
 * entry per attempt made (a failed one stays `failed` when another follows), plus a `pending` entry
 * for the next attempt of an event whose retry is booked and not made yet.
 */
import type { DeliveryAttempt } from "../../subjects/notifications.ts";
import type { AttemptRecord } from "./journal.ts";

/**
 * Newest first, at most `limit` entries. `records` is in the order stored (oldest first). Older records may store an
 * ended attempt as `pending` (docs/notifications.md#retries-dead-letters-pausing): every stored record is an attempt
 * that ended, so it is listed `failed`.
 */
export function deliveryLog(records: readonly AttemptRecord[], limit: number): DeliveryAttempt[] {
  const made = records.map(
    ({ event_seq: _s, ...attempt }): DeliveryAttempt => (attempt.state === "pending" ? { ...attempt, state: "failed" } : attempt),
  );
  // Per event, the index of its highest attempt (the later record on a tie: a crash can repeat one).
  const last = new Map<string, number>();
  made.forEach((entry, i) => {
    const seen = last.get(entry.event_id);
    if (seen === undefined || entry.attempt >= made[seen]!.attempt) last.set(entry.event_id, i);
  });
  const listed: DeliveryAttempt[] = [];
  for (let i = made.length - 1; i >= 0 && listed.length < limit; i--) {
    const entry = made[i]!;
    if (last.get(entry.event_id) === i && entry.state === "failed" && entry.next_attempt_at) {
      listed.push({ event_id: entry.event_id, attempt: entry.attempt + 1, state: "pending", next_attempt_at: entry.next_attempt_at });
      if (listed.length === limit) break;
    }
    listed.push(entry);
  }
  return listed;
}
