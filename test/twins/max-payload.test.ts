import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";

const path = (twin: string) => `/api/twin-properties/v1/acme/prod/${twin}/twin-properties`;

// An external nats-server with its default max_payload (1 MB), not the embedded server's 8 MB.
describe("twin properties on a server with max_payload 1 MB", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  let nc: NatsConnection;
  beforeAll(async () => {
    nats = await startTestNats({ extraConfig: "max_payload: 1MB" });
    derrick = await startDerrick(nats, { actors: ["identity", "twins"] });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const put = (twin: string, twins: Array<{ name: string; value: string }>) =>
    derrick.call(path(twin), { method: "PUT", body: JSON.stringify({ group: "big", twins }), as: "admin", partition: null });

  it("twins - a PUT within the documented limits whose commit record would not fit in one NATS message is 413 problem+json naming the body, and nothing is written", async () => {
    expect(nc.info?.max_payload).toBe(1024 * 1024);
    // 1000 names of 128 bytes and 820 KB of values: each limit kept, the record (names twice) over 1 MB.
    const twins = Array.from({ length: 1000 }, (_, i) => ({ name: `n${i}`.padEnd(128, "x"), value: "v".repeat(820) }));
    const res = await put("dev-big", twins);
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    const problem = (await res.json()) as { status: number; detail: string };
    expect(problem.status).toBe(413);
    expect(problem.detail).toMatch(/^\/body: .*max_payload/);
    const state = (await (await derrick.call(`${path("dev-big")}?group=big`, { as: "admin", partition: null })).json()) as {
      desired: object;
    };
    expect(state.desired).toEqual({});
    expect((await put("dev-big", twins.slice(0, 500))).status).toBe(200);
  });
});
