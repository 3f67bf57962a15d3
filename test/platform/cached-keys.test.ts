import { describe, expect } from "vitest";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { CachedKeys, NOT_HELD } from "../../actors/runtime/cached-keys.ts";
import { NOTES_TRUSTED_MS } from "../../actors/runtime/write-notes.ts";
import { republishedWrites } from "../../subjects/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { eventually } from "../harness/poll.ts";

const it = natsTest();
const LIMITS = { entries: 100, bytes: 1 << 20 };

/** Counts the bucket reads `kv` makes (the reads memory did not answer). */
function counted(kv: KV): { kv: KV; gets: { count: number } } {
  const gets = { count: 0 };
  const get = kv.get.bind(kv);
  kv.get = (...args) => {
    gets.count++;
    return get(...args);
  };
  return { kv, gets };
}

/** Serves reads of `key` on the reader's own connection, as an actor serves requests: what orders them after the notes. */
function serveReads(nc: NatsConnection, cached: CachedKeys, subject: string) {
  return nc.subscribe(subject, {
    callback: (_error, msg) =>
      void cached.read<string>(msg.string()).then(
        (found) => msg.respond(found === undefined ? "(none)" : found.value),
        (error: Error) => msg.respond(`failed: ${error.message}`),
      ),
  });
}

describe("CachedKeys", () => {
  it("a write acknowledged through another connection is what a read sent after it gets; repeated reads come from memory", async ({
    nc,
    connection,
  }) => {
    const bucket = `keys_notes_${Date.now()}`;
    const { kv, gets } = counted(await new Kvm(nc).create(bucket, { republish: republishedWrites(bucket) }));
    const cached = new CachedKeys(kv, nc, LIMITS);
    const subject = `test.keys.read.${bucket}`;
    const reads = serveReads(nc, cached, subject);
    const writerNc = await connection("writer");
    const writer = await new Kvm(writerNc).open(bucket);
    const read = async (key: string) => (await writerNc.request(subject, key, { timeout: 5_000 })).string();
    try {
      expect(await read("k")).toBe("(none)");
      for (let i = 0; i < 10; i++) {
        await writer.put("k", JSON.stringify(`v${i}`));
        expect(await read("k")).toBe(`v${i}`);
        const before = gets.count;
        for (let r = 0; r < 5; r++) expect(await read("k")).toBe(`v${i}`);
        // Five reads of an unchanged key: at most one reaches the bucket (a trust window that lapsed meanwhile).
        expect(gets.count - before).toBeLessThanOrEqual(1);
      }
      await writer.delete("k");
      expect(await read("k")).toBe("(none)");
    } finally {
      reads.unsubscribe();
      cached.stop();
    }
  });

  it("a bucket that does not republish its writes is read every time, and its stream is not asked about on every read", async ({ nc }) => {
    const { kv, gets } = counted(await new Kvm(nc).create(`keys_plain_${Date.now()}`));
    const looks = { count: 0 };
    const status = kv.status.bind(kv);
    kv.status = () => {
      looks.count++;
      return status();
    };
    await kv.put("k", JSON.stringify("v"));
    const cached = new CachedKeys(kv, nc, LIMITS);
    const started = Date.now();
    for (let r = 0; r < 5; r++) expect((await cached.read<string>("k"))?.value).toBe("v");
    expect(gets.count).toBe(5);
    // Once, then once per trust window at most (a slow machine gets more windows).
    expect(looks.count).toBeLessThanOrEqual(1 + Math.ceil((Date.now() - started) / NOTES_TRUSTED_MS));
    cached.stop();
  });

  it("a purge of the stream (no write, no note) is seen by reads after the next look", async ({ nc, jsm }) => {
    const bucket = `keys_purge_${Date.now()}`;
    const kv = await new Kvm(nc).create(bucket, { republish: republishedWrites(bucket) });
    await kv.put("k", JSON.stringify("v"));
    const cached = new CachedKeys(kv, nc, LIMITS);
    try {
      await eventually(async () => (await cached.read<string>("k"))?.value === "v");
      await jsm.streams.purge(`KV_${bucket}`);
      await eventually(async () => (await cached.read<string>("k")) === undefined, { timeoutMs: 10_000, what: "the purge to be seen" });
    } finally {
      cached.stop();
    }
  });

  it("after its connection reconnects, reads go to the bucket until it is looked at again", async ({ connection }) => {
    const nc = await connection("reader");
    const bucket = `keys_reconnect_${Date.now()}`;
    const { kv, gets } = counted(await new Kvm(nc).create(bucket, { republish: republishedWrites(bucket) }));
    await kv.put("k", JSON.stringify("v"));
    const cached = new CachedKeys(kv, nc, LIMITS);
    try {
      // Held once the notes are heard and a look vouches for them.
      await eventually(async () => {
        await cached.read("k");
        const before = gets.count;
        await cached.read("k");
        return gets.count === before;
      });
      const reconnected = (async () => {
        for await (const status of nc.status()) if (status.type === "reconnect") return;
      })();
      nc.reconnect();
      await reconnected;
      const before = gets.count;
      expect((await cached.read<string>("k"))?.value).toBe("v");
      expect(gets.count - before).toBe(1);
    } finally {
      cached.stop();
    }
  });

  it("peek answers only what a read would answer from memory at once: held, vouched for, not written since", async ({ nc, connection }) => {
    const bucket = `keys_peek_${Date.now()}`;
    const kv = await new Kvm(nc).create(bucket, { republish: republishedWrites(bucket) });
    await kv.put("k", JSON.stringify("v1"));
    const cached = new CachedKeys(kv, nc, LIMITS);
    const writer = await new Kvm(await connection("writer")).open(bucket);
    try {
      expect(cached.peek("k")).toBe(NOT_HELD);
      await eventually(async () => {
        await cached.read("k");
        return cached.peek<string>("k") !== NOT_HELD;
      });
      expect(cached.peek<string>("k")).toEqual({ value: "v1", revision: 1 });
      expect(cached.peek("other")).toBe(NOT_HELD);
      await writer.put("k", JSON.stringify("v2"));
      // The write's note drops the held value: peek then defers to a read, which gets the new value.
      await eventually(() => cached.peek("k") === NOT_HELD, { what: "the write's note" });
      expect((await cached.read<string>("k"))?.value).toBe("v2");
      expect(cached.peek<string>("k")).toEqual({ value: "v2", revision: 2 });
      // Without a look at the stream within the trust window, memory vouches for nothing.
      await Bun.sleep(NOTES_TRUSTED_MS + 50);
      expect(cached.peek("k")).toBe(NOT_HELD);
    } finally {
      cached.stop();
    }
  });
});
