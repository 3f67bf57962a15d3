import { describe, expect, it } from "vitest";
import { createMetrics } from "./metrics.ts";

const sample = (text: string, series: string) =>
  Number(
    text
      .split("\n")
      .find((line) => line.startsWith(`${series} `))
      ?.split(" ")
      .at(-1),
  );

describe("edge metrics", () => {
  it("metrics - buckets are cumulative, +Inf and _count equal the observations, the counter matches", async () => {
    const m = createMetrics(false);
    for (const s of [0.0004, 0.003, 0.003, 0.2, 20]) m.observeHttp("/v1/x", "GET", 200, s);
    m.observeHttp("/v1/x", "GET", 404, 0.001);
    const text = await m.registry.metrics();
    const labels = 'route="/v1/x",method="GET",status="200"';
    expect(sample(text, `derrick_http_request_duration_seconds_bucket{${labels},le="0.0005"}`)).toBe(1);
    expect(sample(text, `derrick_http_request_duration_seconds_bucket{${labels},le="0.005"}`)).toBe(3);
    expect(sample(text, `derrick_http_request_duration_seconds_bucket{${labels},le="10"}`)).toBe(4);
    expect(sample(text, `derrick_http_request_duration_seconds_bucket{${labels},le="+Inf"}`)).toBe(5);
    expect(sample(text, `derrick_http_request_duration_seconds_count{${labels}}`)).toBe(5);
    expect(sample(text, `derrick_http_request_duration_seconds_sum{${labels}}`)).toBeCloseTo(20.2064, 6);
    expect(sample(text, `derrick_http_requests_total{${labels}}`)).toBe(5);
    expect(sample(text, 'derrick_http_requests_total{route="/v1/x",method="GET",status="404"}')).toBe(1);
  });

  it("metrics - reply body bytes are summed by whether they crossed NATS, both outcomes exported from 0", async () => {
    const m = createMetrics(false);
    expect(sample(await m.registry.metrics(), 'derrick_nats_reply_body_bytes_total{outcome="named"}')).toBe(0);
    m.observeReplyBody(2000, true);
    m.observeReplyBody(2000, true);
    m.observeReplyBody(700, false);
    const text = await m.registry.metrics();
    expect(sample(text, 'derrick_nats_reply_body_bytes_total{outcome="named"}')).toBe(4000);
    expect(sample(text, 'derrick_nats_reply_body_bytes_total{outcome="sent"}')).toBe(700);
    // A second scrape reads the same sums, not twice them.
    expect(sample(await m.registry.metrics(), 'derrick_nats_reply_body_bytes_total{outcome="named"}')).toBe(4000);
  });

  it("metrics - the runtime series names Bun and its version, and no Node.js version series claims otherwise", async () => {
    const text = await createMetrics(true).registry.metrics();
    expect(sample(text, `derrick_runtime_info{runtime="bun",version="${Bun.version}"}`)).toBe(1);
    expect(text).not.toContain("derrick_nodejs_version_info");
    expect(text).toContain("derrick_process_cpu_seconds_total");
  });
});
