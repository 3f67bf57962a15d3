/** Prometheus metrics of one edge (its own registry, so several edges can live in one test process). */
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export type EdgeMetrics = {
  registry: Registry;
  observeHttp(route: string, method: string, status: number, seconds: number): void;
  observeNats(subject: string, seconds: number, outcome: string): void;
};

export function createMetrics(withProcessMetrics = true): EdgeMetrics {
  const registry = new Registry();
  if (withProcessMetrics) collectDefaultMetrics({ register: registry, prefix: "derrick_" });
  const requests = new Counter({ name: "derrick_http_requests_total", help: "HTTP requests by route, method and status", labelNames: ["route", "method", "status"], registers: [registry] });
  const latency = new Histogram({
    name: "derrick_http_request_duration_seconds",
    help: "HTTP request latency by route, method and status",
    labelNames: ["route", "method", "status"],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const nats = new Histogram({
    name: "derrick_nats_request_duration_seconds",
    help: "NATS request/reply latency from the edge, by subject and outcome",
    labelNames: ["subject", "outcome"],
    buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [registry],
  });
  // Labelled children are cached: resolving labels hashes them on every call otherwise.
  const httpChildren = new Map<string, { count: ReturnType<typeof requests.labels>; time: ReturnType<typeof latency.labels> }>();
  const natsChildren = new Map<string, ReturnType<typeof nats.labels>>();
  return {
    registry,
    observeHttp(route, method, status, seconds) {
      const key = `${method} ${status} ${route}`;
      let child = httpChildren.get(key);
      if (!child) {
        const labels = { route, method, status: String(status) };
        child = { count: requests.labels(labels), time: latency.labels(labels) };
        httpChildren.set(key, child);
      }
      child.count.inc();
      child.time.observe(seconds);
    },
    observeNats(subject, seconds, outcome) {
      const key = `${outcome} ${subject}`;
      let child = natsChildren.get(key);
      if (!child) natsChildren.set(key, (child = nats.labels({ subject, outcome })));
      child.observe(seconds);
    },
  };
}
