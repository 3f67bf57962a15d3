/**
 * DERRICK_JETSTREAM_REPLICAS on a real three-server JetStream cluster (loopback): every stream and
 * bucket derrick creates has three replicas and, for read-your-writes, no direct gets (a follower
 * could answer one before it has a write); writes read back at once through the edge.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type StreamInfo } from "@nats-io/jetstream";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { eventually, freePort, startDerrick, type TestDerrick } from "../harness/index.ts";

describe("a JetStream cluster with DERRICK_JETSTREAM_REPLICAS=3", () => {
  const servers: NatsServer[] = [];
  const dirs: string[] = [];
  let nc: NatsConnection;
  let derrick: TestDerrick;

  beforeAll(async () => {
    const routes = [await freePort(), await freePort(), await freePort()];
    const started = routes.map(async (route, i) => {
      const dir = mkdtempSync(join(tmpdir(), `derrick-cluster-${i}-`));
      dirs.push(dir);
      const peers = routes.filter((_, j) => j !== i).map((p) => `"nats-route://127.0.0.1:${p}"`);
      return startNatsServer({ dir, port: -1, extraConfig: `server_name: n${i}\ncluster { name: derrick-test, listen: "127.0.0.1:${route}", routes: [${peers.join(", ")}] }` });
    });
    servers.push(...(await Promise.all(started)));
    nc = await connect({ servers: servers[0]!.url });
    const jsm = await jetstreamManager(nc, { checkAPI: false });
    // The cluster answers JetStream requests once it has elected its meta leader.
    await eventually(async () => !!(await jsm.getAccountInfo()), { timeoutMs: 30_000, intervalMs: 250, what: "the cluster's JetStream" });
    derrick = await startDerrick({ url: servers[0]!.url }, { actors: ["system", "identity", "twins", "notifications", "reporting", "projects", "storage"], env: { DERRICK_JETSTREAM_REPLICAS: "3" } });
  }, 90_000);
  afterAll(async () => {
    await derrick?.cleanup();
    await nc?.close();
    for (const server of servers) await server.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("cluster - every stream and bucket derrick made has three replicas and no direct gets; a twin PUT reads back at once", async () => {
    const put = await derrick.call("/api/twin-properties/v1/acme/prod/dev-r3/twin-properties", { method: "PUT", as: "admin", partition: null, body: JSON.stringify({ group: "g", twins: [{ name: "p", value: "v1" }] }) });
    expect(put.status, await put.clone().text()).toBe(200);
    const got = await derrick.call("/api/twin-properties/v1/acme/prod/dev-r3/twin-properties?group=g", { as: "admin", partition: null });
    expect(((await got.json()) as { desired: Record<string, Record<string, { value: string }>> }).desired.g?.p?.value).toBe("v1");

    const jsm = await jetstreamManager(nc);
    const streams: StreamInfo[] = [];
    for await (const info of jsm.streams.list()) streams.push(info);
    const names = streams.map((s) => s.config.name);
    // Identity's registry, the notifications journal and subscriptions, reporting's and projects' buckets,
    // the content task queue, the record stream, the twin's bucket.
    expect(names).toEqual(
      expect.arrayContaining(["KV_derrick_registry", "EVENTS", "DELIVERIES", "DEAD", "ATTEMPTS", "KV_derrick_notifications", "KV_derrick_assessments", "KV_derrick_assessment_cache", "KV_derrick_projects", "KV_derrick_tasks", "CONTENT_TASKS", "RECORDS"]),
    );
    expect(names.some((n) => n.startsWith("KV_twin-"))).toBe(true);
    for (const info of streams) {
      expect(info.config.num_replicas, info.config.name).toBe(3);
      expect(info.config.allow_direct, info.config.name).toBe(false);
    }
  });
});
