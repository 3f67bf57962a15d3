/** One log line per HTTP request, and none with DERRICK_ACCESS_LOG=off (server errors are always logged). */
import { describe, expect } from "vitest";
import { Writable } from "node:stream";
import pino from "pino";
import { loadConfig } from "../../config/index.ts";
import { boot } from "../../bin/boot.ts";
import { clientToken, eventually, TEST_CLIENTS, type TestNats } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";

type Line = { msg: string; method?: string; route?: string; status?: number; ms?: number; requestId?: string; clientId?: string };

async function edgeWithLog(nats: TestNats, dataDir: string, accessLog: string) {
  const lines: Line[] = [];
  const sink = new Writable({
    write: (chunk, _enc, done) => (
      lines.push(
        ...String(chunk)
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Line),
      ),
      done()
    ),
  });
  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_HTTP_PORT: "0",
    DERRICK_DATA_DIR: dataDir,
    DERRICK_ACCESS_LOG: accessLog,
    DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.admin]),
  });
  const booted = await boot({
    cfg,
    natsUrl: nats.url,
    log: pino({ level: "info" }, sink),
    edge: true,
    actors: ["system", "identity"],
    processMetrics: false,
  });
  return { booted, url: booted.edge!.url, lines };
}

const it = natsTest();

describe("access log", () => {
  it("access log - each request is one info line with method, route, status, duration, request id and client id", async ({
    nats,
    dataDir,
  }) => {
    const { booted, url, lines } = await edgeWithLog(nats, dataDir, "on");
    try {
      const token = await clientToken(url, TEST_CLIENTS.admin);
      const res = await fetch(`${url}/v1/system/whoami`, {
        headers: {
          authorization: `Bearer ${token}`,
          appkey: TEST_CLIENTS.admin.appkey,
          "slb-partition-id": "opendes",
          "x-request-id": "req-42",
        },
      });
      expect(res.status).toBe(200);
      await fetch(`${url}/no/such/route`);
      // Written after the response is sent.
      await eventually(() => lines.filter((l) => l.msg === "request").length >= 3, { what: "three request lines" });
      const requests = lines.filter((l) => l.msg === "request");
      const whoami = requests.find((l) => l.requestId === "req-42");
      expect(whoami).toMatchObject({ method: "GET", route: "/v1/system/whoami", status: 200, clientId: TEST_CLIENTS.admin.client_id });
      expect(typeof whoami!.ms).toBe("number");
      expect(requests.some((l) => l.route === "/v2/token" && l.status === 200)).toBe(true);
      expect(
        requests.some((l) => l.route === "unmatched" && l.status === 404),
        JSON.stringify(requests),
      ).toBe(true);
    } finally {
      await booted.stop();
    }
  });

  it("access log - DERRICK_ACCESS_LOG=off writes no request lines", async ({ nats, dataDir }) => {
    const { booted, url, lines } = await edgeWithLog(nats, dataDir, "off");
    try {
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect((await fetch(`${url}/no/such/route`)).status).toBe(404);
      // The hook that would log a request counts it in /metrics in the same turn: once both are counted, no line came.
      const counted = async () =>
        /derrick_http_requests_total\{[^}]*route="unmatched"[^}]*\} 1/.test(await (await fetch(`${url}/metrics`)).text()) &&
        /route="\/healthz"/.test(await (await fetch(`${url}/metrics`)).text());
      await eventually(counted, { what: "both requests counted" });
      expect(lines.filter((l) => l.msg === "request")).toEqual([]);
    } finally {
      await booted.stop();
    }
  });
});
