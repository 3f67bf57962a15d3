import { describe, expect } from "vitest";
import { Kvm, type KV, type KvEntry } from "@nats-io/kv";
import { headers, type NatsConnection } from "@nats-io/nats-core";
import { BucketView, directLastMessage } from "../../actors/runtime/bucket-view.ts";
import { NOTES_TRUSTED_MS } from "../../actors/runtime/write-notes.ts";
import { republishedWrites } from "../../subjects/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { natsTest } from "../harness/fixture.ts";

const it = natsTest();
const log = createLogger("silent");

/** A view of `kv` keeping each key's last value, counting its looks at the bucket; `lagMs` delays each entry of its watch. */
function viewOf(kv: KV, lagMs = 0, direct?: NatsConnection, notes?: NatsConnection) {
  const values = new Map<string, string>();
  const looks = { count: 0 };
  const counted = {
    watch: lagMs === 0 ? kv.watch.bind(kv) : lagging(kv, lagMs),
    status: () => {
      looks.count++;
      return kv.status();
    },
  };
  const view = new BucketView(
    counted,
    {
      what: "test",
      lastMessage: direct ? directLastMessage(direct, kv) : undefined,
      nc: notes,
      apply: (entry: KvEntry) => (entry.operation === "PUT" ? values.set(entry.key, entry.string()) : values.delete(entry.key)),
      reset: () => values.clear(),
    },
    log,
  );
  return { view, values, looks };
}

/** The bucket's watch, each entry handed on `ms` late: a view in another process that lags behind the writer. */
function lagging(kv: KV, ms: number): KV["watch"] {
  return async (options) => {
    const watch = await kv.watch(options);
    const delayed = (async function* () {
      for await (const entry of watch) {
        await new Promise((resolve) => setTimeout(resolve, ms));
        yield entry;
      }
    })();
    return Object.assign(delayed, { stop: () => watch.stop() }) as unknown as Awaited<ReturnType<KV["watch"]>>;
  };
}

describe("BucketView", () => {
  it.for([
    ["the stream's info", false],
    ["a direct get of the last message", true],
  ] as const)(
    "a write acknowledged through another connection is in the view once fresh() resolves, even when its watch lags (looking by %s)",
    async ([, direct], { nc, connection }) => {
      const bucket = `view_rw_${Date.now()}_${direct}`;
      const reader = viewOf(await new Kvm(nc).create(bucket), 30, direct ? nc : undefined);
      await reader.view.start();
      const writer = await new Kvm(await connection("writer")).open(bucket);
      try {
        for (let i = 0; i < 20; i++) {
          await writer.put("k", `v${i}`);
          await reader.view.fresh();
          expect(reader.values.get("k")).toBe(`v${i}`);
        }
        await writer.delete("k");
        await reader.view.fresh();
        expect(reader.values.has("k")).toBe(false);
      } finally {
        await reader.view.stop();
      }
    },
  );

  it("callers of one turn of the event loop share one look at the bucket", async ({ nc }) => {
    const kv = await new Kvm(nc).create(`view_share_${Date.now()}`);
    await kv.put("k", "1");
    const { view, looks } = viewOf(kv);
    await view.start();
    try {
      const before = looks.count;
      await Promise.all(Array.from({ length: 200 }, () => view.fresh()));
      expect(looks.count - before).toBe(1);
      await Promise.all([view.fresh(), view.fresh()]);
      expect(looks.count - before).toBe(2);
    } finally {
      await view.stop();
    }
  });

  it("a caller that arrives while a look is in flight waits for a look sent after it, which sees its write", async ({ nc, connection }) => {
    const bucket = `view_order_${Date.now()}`;
    const { view, values } = viewOf(await new Kvm(nc).create(bucket));
    await view.start();
    const writer = await new Kvm(await connection("writer")).open(bucket);
    try {
      for (let i = 0; i < 20; i++) {
        const early = view.fresh();
        await writer.put("k", `v${i}`);
        // Arrives after the write was acknowledged, while `early` may still be in flight.
        await view.fresh();
        expect(values.get("k")).toBe(`v${i}`);
        await early;
      }
    } finally {
      await view.stop();
    }
  });

  it("a view that never started fails fresh() after its wait instead of hanging", async ({ nc }) => {
    const kv = await new Kvm(nc).create(`view_idle_${Date.now()}`);
    await kv.put("k", "1");
    const { view } = viewOf(kv);
    await expect(view.fresh(200)).rejects.toThrow(/did not reach revision 1/);
  });

  describe("of a bucket that republishes its writes", () => {
    const republishing = (nc: NatsConnection, bucket: string) => new Kvm(nc).create(bucket, { republish: republishedWrites(bucket) });

    it("a write acknowledged through another connection is in the view a read sent after it gets, without a look per read", async ({
      nc,
      connection,
    }) => {
      const bucket = `view_notes_${Date.now()}`;
      const reader = viewOf(await republishing(nc, bucket), 20, undefined, nc);
      await reader.view.start();
      // Reads arrive on the view's own connection, as an actor's requests do: that is what orders them after the notes.
      const reads = nc.subscribe(`test.view.read.${bucket}`, {
        callback: (_error, msg) =>
          void reader.view.fresh().then(
            () => msg.respond(reader.values.get("k") ?? "(none)"),
            (error: Error) => msg.respond(`failed: ${error.message}`),
          ),
      });
      const writerNc = await connection("writer");
      const writer = await new Kvm(writerNc).open(bucket);
      const read = async () => (await writerNc.request(`test.view.read.${bucket}`, "", { timeout: 5_000 })).string();
      try {
        const before = reader.looks.count;
        const started = Date.now();
        for (let i = 0; i < 10; i++) {
          await writer.put("k", `v${i}`);
          expect(await read()).toBe(`v${i}`);
        }
        await writer.delete("k");
        expect(await read()).toBe("(none)");
        // One look per trust window at most (a slow machine gets more windows); reading by looks would take 11.
        expect(reader.looks.count - before).toBeLessThanOrEqual(Math.ceil((Date.now() - started) / NOTES_TRUSTED_MS));
      } finally {
        reads.unsubscribe();
        await reader.view.stop();
      }
    });

    it("freshNow() is true only while the view holds every write heard of: a lagging watch makes a read after a write wait", async ({
      nc,
      connection,
    }) => {
      const bucket = `view_notes_now_${Date.now()}`;
      const reader = viewOf(await republishing(nc, bucket), 800, undefined, nc);
      await reader.view.start();
      // What a read answering from memory at once would send, or that it may not (the caller then awaits fresh()).
      const reads = nc.subscribe(`test.view.now.${bucket}`, {
        callback: (_error, msg) => void msg.respond(reader.view.freshNow() ? (reader.values.get("k") ?? "(none)") : "(not now)"),
      });
      const writerNc = await connection("writer-now");
      const writer = await new Kvm(writerNc).open(bucket);
      const read = async () => (await writerNc.request(`test.view.now.${bucket}`, "", { timeout: 5_000 })).string();
      try {
        await reader.view.fresh();
        expect(reader.view.freshNow()).toBe(true);
        await writer.put("k", "v1");
        // The note came before the read on the view's connection; the watch hands the entry on 800 ms later.
        expect(await read()).toBe("(not now)");
        // Caught up, and vouched for by a look just sent (notes are trusted NOTES_TRUSTED_MS after one): read from memory.
        let answer = "";
        for (let i = 0; i < 5 && answer !== "v1"; i++) {
          await reader.view.fresh();
          await reader.view.freshAsOf(Date.now());
          answer = await read();
        }
        expect(answer).toBe("v1");
        // Past the trust window with no look, the notes vouch for nothing: a read must look first.
        await new Promise((resolve) => setTimeout(resolve, NOTES_TRUSTED_MS + 100));
        expect(reader.view.freshNow()).toBe(false);
      } finally {
        reads.unsubscribe();
        await reader.view.stop();
      }
    });

    it("a write to the bucket made again (its sequences start over, below what was heard) is what a read sent after it gets", async ({
      nc,
      jsm,
      connection,
    }) => {
      const bucket = `view_notes_again_${Date.now()}`;
      const kv = await republishing(nc, bucket);
      for (let i = 0; i < 20; i++) await kv.put("k", `old${i}`);
      const reader = viewOf(kv, 0, undefined, nc);
      await reader.view.start();
      const reads = nc.subscribe(`test.view.again.${bucket}`, {
        callback: (_error, msg) => void reader.view.fresh().then(() => msg.respond(reader.values.get("k") ?? "(none)")),
      });
      const writerNc = await connection("writer-again");
      try {
        expect((await writerNc.request(`test.view.again.${bucket}`, "", { timeout: 5_000 })).string()).toBe("old19");
        await jsm.streams.delete(`KV_${bucket}`);
        const again = await republishing(writerNc, bucket);
        await again.put("k", "new");
        expect((await writerNc.request(`test.view.again.${bucket}`, "", { timeout: 5_000 })).string()).toBe("new");
      } finally {
        reads.unsubscribe();
        await reader.view.stop();
      }
    });

    it("a note no write made (published by anyone in the account) costs one look, not a wait on every read", async ({ nc, connection }) => {
      const bucket = `view_notes_forged_${Date.now()}`;
      const kv = await republishing(nc, bucket);
      await kv.put("k", "v");
      const reader = viewOf(kv, 0, undefined, nc);
      await reader.view.start();
      try {
        const forger = await connection("forger");
        const forged = headers();
        forged.set("Nats-Sequence", "1000000000");
        forger.publish(`${republishedWrites(bucket).dest.slice(0, -1)}k`, "", { headers: forged });
        await forger.flush();
        // Heard by the view before this read: it waits for its watch, gives up, looks, and knows the note for what it is.
        await reader.view.fresh();
        // The next reads, right after that look, need none (misled, each would wait for the watch, give up and look again).
        const before = reader.looks.count;
        for (let r = 0; r < 3; r++) await reader.view.fresh();
        expect(reader.looks.count - before).toBeLessThanOrEqual(1);
        expect(reader.values.get("k")).toBe("v");
      } finally {
        await reader.view.stop();
      }
    });

    it("after its connection reconnects, the next read looks at the bucket again (writes republished meanwhile were lost)", async ({
      connection,
    }) => {
      const bucket = `view_notes_reconnect_${Date.now()}`;
      const nc = await connection("reader");
      const reader = viewOf(await republishing(nc, bucket), 0, undefined, nc);
      await reader.view.start();
      try {
        await reader.view.fresh();
        const before = reader.looks.count;
        const reconnected = (async () => {
          for await (const status of nc.status()) if (status.type === "reconnect") return;
        })();
        nc.reconnect();
        await reconnected;
        await reader.view.fresh();
        expect(reader.looks.count - before).toBe(1);
      } finally {
        await reader.view.stop();
      }
    });

    it("the related writes heard count moves on across a reconnect: work begun before it never passes for current after it", async ({
      connection,
    }) => {
      // Reporting's shared misses: a miss joins a computation under way only while this count is unchanged. A related write
      // acknowledged while the connection was down is never heard, so the reconnect itself must move the count.
      const bucket = `view_related_reconnect_${Date.now()}`;
      const related = `test.related.${bucket}`;
      const nc = await connection("reader");
      const kv = await republishing(nc, bucket);
      const view = new BucketView(kv, { what: "test", nc, looksAfterWritesTo: related, apply: () => {}, reset: () => {} }, log);
      await view.start();
      try {
        await view.fresh();
        const before = view.relatedWritesHeard();
        expect(before).toBeDefined();
        // No related write at all: only the reconnect can move the count.
        const reconnected = (async () => {
          for await (const status of nc.status()) if (status.type === "reconnect") return;
        })();
        nc.reconnect();
        await reconnected;
        expect(view.relatedWritesHeard()).toBeUndefined();
        await view.fresh();
        const after = view.relatedWritesHeard();
        expect(after).toBeDefined();
        expect(after).not.toBe(before);
        // Vouching on under the same session, the count stays put until a related write is heard.
        await view.fresh();
        expect(view.relatedWritesHeard()).toBe(after);
      } finally {
        await view.stop();
      }
    });
  });
});
