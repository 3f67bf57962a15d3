/**
 * What the edge answers by itself, before any actor is asked: a body of a media type the route does
 * not take (415), a form flooding the parser, an unknown route, a body of the wrong shape, unparseable
 * or too large, and request ids. The Elysia app of edge/app.ts answers through app.handle(), on a
 * connection to a real nats-server where no actor runs: nothing here may need one.
 */
import { describe, expect } from "vitest";
import { natsTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";
import { loadConfig } from "../../config/index.ts";
import { createEdgeApp } from "../../edge/app.ts";
import { createMetrics } from "../../edge/metrics.ts";
import { createLogger } from "../../platform/logger.ts";
import { Bus } from "../../platform/transport/index.ts";

const it = natsTest().extend("edge", { scope: "file" }, async ({ nats, nc, dataDir }) => {
  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_DATA_DIR: dataDir,
    DERRICK_LOG_LEVEL: "silent",
    DERRICK_PARTITIONS: "opendes,other",
  });
  const app = createEdgeApp({ cfg, bus: new Bus(nc, { timeoutMs: 2_000 }), log: createLogger("silent"), metrics: createMetrics(false) });
  /** A request to the edge as a client would send it (a body with its declared length unless it is a stream). */
  return (path: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (typeof init.body === "string" && !headers.has("content-length"))
      headers.set("content-length", String(Buffer.byteLength(init.body)));
    return app.handle(new Request(`http://127.0.0.1${path}`, { ...init, headers }));
  };
});

const form = "application/x-www-form-urlencoded";

describe("the edge on its own", () => {
  it("media types - a form body on a JSON route (what `curl -d` sends by default) is 415 naming the JSON types, not read as JSON", async ({
    edge,
  }) => {
    const echo = (body: string, type: string) => edge("/v1/system/echo", { method: "POST", headers: { "content-type": type }, body });
    const res = await echo('{"a":1}', form);
    expect(res.headers.get("accept")).toContain("application/json");
    const problem = await expectProblem(res, 415);
    expect(problem.detail).toMatch(/application\/json/);
    expect(problem.detail).toMatch(/application\/x-www-form-urlencoded/);
    expect((await echo("plain", "text/plain")).status).toBe(415);
  });

  it("media types - a chunked form with a flood of parameters is refused once it passes the cap (no work per repeat)", async ({ edge }) => {
    const flood = "a&".repeat(20_000);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(flood));
        controller.close();
      },
    });
    // Chunked: read and parsed here. With a length, Elysia's own form parser reads it (linear) and the token endpoint refuses it.
    const res = await edge("/v2/token", {
      method: "POST",
      headers: { "content-type": form },
      body: chunked,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/more than 256 parameters/);
    expect((await edge("/v2/token", { method: "POST", headers: { "content-type": form }, body: flood })).status).toBe(400);
  });

  it("errors - an unknown route is 404 problem+json naming the path", async ({ edge }) => {
    const body = await expectProblem(await edge("/no/such/route"), 404);
    expect(body.instance).toBe("/no/such/route");
  });

  it("errors - a body of the wrong shape is 400 with a JSON pointer, not Elysia's 422", async ({ edge }) => {
    const res = await edge("/v1/system/echo", { method: "POST", headers: { "content-type": "application/json" }, body: "[1,2]" });
    const body = await expectProblem(res, 400);
    expect(body.errors![0]!.pointer).toBe("/body");
  });

  it("errors - unparseable JSON is 400", async ({ edge }) => {
    await expectProblem(
      await edge("/v1/system/echo", { method: "POST", headers: { "content-type": "application/json" }, body: "{oops" }),
      400,
    );
  });

  it("bodies - a body over the limit is 413 problem+json", async ({ edge }) => {
    const res = await edge("/v1/system/echo", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ big: "x".repeat(5000) }),
    });
    await expectProblem(res, 413);
  });

  it("errors - every answer carries a request id, the caller's when it is sane", async ({ edge }) => {
    let res = await edge("/healthz", { headers: { "x-request-id": "req-123" } });
    expect(res.headers.get("x-request-id")).toBe("req-123");
    res = await edge("/healthz", { headers: { "x-request-id": "bad id\twith tab" } });
    expect(res.headers.get("x-request-id")).toMatch(/^[A-Za-z0-9]+$/);
  });
});
