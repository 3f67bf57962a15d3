import { afterEach, describe, expect } from "vitest";
import pino from "pino";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KV, type KvEntry, type KvWatchOptions } from "@nats-io/kv";
import { AckPolicy, jetstream, jetstreamManager, type ConsumerMessages } from "@nats-io/jetstream";
import { endKvWatches, eventually } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { consumeForever, followBucket, type Loop } from "../../actors/runtime/follow.ts";

type Line = { level: number; msg: string; key?: string; resumeAt?: number; attempt?: number };

function capture() {
  const lines: Line[] = [];
  const log = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

const show = (entry: KvEntry) => `${entry.key}=${entry.string()}@${entry.revision}`;

const it = natsTest();

describe("background loops that outlive their iterators", () => {
  let nc: NatsConnection;
  let buckets = 0;
  const loops: Loop[] = [];
  const bucket = () => new Kvm(nc).create(`follow_${++buckets}`, { history: 1 });
  /** A bucket whose watch cannot be opened while `refuse` says so (JetStream away), counting the opens. */
  const flaky = (kv: KV, refuse: (attempt: number) => boolean) => {
    const opens: number[] = [];
    return {
      opens,
      status: () => kv.status(),
      async watch(options?: KvWatchOptions) {
        opens.push(options?.resumeFromRevision ?? 0);
        if (refuse(opens.length)) throw new Error("JetStream not available");
        return kv.watch(options);
      },
    };
  };

  it.beforeAll(async ({ nc: connection }) => {
    nc = connection;
  });
  // Each test ends the watches of the shared connection: no loop of an earlier test may be left.
  afterEach(async () => {
    for (const loop of loops.splice(0)) await loop.stop();
  });

  it("follow - a watch that ends by itself is re-opened after the last revision it delivered: every change arrives once and in order, and the restart is logged at warn", async () => {
    const kv = await bucket();
    await kv.put("a", "1");
    const { log, lines } = capture();
    const seen: string[] = [];
    const loop = await followBucket(kv, { what: "test", retryMs: 200 }, (entry) => void seen.push(show(entry)), log);
    loops.push(loop);
    await eventually(() => seen.length === 1, { what: "the last value" });
    expect(endKvWatches(nc)).toBe(1);
    // Written while no watch is open (it is re-opened 200 ms later).
    await kv.put("b", "2");
    await kv.put("a", "3");
    await eventually(() => seen.length === 3, { what: "the changes made while the watch was down" });
    await kv.put("c", "4");
    await eventually(() => seen.length === 4, { what: "a change after the re-watch" });
    expect(seen).toEqual(["a=1@1", "b=2@2", "a=3@3", "c=4@4"]);
    expect(loop.restarts).toBe(1);
    expect(lines.find((l) => /ended by itself/.test(l.msg))).toMatchObject({ level: 40, resumeAt: 2 });
    expect(lines.find((l) => /re-opened$/.test(l.msg))).toMatchObject({ level: 40, resumeAt: 2 });
  });

  it("follow - an updates-only watch that ends before its first update misses none made meanwhile, and one that cannot be re-opened yet (JetStream away) is retried with backoff", async () => {
    const kv = await bucket();
    await kv.put("old", "0");
    const { log, lines } = capture();
    const seen: string[] = [];
    // The first open succeeds, the next two fail, then JetStream is back.
    const store = flaky(kv, (attempt) => attempt === 2 || attempt === 3);
    const loop = await followBucket(store, { what: "test", from: "updates", retryMs: 50 }, (entry) => void seen.push(show(entry)), log);
    loops.push(loop);
    expect(endKvWatches(nc)).toBe(1);
    await kv.put("new", "1");
    await eventually(() => seen.length === 1, { what: "the update made while the watch was down" });
    expect(seen).toEqual(["new=1@2"]);
    // Every open starts after the bucket's last message at start (revision 1), never "from now".
    expect(store.opens).toEqual([2, 2, 2, 2]);
    expect(lines.filter((l) => /cannot re-open it yet/.test(l.msg)).map((l) => l.attempt)).toEqual([2, 3]);
    expect(loop.restarts).toBe(1);
  });

  it("follow - a bucket deleted and made again is noticed (its stream's creation time): the watch starts over from the beginning, after onRecreated, for 'all' and 'updates' alike", async () => {
    for (const from of ["all", "updates"] as const) {
      const name = `follow_${++buckets}`;
      const kv = await new Kvm(nc).create(name, { history: 1 });
      for (let i = 1; i <= 5; i++) await kv.put("a", String(i));
      const { log, lines } = capture();
      const seen: string[] = [];
      let recreated = 0;
      const loop = await followBucket(
        kv,
        { what: "test", from, retryMs: 20, checkEveryMs: 100, onRecreated: () => recreated++ },
        (entry) => void seen.push(show(entry)),
        log,
      );
      loops.push(loop);
      await kv.put("a", "6");
      await eventually(() => seen.at(-1) === "a=6@6", { what: `the last value in the old bucket (${from})` });
      await (await jetstreamManager(nc)).streams.delete(`KV_${name}`);
      const again = await new Kvm(nc).create(name, { history: 1 });
      await again.put("b", "1");
      await again.put("a", "2");
      // Revisions 1 and 2 of the new bucket, both below the old bucket's 6.
      await eventually(() => seen.includes("b=1@1") && seen.includes("a=2@2"), {
        what: `the new bucket's entries (${from})`,
        timeoutMs: 5_000,
      });
      expect(recreated).toBe(1);
      expect(lines.some((l) => /deleted and made again/.test(l.msg))).toBe(true);
    }
  });

  it("follow - an entry whose handling throws is logged and skipped; the entries after it still arrive", async () => {
    const kv = await bucket();
    await kv.put("bad", "x");
    await kv.put("good", "y");
    const { log, lines } = capture();
    const seen: string[] = [];
    const loop = await followBucket(
      kv,
      { what: "test" },
      (entry) => {
        if (entry.key === "bad") throw new TypeError("cannot use it");
        seen.push(entry.key);
      },
      log,
    );
    loops.push(loop);
    await kv.put("later", "z");
    await eventually(() => seen.length === 2, { what: "the entries after the bad one" });
    expect(seen).toEqual(["good", "later"]);
    expect(lines.filter((l) => l.level === 50)).toMatchObject([
      { key: "bad", msg: expect.stringMatching(/could not be handled; skipped/) },
    ]);
    expect(loop.restarts).toBe(0);
  });

  it("follow - stop ends the loop at once, also while it waits to re-open the watch", async () => {
    const kv = await bucket();
    const { log } = capture();
    const store = flaky(kv, (attempt) => attempt > 1);
    const loop = await followBucket(store, { what: "test", retryMs: 60_000 }, () => undefined, log);
    expect(endKvWatches(nc)).toBe(1);
    const started = Date.now();
    await loop.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(store.opens).toHaveLength(1);
  });

  it("consume - a consume iterator that ends is re-opened, and a message whose handling throws is logged and comes back after the ack wait", async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "FOLLOW_CONSUME", subjects: ["follow.consume"] });
    await jsm.consumers.add("FOLLOW_CONSUME", { durable_name: "c", ack_policy: AckPolicy.Explicit, ack_wait: 1_000_000_000 });
    const js = jetstream(nc);
    const { log, lines } = capture();
    const opened: ConsumerMessages[] = [];
    const got: string[] = [];
    let failed = false;
    const loop = await consumeForever(
      async () => {
        const messages = await (await js.consumers.get("FOLLOW_CONSUME", "c")).consume({ max_messages: 10 });
        opened.push(messages);
        return messages;
      },
      (msg) => {
        if (msg.string() === "bad" && !failed) {
          failed = true;
          throw new Error("not now");
        }
        got.push(msg.string());
        msg.ack();
      },
      { what: "c", log, retryMs: 50 },
    );
    loops.push(loop);
    await js.publish("follow.consume", "one");
    await eventually(() => got.length === 1, { what: "the first message" });
    // Ends the iterator, as nats.js does on a 400 or a lost permission.
    await opened[0]!.close();
    await js.publish("follow.consume", "bad");
    await eventually(() => got.includes("bad"), { what: "the failed message, redelivered after the ack wait", timeoutMs: 15_000 });
    expect(got).toEqual(["one", "bad"]);
    expect(opened).toHaveLength(2);
    expect(loop.restarts).toBe(1);
    expect(lines.filter((l) => l.level === 50).map((l) => l.msg)).toEqual([expect.stringMatching(/could not be handled; it comes back/)]);
  });
});
