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

/** A dotted path's value in a search result (`data.FacilityName`), as table text: scalars as they are, the rest as short JSON. */
export function fieldValue(record: Record<string, unknown>, path: string): string {
  let value: unknown = record;
  for (const key of path.split("."))
    value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
  if (value === undefined || value === null) return "—";
  if (typeof value !== "object") return String(value);
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

const SHOWN_DATA_FIELDS = 4;

/**
 * The result table's columns: the returned fields asked for (id first when results carry it), else id,
 * kind and the first few scalar `data.*` fields the results hold.
 */
export function resultColumns(results: ReadonlyArray<Record<string, unknown>>, returnedFields?: readonly string[]): string[] {
  const hasId = results.some((r) => r.id !== undefined);
  if (returnedFields?.length) return [...(hasId ? ["id"] : []), ...returnedFields.filter((f) => f !== "id")];
  const data = new Set<string>();
  for (const result of results) {
    const fields = result.data !== null && typeof result.data === "object" ? Object.entries(result.data) : [];
    for (const [key, value] of fields)
      if (value !== null && typeof value !== "object" && data.size < SHOWN_DATA_FIELDS) data.add(`data.${key}`);
  }
  return ["id", "kind", ...data];
}
