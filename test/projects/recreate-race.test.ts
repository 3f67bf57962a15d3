/** A write that found no stream while another process was making the bucket again (no responders) runs once more there. */
import { describe, expect } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { natsTest } from "../harness/fixture.ts";
import { BUCKETS, openStores, taskStore } from "../../actors/projects/store.ts";
import { queuedTask } from "./helpers.ts";

const it = natsTest();

describe("a bucket made again by another process", () => {
  it("storage - a write that found no stream while another process was making the bucket again is done there, not failed", async ({
    nc,
    connection,
  }) => {
    const other = await connection("other process");
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
    const task = queuedTask("raced");
    await tasks.create(task);
    expect((await tasks.get("opendes", "tsk_raced"))?.value).toEqual(task);
  });
});
