/** `derrick status` as text: one table of actor processes, one of streams and consumers, then the totals that need watching. */
import type { FleetStatus } from "../subjects/system.ts";

/** Rows as aligned columns (the first row is the header). */
export function columns(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

const duration = (seconds: number) =>
  seconds < 120 ? `${Math.round(seconds)}s` : seconds < 7200 ? `${Math.round(seconds / 60)}m` : `${(seconds / 3600).toFixed(1)}h`;

export function statusTable(fleet: FleetStatus): string {
  const processes = [["ACTOR", "STATE", "HOST", "PID", "VERSION", "UPTIME", "REQUESTS", "ERRORS", "AVG MS", "INFLIGHT", "QUEUED"]];
  for (const actor of fleet.actors)
    for (const p of actor.processes)
      processes.push([
        actor.name,
        p.state,
        p.host ?? "-",
        p.pid === undefined ? "-" : String(p.pid),
        p.version,
        duration(p.uptimeSeconds),
        String(p.requests),
        String(p.errors),
        p.averageProcessingMs.toFixed(2),
        String(p.inflight),
        String(p.queued),
      ]);
  const streams = [["STREAM", "CONSUMER", "MESSAGES", "PENDING", "ACK PENDING", "REDELIVERED", "ACK FLOOR"]];
  for (const s of fleet.streams) {
    streams.push([s.name, "-", String(s.messages), "-", "-", "-", "-"]);
    for (const c of s.consumers)
      streams.push(["", c.name, "", String(c.pending), String(c.ackPending), String(c.redelivered), String(c.ackFloor)]);
  }
  const lag = fleet.search.replicas.map((r) => `${r.id.slice(-6)}:${r.lagRecords}`).join(" ") || "no replica";
  return [
    `derrick fleet at ${fleet.time}`,
    "",
    columns(processes),
    "",
    columns(streams),
    "",
    `KV buckets: ${fleet.buckets.count} (${(fleet.buckets.bytes / 1024 / 1024).toFixed(1)} MiB)`,
    `search replica lag (records behind RECORDS): ${lag}`,
    `dead letters: ${fleet.notifications.deadLetters}   paused subscriptions: ${fleet.notifications.pausedSubscriptions}   content tasks queued: ${fleet.content.tasksQueued}   running: ${fleet.content.tasksRunning}`,
  ].join("\n");
}
