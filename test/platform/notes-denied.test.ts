/**
 * A deployment whose NATS user may not subscribe to the republished writes (`derrick.kv.>`): memory views and single-key
 * memory fall back to looking at the bucket, so reads still see every acknowledged write.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm, type KvEntry } from "@nats-io/kv";
import { BucketView, directLastMessage } from "../../actors/runtime/bucket-view.ts";
import { CachedKeys } from "../../actors/runtime/cached-keys.ts";
import { createLogger } from "../../platform/logger.ts";
import { republishedWrites, subjects } from "../../subjects/index.ts";
import { startTestNats, type TestNats } from "../harness/nats.ts";

let nats: TestNats;
let admin: NatsConnection;
let limited: NatsConnection;

beforeAll(async () => {
  nats = await startTestNats({
    extraConfig: `authorization {
  users = [
    { user: admin, password: admin-pw }
    { user: limited, password: limited-pw, permissions: { subscribe: { deny: ["${subjects.allBucketWrites()}"] } } }
  ]
}`,
  });
  admin = await connect({ servers: nats.url, user: "admin", pass: "admin-pw" });
  limited = await connect({ servers: nats.url, user: "limited", pass: "limited-pw" });
});

afterAll(async () => {
  await limited?.close();
  await admin?.close();
  await nats?.stop();
});

/** Serves reads on the limited connection, as an actor would: `read` answers what memory says of key `k`. */
function serve(subject: string, read: () => Promise<string>) {
  return limited.subscribe(subject, {
    callback: (_error, msg) =>
      void read().then(
        (value) => msg.respond(value),
        (error: Error) => msg.respond(`failed: ${error.message}`),
      ),
  });
}

describe("republished writes a user may not hear", () => {
  it("a memory view looks at the bucket instead, and a read after a write acknowledged elsewhere sees it", async () => {
    const bucket = `denied_view_${Date.now()}`;
    await new Kvm(admin).create(bucket, { republish: republishedWrites(bucket) });
    const kv = await new Kvm(limited).open(bucket);
    const values = new Map<string, string>();
    const view = new BucketView(
      kv,
      {
        what: "denied",
        nc: limited,
        lastMessage: directLastMessage(limited, kv),
        apply: (entry: KvEntry) => (entry.operation === "PUT" ? values.set(entry.key, entry.string()) : values.delete(entry.key)),
        reset: () => values.clear(),
      },
      createLogger("silent"),
    );
    await view.start();
    const reads = serve(`test.denied.view.${bucket}`, async () => {
      await view.fresh();
      return values.get("k") ?? "(none)";
    });
    const writer = await new Kvm(admin).open(bucket);
    try {
      for (let i = 0; i < 5; i++) {
        await writer.put("k", `v${i}`);
        expect((await admin.request(`test.denied.view.${bucket}`, "", { timeout: 5_000 })).string()).toBe(`v${i}`);
      }
    } finally {
      reads.unsubscribe();
      await view.stop();
    }
  });

  it("single-key memory reads the bucket instead, and a read after a write acknowledged elsewhere sees it", async () => {
    const bucket = `denied_keys_${Date.now()}`;
    await new Kvm(admin).create(bucket, { republish: republishedWrites(bucket) });
    const cached = new CachedKeys(await new Kvm(limited).open(bucket), limited, { entries: 10, bytes: 1 << 20 });
    const reads = serve(`test.denied.keys.${bucket}`, async () => (await cached.read<string>("k"))?.value ?? "(none)");
    const writer = await new Kvm(admin).open(bucket);
    try {
      for (let i = 0; i < 5; i++) {
        await writer.put("k", JSON.stringify(`v${i}`));
        expect((await admin.request(`test.denied.keys.${bucket}`, "", { timeout: 5_000 })).string()).toBe(`v${i}`);
      }
    } finally {
      reads.unsubscribe();
      cached.stop();
    }
  });
});
