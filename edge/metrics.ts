/**
 * Prometheus metrics of one edge (its own registry, so several edges can live in one test process).
 * The per-request series are LabelledHistograms (platform/labelled-histogram.ts: no per-observation garbage).
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { LabelledHistogram } from "../platform/labelled-histogram.ts";

export type EdgeMetrics = {
  registry: Registry;
  observeHttp(route: string, method: string, status: number, seconds: number): void;
  observeNats(subject: string, seconds: number, outcome: string): void;
  /** A reply body the edge answered: `named` when the actor named a body the Bus kept, else sent over NATS. */
  observeReplyBody(bytes: number, named: boolean): void;
};

const HTTP_BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const NATS_BOUNDS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

export function createMetrics(withProcessMetrics = true): EdgeMetrics {
  const registry = new Registry();
  if (withProcessMetrics) {
    collectDefaultMetrics({ register: registry, prefix: "derrick_" });
    // prom-client's version series reads process.version, which Bun sets to the Node.js version it mimics.
    registry.removeSingleMetric("derrick_nodejs_version_info");
  }
  const runtime = new Gauge({
    name: "derrick_runtime_info",
    help: "The JavaScript runtime this process runs on (1)",
    labelNames: ["runtime", "version"],
    registers: [registry],
  });
  const bun = (globalThis as { Bun?: { version: string } }).Bun;
  runtime.set({ runtime: bun ? "bun" : "node", version: bun ? bun.version : process.versions.node }, 1);
  const http = new LabelledHistogram(
    "derrick_http_request_duration_seconds",
    "HTTP request latency by route, method and status",
    ["route", "method", "status"],
    HTTP_BOUNDS,
  );
  const nats = new LabelledHistogram(
    "derrick_nats_request_duration_seconds",
    "NATS request/reply latency from the edge, by subject and outcome",
    ["subject", "outcome"],
    NATS_BOUNDS,
  );
  registry.registerMetric(http.counter("derrick_http_requests_total", "HTTP requests by route, method and status"));
  registry.registerMetric(http.histogram());
  registry.registerMetric(nats.histogram());
  // Plain sums, written into the counter at scrape time: prom-client hashes the labels on every inc().
  const bodyBytes = { named: 0, sent: 0 };
  new Counter({
    name: "derrick_nats_reply_body_bytes_total",
    help: "Reply body bytes the edge answered, by whether they crossed NATS (sent) or the actor named a body kept (named)",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ outcome: "named" }, bodyBytes.named);
      this.inc({ outcome: "sent" }, bodyBytes.sent);
    },
  });
  return {
    registry,
    observeHttp(route, method, status, seconds) {
      http.observe(seconds, route, method, status);
    },
    observeNats(subject, seconds, outcome) {
      nats.observe(seconds, subject, outcome);
    },
    observeReplyBody(bytes, named) {
      if (named) bodyBytes.named += bytes;
      else bodyBytes.sent += bytes;
    },
  };
}
