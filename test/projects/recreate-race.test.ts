/** A write that found no stream while another process was making the bucket again (no responders) runs once more there. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../harness/index.ts";
import { BUCKETS, openStores, taskStore } from "../../actors/projects/store.ts";
import { TaskState, type TaskRecord } from "../../subjects/projects.ts";

describe("a bucket made again by another process", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let other: NatsConnection;
  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    other = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await other?.close();
    await nats?.cleanup();
  });

  it("storage - a write that found no stream while another process was making the bucket again is done there, not failed", async () => {
    const stores = await openStores(nc);
    stores.close();
    const jsm = await jetstreamManager(nc);
    expect(await jsm.streams.delete(`KV_${BUCKETS.tasks}`)).toBe(true);
    // The write is sent while the bucket is gone (no responders); the other process makes it again
    // before this one looks.
    const tasks = taskStore(
      new Proxy(stores.tasks, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (prop !== "put" || typeof value !== "function") return value;
          return async (...args: unknown[]) => {
            try {
              return await value.apply(receiver, args);
            } catch (error) {
              if (!(await jsm.streams.info(`KV_${BUCKETS.tasks}`).catch(() => undefined)))
                await new Kvm(other).create(BUCKETS.tasks, { history: 8 });
              throw error;
            }
          };
        },
      }),
      stores.guard.tasks,
    );
    const now = new Date().toISOString();
    const task: TaskRecord = {
      taskId: "tsk_raced",
      projectId: "p",
      kind: "key-parameters",
      state: TaskState.queued,
      createdAt: now,
      contentId: "cnt_raced",
      partition: "opendes",
      requestedBy: { clientId: "alpha", subject: "alpha" },
      attempts: 0,
    };
    await tasks.create(task);
    expect((await tasks.get("opendes", "tsk_raced"))?.value).toEqual(task);
  });
});
