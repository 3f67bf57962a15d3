/**
 * readKv (actors/runtime/kv.ts): one-pass reads of a bucket that leave no consumer behind and end
 * even while the bucket is being written.
 */
import { describe, expect } from "vitest";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { readKv } from "../../actors/runtime/kv.ts";
import { READ_FETCH_MAX } from "../../actors/runtime/stream-read.ts";
import { eventually, openBucket } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { connect as tcpConnect, createServer, type Socket } from "node:net";

/** A loopback relay that delays what the server sends by `ms` (a slow link, not a dead server). */
async function latencyRelay(port: number, ms: number): Promise<{ url: string; close(): void }> {
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = tcpConnect(port, "127.0.0.1");
    sockets.add(client).add(upstream);
    upstream.on("data", (d) => void setTimeout(() => client.destroyed || client.write(d), ms));
    client.on("data", (d) => upstream.write(d));
    const end = () => (client.destroy(), upstream.destroy());
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  return {
    url: `nats://127.0.0.1:${(relay.address() as { port: number }).port}`,
    close: () => (sockets.forEach((s) => s.destroy()), relay.close()),
  };
}

const it = natsTest();

describe("kv read", () => {
  let nc: NatsConnection;
  let kv: KV;
  it.beforeAll(async ({ nc: connection }) => {
    nc = connection;
    kv = await new Kvm(nc).create("reads", { history: 2 });
    await kv.put("a.one", "1");
    await kv.put("a.one", "2");
    await kv.put("a.two", "x");
    await kv.put("b.one", "y");
    await kv.delete("b.one");
  });

  it("kv read - last values per key, every held revision with history, a pattern, deletes as DEL, keys only", async () => {
    const last = await readKv(kv);
    expect(last.map((e) => [e.key, e.operation, e.operation === "PUT" ? e.string() : ""])).toEqual([
      ["a.one", "PUT", "2"],
      ["a.two", "PUT", "x"],
      ["b.one", "DEL", ""],
    ]);
    const history = await readKv(kv, { key: "a.>", history: true });
    expect(history.map((e) => `${e.key}=${e.string()}@${e.revision}`)).toEqual(["a.one=1@1", "a.one=2@2", "a.two=x@3"]);
    const keys = await readKv(kv, { key: "a.*", headersOnly: true });
    expect(keys.map((e) => [e.key, e.value.length, e.length])).toEqual([
      ["a.one", 0, 1],
      ["a.two", 0, 1],
    ]);
    expect(await readKv(kv, { key: "c.>" })).toEqual([]);
    expect((await kv.get("a.one"))!.created.getTime()).toBe(last[0]!.created.getTime());
  });

  it("kv read - leaves no consumer on the server", async ({ jsm }) => {
    for (let i = 0; i < 20; i++) await readKv(kv, { history: i % 2 === 0 });
    await eventually(async () => (await jsm.streams.info("KV_reads")).state.consumer_count === 0, {
      timeoutMs: 3_000,
      what: "no consumers left",
    });
  });

  /** Three writers rewriting keys k0…k4 of a bucket without pause while `work` runs. */
  async function whileWritten(bucket: string, history: number, work: (kv: KV) => Promise<void>) {
    const busy = await new Kvm(nc).create(bucket, { history });
    for (let i = 0; i < 5; i++) await busy.put(`k${i}`, "0");
    let stop = false;
    const writers = [0, 1, 2].map(async (w) => {
      for (let i = w; !stop && i < 300_000; i += 3) await busy.put(`k${i % 5}`, String(i));
    });
    try {
      // Let the writers get ahead of any reader that follows them.
      await new Promise((r) => setTimeout(r, 300));
      await work(busy);
    } finally {
      stop = true;
      await Promise.all(writers);
    }
  }

  it("kv read - ends while the bucket is written without pause, and no key is missing from it", async () => {
    await whileWritten("busy", 2, async (busy) => {
      for (let i = 0; i < 200; i++) {
        const entries = await readKv(busy, { history: true });
        expect(new Set(entries.map((e) => e.key))).toEqual(new Set(["k0", "k1", "k2", "k3", "k4"]));
        expect(new Set(entries.map((e) => e.revision)).size, "no revision twice").toBe(entries.length);
      }
    });
  });

  it("kv read - last values of keys rewritten during the read: every key once, none lost", async () => {
    await whileWritten("busy1", 1, async (busy) => {
      for (let i = 0; i < 200; i++) {
        const keys = (await readKv(busy)).map((e) => e.key).sort();
        expect(keys).toEqual(["k0", "k1", "k2", "k3", "k4"]);
      }
    });
  });

  it("kv read - a bucket larger than one fetch is read whole", async () => {
    const large = await new Kvm(nc).create("large", { history: 1 });
    const n = READ_FETCH_MAX + 2_500;
    for (let i = 0; i < n; i += 1_000)
      await Promise.all(Array.from({ length: Math.min(1_000, n - i) }, (_, j) => large.put(`k${i + j}`, "v")));
    const entries = await readKv(large, { headersOnly: true });
    expect(entries).toHaveLength(n);
    expect(new Set(entries.map((e) => e.key)).size).toBe(n);
  });
  it("kv read - a slow server is not asked for extra read consumers on a stream of one replica (hedging is for replicated streams)", async ({
    nats,
  }) => {
    let creates = 0;
    const counter = nc.subscribe("$JS.API.CONSUMER.CREATE.KV_reads.>", { callback: () => void creates++ });
    await nc.flush();
    // 300 ms each way from the server: each consumer create answers after the 250 ms hedge delay.
    const relay = await latencyRelay(Number(new URL(nats.url).port), 300);
    const slow = await connect({ servers: relay.url });
    try {
      const slowKv = await openBucket(slow, "reads");
      const reads = await Promise.all(Array.from({ length: 5 }, () => readKv(slowKv)));
      for (const read of reads) expect(read.map((e) => e.key)).toEqual(["a.one", "a.two", "b.one"]);
      expect(creates).toBe(5);
    } finally {
      counter.unsubscribe();
      await slow.close();
      relay.close();
    }
  });
});
