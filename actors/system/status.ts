/**
 * The fleet's status for operators (`derrick status`, `GET /v1/system/status`): every actor process from
 * `$SRV.STATS`, every stream and durable consumer from JetStream, and what follows from them (replica
 * lag, dead letters, queued content tasks). `FleetWatch` remembers processes that stopped answering.
 */
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstreamManager, type ConsumerInfo, type StreamInfo } from "@nats-io/jetstream";
import { Svcm, type ServiceStats } from "@nats-io/services";
import { Gauge, type Registry } from "prom-client";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import type { ActorProcess, FleetStatus, StreamStatus } from "../../subjects/system.ts";
import { SERVICE_PREFIX } from "../../subjects/index.ts";
import { STREAMS as NOTIFICATION_STREAMS } from "../notifications/journal.ts";
import { TASK_STREAM } from "../projects/store.ts";

/** A process that stopped answering is shown as gone this long, then forgotten. */
export const GONE_KEPT_MS = 15 * 60_000;
/** `$SRV.STATS` answers are gathered until none came for this long (or for at most STATS_WAIT_MS). */
const STATS_STALL_MS = 300;
const STATS_WAIT_MS = 3_000;

type Seen = { actor: string; process: ActorProcess };

/** One `$SRV.STATS` answer as an actor process (pure). */
export function processOf(stats: ServiceStats, now: Date): Seen {
  const endpoints = stats.endpoints ?? [];
  const requests = endpoints.reduce((n, e) => n + e.num_requests, 0);
  const nanos = endpoints.reduce((n, e) => n + e.processing_time, 0);
  const { inflight = 0, queued = 0, ...work } = (endpoints[0]?.data ?? {}) as Record<string, unknown>;
  const pid = Number(stats.metadata?.pid);
  return {
    actor: stats.metadata?.actor ?? stats.name.replace(SERVICE_PREFIX, ""),
    process: {
      id: stats.id,
      state: "up",
      ...(stats.metadata?.host ? { host: stats.metadata.host } : {}),
      ...(Number.isInteger(pid) ? { pid } : {}),
      version: stats.version,
      startedAt: stats.started,
      uptimeSeconds: Math.max(0, (now.getTime() - Date.parse(stats.started)) / 1000),
      requests,
      errors: endpoints.reduce((n, e) => n + e.num_errors, 0),
      averageProcessingMs: requests > 0 ? nanos / requests / 1e6 : 0,
      inflight: Number(inflight) || 0,
      queued: Number(queued) || 0,
      lastSeenAt: now.toISOString(),
      ...(Object.keys(work).length > 0 ? { work } : {}),
    },
  };
}

/** A stream with its durable consumers (pure). */
export function streamOf(info: StreamInfo, consumers: ConsumerInfo[]): StreamStatus {
  return {
    name: info.config.name,
    messages: info.state.messages,
    bytes: info.state.bytes,
    lastSeq: info.state.last_seq,
    consumers: consumers
      .filter((c) => c.config.durable_name)
      .map((c) => ({
        name: c.name,
        pending: c.num_pending,
        ackPending: c.num_ack_pending,
        redelivered: c.num_redelivered,
        ackFloor: c.ack_floor.stream_seq,
      })),
  };
}

/**
 * Keeps the processes seen, so one that stops answering shows as gone (with its last numbers) for
 * GONE_KEPT_MS instead of vanishing from the list. Pure over its inputs: `observe` takes what answered now.
 */
export class FleetWatch {
  private readonly seen = new Map<string, Seen>();

  observe(answered: Seen[], now: Date): FleetStatus["actors"] {
    const present = new Set(answered.map((s) => s.process.id));
    for (const s of answered) this.seen.set(s.process.id, s);
    for (const [id, s] of this.seen) {
      if (present.has(id)) continue;
      if (now.getTime() - Date.parse(s.process.lastSeenAt) > GONE_KEPT_MS) this.seen.delete(id);
      else s.process.state = "gone";
    }
    const byActor = new Map<string, ActorProcess[]>();
    for (const { actor, process } of this.seen.values()) byActor.set(actor, [...(byActor.get(actor) ?? []), process]);
    return [...byActor.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, processes]) => ({ name, processes: processes.sort((a, b) => a.startedAt.localeCompare(b.startedAt)) }));
  }

  /** Gathers the fleet's status now. */
  async gather(nc: NatsConnection): Promise<FleetStatus> {
    const now = new Date();
    const answered: Seen[] = [];
    const client = new Svcm(nc).client({ strategy: "stall", stall: STATS_STALL_MS, maxWait: STATS_WAIT_MS });
    for await (const stats of await client.stats()) {
      if (stats.name.startsWith(SERVICE_PREFIX)) answered.push(processOf(stats, now));
    }
    const jsm = await jetstreamManager(nc);
    const streams: StreamStatus[] = [];
    const buckets = { count: 0, bytes: 0 };
    for await (const info of jsm.streams.list()) {
      if (info.config.name.startsWith("KV_")) {
        buckets.count++;
        buckets.bytes += info.state.bytes;
        continue;
      }
      const consumers: ConsumerInfo[] = [];
      for await (const consumer of jsm.consumers.list(info.config.name)) consumers.push(consumer);
      streams.push(streamOf(info, consumers));
    }
    streams.sort((a, b) => a.name.localeCompare(b.name));
    const actors = this.observe(answered, now);
    return summarize(now, actors, streams, buckets);
  }
}

/** What follows from processes and streams (pure): replica lag, dead letters, paused subscriptions, queued tasks. */
export function summarize(now: Date, actors: FleetStatus["actors"], streams: StreamStatus[], buckets: FleetStatus["buckets"]): FleetStatus {
  const stream = (name: string) => streams.find((s) => s.name === name);
  const processes = (name: string) => actors.find((a) => a.name === name)?.processes.filter((p) => p.state === "up") ?? [];
  const recordsLast = stream(RECORDS_STREAM)?.lastSeq ?? 0;
  const replicas = processes("search").map((p) => {
    const appliedSeq = Number(p.work?.appliedSeq) || 0;
    return { id: p.id, appliedSeq, lagRecords: Math.max(0, recordsLast - appliedSeq) };
  });
  const paused = processes("notifications").map((p) => Number(p.work?.pausedSubscriptions) || 0);
  return {
    time: now.toISOString(),
    actors,
    streams,
    buckets,
    search: { replicas },
    notifications: { deadLetters: stream(NOTIFICATION_STREAMS.dead)?.messages ?? 0, pausedSubscriptions: Math.max(0, ...paused) },
    content: contentTasks(stream(TASK_STREAM)),
  };
}

/** A work-queue stream holds each task until it is acked: those a worker holds (ack pending) run, the rest wait. */
function contentTasks(stream: StreamStatus | undefined): FleetStatus["content"] {
  const running = (stream?.consumers ?? []).reduce((sum, c) => sum + c.ackPending, 0);
  return { tasksQueued: Math.max(0, (stream?.messages ?? 0) - running), tasksRunning: running };
}

/**
 * The fleet's gauges for Prometheus, read from one gather per scrape (shared by the gauges of that scrape):
 * consumers' pending, dead letters, paused subscriptions, replica lag, queued content tasks.
 */
export function registerFleetGauges(registry: Registry, gather: () => Promise<FleetStatus>): void {
  let last: { at: number; fleet: Promise<FleetStatus> } | undefined;
  const current = () => {
    if (!last || Date.now() - last.at > 1_000) last = { at: Date.now(), fleet: gather() };
    return last.fleet;
  };
  const gauge = (name: string, help: string, labelNames: string[], set: (gauge: Gauge, fleet: FleetStatus) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        set(this, await current());
      },
    });
  gauge("derrick_consumer_pending", "Messages a durable consumer has not been delivered yet", ["stream", "consumer"], (g, f) => {
    for (const s of f.streams) for (const c of s.consumers) g.set({ stream: s.name, consumer: c.name }, c.pending);
  });
  gauge("derrick_consumer_ack_pending", "Messages a durable consumer delivered and awaits acks for", ["stream", "consumer"], (g, f) => {
    for (const s of f.streams) for (const c of s.consumers) g.set({ stream: s.name, consumer: c.name }, c.ackPending);
  });
  gauge("derrick_dead_letters", "Deliveries given up and kept in DEAD (30 days)", [], (g, f) => g.set(f.notifications.deadLetters));
  gauge("derrick_subscriptions_paused", "Subscriptions whose deliveries are paused", [], (g, f) =>
    g.set(f.notifications.pausedSubscriptions),
  );
  gauge("derrick_search_replica_lag_records", "Records on RECORDS a search replica has not applied", ["replica"], (g, f) => {
    for (const r of f.search.replicas) g.set({ replica: r.id }, r.lagRecords);
  });
  gauge("derrick_content_tasks", "Content tasks by state", ["state"], (g, f) => {
    g.set({ state: "queued" }, f.content.tasksQueued);
    g.set({ state: "running" }, f.content.tasksRunning);
  });
  gauge("derrick_actor_processes", "Actor processes answering (up) or gone silent (gone) by actor", ["actor", "state"], (g, f) => {
    for (const a of f.actors)
      for (const state of ["up", "gone"] as const) g.set({ actor: a.name, state }, a.processes.filter((p) => p.state === state).length);
  });
}
