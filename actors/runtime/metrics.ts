/**
 * The Prometheus series actors add to their process's registry (the edge's `/metrics`, or
 * DERRICK_METRICS_PORT in an actor-only process). Values that live elsewhere (a limiter's load, a
 * deliverer's counters) are read at scrape time, so the hot paths pay nothing.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

type Load = { running: number; waiting: number };
type DeliveryCounts = { succeeded: number; failed: number; dead: number };

export type ActorMetrics = {
  /** Registers an actor's limiter: derrick_actor_inflight/queued{actor} read it at each scrape. */
  actorLoad(actor: string, load: () => Load): void;
  /** Registers a deliverer's outcome counters: derrick_deliveries_total{outcome}. */
  deliveries(counts: () => DeliveryCounts): void;
  /** One delivery attempt's HTTP call, in seconds. */
  deliveryDuration: Histogram;
  /** Reporting aggregation reads by where the answer came from: `hit` (cached), `miss` (computed). */
  reportingCache: Counter<"result">;
};

const byRegistry = new WeakMap<Registry, ActorMetrics>();

/** The actor series of `registry`, made once per registry (one process may run many actors). */
export function actorMetrics(registry: Registry): ActorMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  const loads = new Map<string, () => Load>();
  const gauge = (name: string, help: string, pick: (load: Load) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ["actor"],
      registers: [registry],
      collect() {
        for (const [actor, load] of loads) this.set({ actor }, pick(load()));
      },
    });
  gauge("derrick_actor_inflight", "Requests an actor is handling now", (l) => l.running);
  gauge("derrick_actor_queued", "Requests waiting for one of an actor's slots (DERRICK_ACTOR_CONCURRENCY)", (l) => l.waiting);
  const deliverers: Array<() => DeliveryCounts> = [];
  const reported: DeliveryCounts = { succeeded: 0, failed: 0, dead: 0 };
  new Counter({
    name: "derrick_deliveries_total",
    help: "Webhook delivery attempts by outcome (succeeded, failed; dead: deliveries given up and dead-lettered)",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      for (const outcome of ["succeeded", "failed", "dead"] as const) {
        const total = deliverers.reduce((sum, counts) => sum + counts()[outcome], 0);
        if (total > reported[outcome]) this.inc({ outcome }, total - reported[outcome]);
        else this.inc({ outcome }, 0);
        reported[outcome] = Math.max(reported[outcome], total);
      }
    },
  });
  const metrics: ActorMetrics = {
    actorLoad: (actor, load) => void loads.set(actor, load),
    deliveries: (counts) => void deliverers.push(counts),
    deliveryDuration: new Histogram({
      name: "derrick_delivery_duration_seconds",
      help: "Duration of each webhook delivery attempt's HTTP call",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    reportingCache: new Counter({
      name: "derrick_reporting_cache_total",
      help: "Reporting aggregation reads by result: hit (answered from the cache, in memory or KV) or miss (computed, or a task accepted)",
      labelNames: ["result"],
      registers: [registry],
    }),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
