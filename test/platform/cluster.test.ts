/**
 * DERRICK_JETSTREAM_REPLICAS on a real three-server JetStream cluster (loopback): every stream and
 * bucket derrick creates has three replicas and, for read-your-writes, no direct gets (a follower
 * could answer one before it has a write); writes read back at once through the edge. Then the server
 * derrick is attached to is killed: derrick reconnects to a survivor it learned from the cluster and
 * keeps serving, because every stream still has two of its three replicas.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type StreamInfo } from "@nats-io/jetstream";
import type { ActorName } from "../../config/index.ts";
import type { NatsServer } from "../../platform/nats-server.ts";
import { eventually, startDerrick, type TestDerrick } from "../harness/index.ts";
import { startNatsCluster, type NatsCluster } from "../harness/cluster.ts";
import { json } from "../harness/json.ts";
import type { TwinGetReply } from "../../subjects/twins.ts";
import type { Subscription } from "../../subjects/notifications.ts";

const ACTORS = ["system", "identity", "twins", "notifications", "reporting", "projects", "storage"] as const satisfies readonly ActorName[];

describe("a JetStream cluster with DERRICK_JETSTREAM_REPLICAS=3", () => {
  let cluster: NatsCluster;
  let servers: NatsServer[] = [];
  let nc: NatsConnection;
  let derrick: TestDerrick;

  beforeAll(async () => {
    cluster = await startNatsCluster(3);
    servers = cluster.servers;
    nc = await connect({ servers: servers[0]!.url });
    // ACTORS too, so /readyz expects exactly the actors this process runs. Only servers[0]'s URL, as an
    // operator may give one: nats.js learns the others from the cluster (the last test needs them).
    derrick = await startDerrick(
      { url: servers[0]!.url },
      { actors: [...ACTORS], env: { ACTORS: ACTORS.join(","), DERRICK_JETSTREAM_REPLICAS: "3" } },
    );
  }, 90_000);
  afterAll(async () => {
    await derrick?.cleanup();
    await nc?.close();
    await cluster?.stop();
  });

  it("cluster - every stream and bucket derrick made has three replicas and no direct gets; a twin PUT reads back at once", async () => {
    const put = await derrick.call("/api/twin-properties/v1/acme/prod/dev-r3/twin-properties", {
      method: "PUT",
      as: "admin",
      partition: null,
      body: JSON.stringify({ group: "g", twins: [{ name: "p", value: "v1" }] }),
    });
    expect(put.status, await put.clone().text()).toBe(200);
    const got = await derrick.call("/api/twin-properties/v1/acme/prod/dev-r3/twin-properties?group=g", { as: "admin", partition: null });
    expect((await json<TwinGetReply>(got)).desired.g?.p?.value).toBe("v1");

    const jsm = await jetstreamManager(nc);
    const streams: StreamInfo[] = [];
    for await (const info of jsm.streams.list()) streams.push(info);
    const names = streams.map((s) => s.config.name);
    // Identity's registry, the notifications journal and subscriptions, reporting's and projects' buckets,
    // the content task queue, the record stream, the twin's bucket.
    expect(names).toEqual(
      expect.arrayContaining([
        "KV_derrick_registry",
        "EVENTS",
        "DELIVERIES",
        "DEAD",
        "ATTEMPTS",
        "KV_derrick_notifications",
        "KV_derrick_assessments",
        "KV_derrick_assessment_cache",
        "KV_derrick_projects",
        "KV_derrick_tasks",
        "CONTENT_TASKS",
        "RECORDS",
      ]),
    );
    expect(names.some((n) => n.startsWith("KV_twin-"))).toBe(true);
    for (const info of streams) {
      expect(info.config.num_replicas, info.config.name).toBe(3);
      expect(info.config.allow_direct, info.config.name).toBe(false);
    }
  });

  // Kills a server: the last test of the file, the cluster stays one server short afterwards.
  it("cluster - when the server derrick is attached to dies, derrick reconnects to a survivor; what was written before reads back, and twins, subscriptions, projects and readiness keep working", async () => {
    const lossTwin = "/api/twin-properties/v1/acme/prod/dev-loss/twin-properties";
    const putTwin = (value: string) =>
      derrick.call(lossTwin, {
        method: "PUT",
        as: "admin",
        partition: null,
        body: JSON.stringify({ group: "g", twins: [{ name: "p", value }] }),
      });
    const twinValue = async () => {
      const res = await derrick.call(`${lossTwin}?group=g`, { as: "admin", partition: null });
      if (res.status !== 200) return `${res.status}: ${await res.text()}`;
      return (await json<TwinGetReply>(res)).desired.g?.p?.value;
    };
    const subscribe = (type: string) =>
      derrick.call(`/v1/notifications/subscriptions/types/${type}`, {
        method: "POST",
        body: JSON.stringify({ subscriber: "cluster", callback_uri: "https://hooks.example.com/derrick" }),
      });
    const listedIds = async () => {
      const res = await derrick.call("/v1/notifications/subscriptions");
      if (res.status !== 200) return `${res.status}: ${await res.text()}`;
      return (await json<Subscription[]>(res)).map((s) => s.subscription_id);
    };
    const ready = async () => (await derrick.call("/readyz", { as: null, partition: null })).status;

    // Before: a twin, a subscription and a project written; ready.
    expect((await putTwin("before")).status).toBe(200);
    const before = await subscribe("PlanShared");
    expect(before.status).toBe(200);
    const beforeId = (await json<Subscription>(before)).subscription_id;
    expect(
      (
        await derrick.call("/v1/projects/plan-before", {
          method: "PUT",
          as: "admin",
          body: JSON.stringify({ name: "Before the loss", members: ["alpha"] }),
        })
      ).status,
    ).toBe(201);
    expect(await ready()).toBe(200);

    // derrick was given only servers[0]'s URL: the others it learned from the cluster's INFO.
    const lost = servers[0]!;
    const survivors = servers.slice(1).map((s) => `127.0.0.1:${s.port}`);
    expect(derrick.nc.info?.connect_urls).toEqual(expect.arrayContaining(survivors));
    let reconnectedTo: string | undefined;
    void (async () => {
      for await (const status of derrick.nc.status()) if (status.type === "reconnect") reconnectedTo = status.server;
    })();

    await lost.kill(); // SIGKILL: no lame-duck mode, no goodbye to the routes or the clients
    await eventually(() => reconnectedTo, { what: "derrick's reconnect" });
    expect(survivors).toContain(reconnectedTo);
    expect(survivors).toContain(derrick.nc.getServer());

    // Streams the lost server led elect a new leader among their two other replicas (raft election
    // timeouts are seconds). A stream that had no replica elsewhere (replicas 1) never does: this fails.
    const jsm = await jetstreamManager(nc, { checkAPI: false, timeout: 1_000 });
    const streams = await eventually(
      async () => {
        const names: string[] = [];
        for await (const name of jsm.streams.names()) names.push(name);
        return names;
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "the stream names" },
    );
    for (const name of streams) {
      await eventually(
        async () => {
          const leader = (await jsm.streams.info(name)).cluster?.leader;
          return leader !== undefined && leader !== "n0";
        },
        { timeoutMs: 15_000, intervalMs: 250, what: `a leader for stream ${name} on a survivor` },
      );
    }

    // After: with every stream led again, each request answers at once (no retries here). Reads run
    // a consumer each, placed at random on a replica: ten of each, so a read placed on the lost
    // server and left unanswered shows (nats-server up to 2.11; actors/runtime/stream-read.ts).
    expect(await Promise.all(Array.from({ length: 10 }, twinValue))).toEqual(Array(10).fill("before"));
    expect((await putTwin("after")).status).toBe(200);
    expect(await twinValue()).toBe("after");

    const after = await subscribe("ProjectCreated");
    expect(after.status, await after.clone().text()).toBe(200);
    const afterId = (await json<Subscription>(after)).subscription_id;
    for (const ids of await Promise.all(Array.from({ length: 10 }, listedIds)))
      expect(ids).toEqual(expect.arrayContaining([beforeId, afterId]));

    expect((await derrick.call("/v1/projects/plan-before", { as: "alpha" })).status).toBe(200);
    const project = await derrick.call("/v1/projects/plan-after", {
      method: "PUT",
      as: "admin",
      body: JSON.stringify({ name: "After the loss", members: ["alpha"] }),
    });
    expect(project.status, await project.clone().text()).toBe(201);
    const read = await derrick.call("/v1/projects/plan-after", { as: "alpha" });
    expect(await read.json()).toMatchObject({ projectId: "plan-after", name: "After the loss", members: ["alpha"] });

    expect(await ready()).toBe(200);
  }, 45_000);
});
