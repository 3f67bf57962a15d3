/** Pure functions of the console: what its views derive from the API's answers (tested in test/console/). */
import type { DeliveryAttempt } from "../../subjects/notifications.ts";
import type { Task } from "../../subjects/projects.ts";
import type { FleetStatus } from "../../subjects/system.ts";
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

/** The parts of a prospect aggregation the reporting view draws (docs/reporting.md; the reply schema is an open record). */
export type ProductResources = {
  unit: string;
  successCase: { p90: number; p50: number; p10: number; mean: number };
  riskedMean: number;
  riskedExceedance?: Array<{ volume: number; probability: number }>;
};
export type ProspectAggregation = {
  prospectAnalysisId: string;
  prospect: { id: string; name?: string };
  status?: string;
  dependency?: { model: string };
  chanceOfSuccess: { pgAtLeastOne: number; pgAll?: number; pCommercial?: number; mefs?: { value: number; unit: string } };
  resources: { primaryProduct: string; products: Record<string, ProductResources> };
  segments: Array<{
    segmentAnalysisId: string;
    name: string;
    pg: number;
    pgConditionalOnCommon?: number;
    riskedMean?: number;
    unit?: string;
  }>;
};

/**
 * The expectation curve of one product: P(volume ≥ v), risked (the API's riskedExceedance, which
 * starts at the chance of success) and in the success case (the same divided by that chance).
 */
export function expectationCurve(product: ProductResources, pg: number) {
  const points = [...(product.riskedExceedance ?? [])].sort((a, b) => a.volume - b.volume);
  return {
    volumes: points.map((p) => p.volume),
    risked: points.map((p) => p.probability),
    success: points.map((p) => (pg > 0 ? Math.min(1, p.probability / pg) : 0)),
  };
}

/** P90, P50 and P10 of the success case: the volumes exceeded with 90, 50 and 10 % probability. */
export const percentileMarks = (product: ProductResources) => [
  { label: "P90", volume: product.successCase.p90 },
  { label: "P50", volume: product.successCase.p50 },
  { label: "P10", volume: product.successCase.p10 },
];

export type OutcomeNode = {
  nodeId: string;
  parentId: string | null;
  kind: string;
  name?: string;
  segmentStates?: Record<string, boolean>;
  branchProbability?: number;
  jointProbability: number;
  outcomes?: number;
  volume?: { mean: number; unit: string };
};

/** A node's kind as a reader says it. */
export const outcomeKindLabel = (kind: string) =>
  ({ commonSuccess: "common success", commonFailure: "common failure", otherOutcomes: "other outcomes" })[kind] ?? kind;

/** The tree's terminal nodes (outcomes, folded outcomes, common failures) with the path of branch names above each. */
export function outcomeRows(nodes: readonly OutcomeNode[]) {
  const byId = new Map(nodes.map((n) => [n.nodeId, n]));
  const parents = new Set(nodes.map((n) => n.parentId));
  const label = (n: OutcomeNode) => n.name ?? outcomeKindLabel(n.kind);
  return nodes
    .filter((n) => !parents.has(n.nodeId) && n.kind !== "root")
    .map((node) => {
      const path: string[] = [];
      for (let at = byId.get(node.parentId ?? ""); at && at.kind !== "root"; at = byId.get(at.parentId ?? "")) path.unshift(label(at));
      return { node, path };
    });
}

/** A content's expiry as the tasks table shows it: a countdown while it lasts, then when it went. */
export function expiryText(expiresAt: string | undefined, now: number): string {
  if (!expiresAt) return "—";
  const left = Math.ceil((Date.parse(expiresAt) - now) / 1000);
  const at = expiresAt.slice(11, 19);
  return left > 0 ? `in ${left} s (${at}Z)` : `expired at ${at}Z`;
}

/**
 * The tasks table after reading `fresh` ones (a page of the list, or single tasks): each replaces its older copy, and
 * the table stays newest first.
 */
export function mergeTasks(known: readonly Task[], fresh: readonly Task[]): Task[] {
  const ids = new Set(fresh.map((task) => task.taskId));
  // A stable sort: tasks created in the same millisecond keep the order the API gave them.
  return [...fresh, ...known.filter((task) => !ids.has(task.taskId))].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
}

/** One look at the fleet: when (seconds) and each actor's requests so far, summed over its processes. */
export type LoadSample = { time: number; totals: Record<string, number> };

export const loadSample = (fleet: FleetStatus): LoadSample => ({
  time: Date.parse(fleet.time) / 1000,
  totals: Object.fromEntries(fleet.actors.map((a) => [a.name, a.processes.reduce((sum, p) => sum + p.requests, 0)])),
});

/**
 * Requests per second of each actor between successive samples. A process that restarts or is gone
 * lowers its actor's total; that interval counts as 0, not as negative load. Actors idle throughout
 * are left out, the busiest first, at most `most` of them.
 */
export function requestRates(samples: readonly LoadSample[], most = 6) {
  const times = samples.slice(1).map((s) => s.time);
  const names = [...new Set(samples.flatMap((s) => Object.keys(s.totals)))];
  const series = names.map((name) => ({
    name,
    rates: samples.slice(1).map((s, i) => {
      const before = samples[i]!;
      const seconds = s.time - before.time;
      const delta = (s.totals[name] ?? 0) - (before.totals[name] ?? 0);
      return seconds > 0 && delta > 0 ? delta / seconds : 0;
    }),
  }));
  const busy = series
    .map((s) => ({ ...s, sum: s.rates.reduce((a, b) => a + b, 0) }))
    .filter((s) => s.sum > 0)
    .sort((a, b) => b.sum - a.sum)
    .slice(0, most);
  return { times, series: busy.map(({ name, rates }) => ({ name, rates })) };
}
