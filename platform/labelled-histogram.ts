/**
 * A Prometheus histogram (and its `_total` counter twin) for series observed on every request: prom-client
 * re-hashes the label set on every observation (docs/edge.md#the-transports-own-paths). Here a series is found through one map per
 * label, with nothing built per observation, and an observation is a bucket search and three additions.
 * prom-client still renders it.
 */
import type { Metric } from "prom-client";

type Series = { labels: Record<string, string>; buckets: Float64Array; sum: number; count: number };

type MetricValue = { value: number; labels: Record<string, string | number>; metricName?: string };

type Label = string | number;

/** A histogram (and optionally its `_total` counter twin) keyed by a fixed list of label names. */
export class LabelledHistogram {
  private readonly series: Series[] = [];
  /** Label values, one level per label name, down to the series: a lookup with no key to build. */
  private readonly tree = new Map<Label, unknown>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    private readonly bounds: readonly number[],
  ) {
    if (labelNames.length < 1 || labelNames.length > 3) throw new Error("LabelledHistogram takes one to three label names");
  }

  /** Counts one observation in the series of these label values (in labelNames order). */
  observe(value: number, a: Label, b: Label = "", c: Label = ""): void {
    const series = this.seriesOf(a, b, c);
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        series.buckets[i]! += 1;
        break;
      }
    }
    series.sum += value;
    series.count += 1;
  }

  private seriesOf(a: Label, b: Label, c: Label): Series {
    const depth = this.labelNames.length;
    let node = this.tree;
    if (depth > 1) node = this.child(node, a);
    if (depth > 2) node = this.child(node, b);
    const last = depth === 1 ? a : depth === 2 ? b : c;
    let series = node.get(last) as Series | undefined;
    if (!series) {
      const values = [a, b, c];
      const labels = Object.fromEntries(this.labelNames.map((n, i) => [n, String(values[i])]));
      series = { labels, buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 };
      node.set(last, series);
      this.series.push(series);
    }
    return series;
  }

  private child(node: Map<Label, unknown>, key: Label): Map<Label, unknown> {
    let next = node.get(key) as Map<Label, unknown> | undefined;
    if (!next) node.set(key, (next = new Map()));
    return next;
  }

  /** prom-client's registry reads a metric through `get()`: cumulative buckets, +Inf, sum, count. */
  histogram(): Metric {
    return this.asMetric("histogram", () => {
      const values: MetricValue[] = [];
      for (const s of this.series) {
        let cumulative = 0;
        this.bounds.forEach((bound, i) => {
          cumulative += s.buckets[i]!;
          values.push({ value: cumulative, labels: { ...s.labels, le: bound }, metricName: `${this.name}_bucket` });
        });
        values.push({ value: s.count, labels: { ...s.labels, le: "+Inf" }, metricName: `${this.name}_bucket` });
        values.push({ value: s.sum, labels: s.labels, metricName: `${this.name}_sum` });
        values.push({ value: s.count, labels: s.labels, metricName: `${this.name}_count` });
      }
      return values;
    });
  }

  /** The observation count of every series as a counter named `name`. */
  counter(name: string, help: string): Metric {
    return this.asMetric("counter", () => this.series.map((s) => ({ value: s.count, labels: s.labels })), name, help);
  }

  private asMetric(type: "histogram" | "counter", values: () => MetricValue[], name = this.name, help = this.help): Metric {
    const metric = {
      name,
      help,
      type,
      aggregator: "sum",
      // The registry may rename the metric (OpenMetrics counters): report the name it holds now.
      get: async () => ({ name: metric.name, help, type, aggregator: "sum", values: values() }),
      reset: () => {
        this.series.length = 0;
        this.tree.clear();
      },
    };
    // Read by the registry through get() alone: the shape of its own metrics, without their per-observation work.
    return metric as unknown as Metric;
  }
}
