/**
 * A JetStream cluster of real nats-servers on loopback (`n0`, `n1`, …), each with its own store, client
 * port and route port, fully meshed. A server killed by a test can be started again with its store,
 * client port and routes, as an operator restarts a lost machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { eventually } from "./poll.ts";
import { freePort } from "./redis.ts";

export type NatsCluster = {
  /** The running servers, by index (a killed one stays until restarted). */
  servers: NatsServer[];
  /** Starts server `i` again on its client port, store and routes. */
  restart(i: number): Promise<NatsServer>;
  stop(): Promise<void>;
};

export async function startNatsCluster(size = 3, name = "derrick-test"): Promise<NatsCluster> {
  const routes = await Promise.all(Array.from({ length: size }, () => freePort()));
  const dirs = routes.map((_, i) => mkdtempSync(join(tmpdir(), `derrick-cluster-${i}-`)));
  const ports: number[] = [];
  const start = (i: number, port: number) => {
    const peers = routes.filter((_, j) => j !== i).map((p) => `"nats-route://127.0.0.1:${p}"`);
    return startNatsServer({
      dir: dirs[i]!,
      port,
      extraConfig: `server_name: n${i}\ncluster { name: ${name}, listen: "127.0.0.1:${routes[i]}", routes: [${peers.join(", ")}] }`,
    });
  };
  const servers = await Promise.all(routes.map((_, i) => start(i, -1)));
  ports.push(...servers.map((s) => s.port));
  const cluster: NatsCluster = {
    servers,
    async restart(i) {
      servers[i] = await start(i, ports[i]!);
      return servers[i]!;
    },
    async stop() {
      for (const server of servers) await server.stop();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
  };
  // The cluster answers JetStream requests once it has elected its meta leader.
  const nc = await connect({ servers: servers[0]!.url });
  try {
    const jsm = await jetstreamManager(nc, { checkAPI: false });
    await eventually(async () => !!(await jsm.getAccountInfo()), { timeoutMs: 30_000, intervalMs: 250, what: "the cluster's JetStream" });
    // And places a stream on every server: until then a busy machine's first streams may time out.
    await eventually(async () => !!(await jsm.streams.add({ name: "CLUSTER_PROBE", subjects: ["cluster.probe"], num_replicas: size })), {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: `a stream with ${size} replicas`,
    });
    await jsm.streams.delete("CLUSTER_PROBE");
  } catch (error) {
    await cluster.stop();
    throw error;
  } finally {
    await nc.close();
  }
  return cluster;
}
