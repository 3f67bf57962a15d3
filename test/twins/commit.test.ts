/**
 * The commit protocol when a writer does not finish its claim: its process is gone, it failed
 * mid-commit (NATS went away), or it stalled past the lease and wakes up later. Handlers run
 * directly against a real nats-server; "processes" are separate connections with writers of their own.
 */
import { describe, expect } from "vitest";
import type { NatsConnection } from "@nats-io/nats-core";
import { eventually, openBucket } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { twinBucket, twinKey, type TwinAddress } from "../../subjects/twins.ts";
import { putTwins, type TwinsDeps } from "../../actors/twins/handlers.ts";
import { kvTwinStores, type TwinBucketStore, type TwinStores } from "../../actors/twins/store.ts";
import { twinWriter } from "../../actors/twins/actor.ts";
import { createLogger } from "../../platform/logger.ts";

const ctx = {
  requestId: "t",
  log: createLogger("silent"),
  principal: { clientId: "admin", subject: "admin", groups: ["twins.writers"], kind: "service" as const },
};

/** Real stores, with a hook in front of every desired-value write, and optionally every read (fault injection). */
function hooked(
  stores: TwinStores,
  beforeValueWrite: (key: string) => Promise<void>,
  beforeValueRead: (key: string) => Promise<void> = async () => {},
): TwinStores {
  return {
    async open(address, create) {
      const bucket = await stores.open(address, create);
      if (!bucket) return bucket;
      const wrapped: TwinBucketStore = {
        get: async (key) => {
          if (key.startsWith("twin_properties/")) await beforeValueRead(key);
          return bucket.get(key);
        },
        state: () => bucket.state(),
        put: (key, value) => bucket.put(key, value),
        remove: (key) => bucket.remove(key),
        swap: async (key, value, expected) => {
          if (key.startsWith("twin_properties/")) await beforeValueWrite(key);
          return bucket.swap(key, value, expected);
        },
      };
      return wrapped;
    },
    // Every read goes through the hooks above.
    peekState: () => undefined,
    close: () => stores.close(),
  };
}

/** A hook that holds every caller until released; `reached` resolves when the first caller arrives. */
function stallPoint() {
  let release!: () => void;
  let arrived!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const reached = new Promise<void>((r) => (arrived = r));
  return {
    reached,
    release,
    hook: () => {
      arrived();
      return held;
    },
  };
}

/** `connection()`: another process's connection to the file's server. */
const it = natsTest();

describe("twin commits left unfinished", () => {
  /** What one process's writes go through: its stores and its writer, on its own connection. */
  const deps = (nc: NatsConnection, options: Partial<TwinsDeps> = {}): TwinsDeps => ({
    stores: kvTwinStores(nc),
    writer: twinWriter(nc),
    ...options,
  });
  let twin = 0;
  /** A twin of its own and two processes (connections) writing it. */
  const twoProcesses = async (connection: () => Promise<NatsConnection>) => {
    const address: TwinAddress = { organization: "acme", environment: "commit", twinId: `t${++twin}` };
    return { address, a: await connection(), b: await connection() };
  };
  /** A PUT of one value to group g of `address` through one process's `deps`; `ifMatch`, the group version it must find. */
  const putOne = (address: TwinAddress, deps: TwinsDeps, name: string, value: string, ifMatch?: number) =>
    putTwins({ ...address, group: "g", ...(ifMatch === undefined ? {} : { ifMatch }), twins: [{ name, value }] }, ctx, deps);
  /** Two processes writing a twin of their own, each through its own stores and writer. */
  const twoWriters = async (connection: () => Promise<NatsConnection>) => {
    const processes = await twoProcesses(connection);
    return { ...processes, depsA: deps(processes.a), depsB: deps(processes.b) };
  };
  const desired = async (nc: NatsConnection, address: TwinAddress, name: string) =>
    (await (await openBucket(nc, twinBucket(address))).get(twinKey("g", "desired", name)))?.string();

  it("twins - a claim whose writer's process is gone is finished at once by the next writer, not after the lease", async ({
    connection,
  }) => {
    const { address, a, b } = await twoProcesses(connection);
    const writerA = twinWriter(a);
    let release!: () => void;
    const stalled = new Promise<void>((r) => (release = r));
    // A claims the group, writes x, stops before z; then its connection goes (kill -9).
    const depsA: TwinsDeps = {
      stores: hooked(kvTwinStores(a), async (key) => void (key.endsWith("/z") && (await stalled))),
      writer: writerA,
    };
    const first = putTwins(
      {
        ...address,
        group: "g",
        twins: [
          { name: "x", value: "from A" },
          { name: "z", value: "from A" },
        ],
      },
      ctx,
      depsA,
    ).catch((e: Error) => e);
    await eventually(async () => (await desired(b, address, "x")) === "from A", { what: "A's first value" });
    await a.close();
    release();
    await first;

    // 20 attempts wait about 3.5 s in all, far less than the 30 s lease: B succeeds only by finishing A's claim at once.
    const depsB = deps(b, { attempts: 20 });
    const second = await putOne(address, depsB, "y", "from B");
    expect(second.status).toBe(200);
    // A's claim rolled forward, not dropped, and x (already written by A) not written again.
    expect(await desired(b, address, "z")).toBe("from A");
    const kv = await openBucket(b, twinBucket(address));
    const xs: string[] = [];
    for await (const e of await kv.history({ key: twinKey("g", "desired", "x") })) xs.push(e.string());
    expect(xs).toEqual(["from A"]);
    expect(await desired(b, address, "y")).toBe("from B");
  });

  it("twins - a claim whose writer is alive and busy is waited for, not taken over", async ({ connection }) => {
    const { address, a, b } = await twoProcesses(connection);
    const stall = stallPoint();
    const depsA: TwinsDeps = { stores: hooked(kvTwinStores(a), stall.hook), writer: twinWriter(a) };
    const first = putOne(address, depsA, "x", "from A");
    await stall.reached; // A holds its claim
    const depsB = deps(b, { attempts: 12 });
    await expect(putOne(address, depsB, "x", "from B")).rejects.toMatchObject({
      status: 409,
    });
    // Waiting stops at the request's deadline (the edge has answered 504 by then): 504, not the 409 of attempts run out.
    await expect(
      putTwins(
        { ...address, group: "g", twins: [{ name: "x", value: "from B" }] },
        { ...ctx, deadline: Date.now() + 300 },
        { ...depsB, attempts: 50 },
      ),
    ).rejects.toMatchObject({ status: 504 });
    stall.release();
    expect((await first).status).toBe(200);
    expect(await desired(b, address, "x")).toBe("from A");
  });

  it("twins - a writer that fails mid-commit finishes its own claim once NATS lets it, so other processes are not blocked for the lease", async ({
    connection,
  }) => {
    const { address, a, b } = await twoProcesses(connection);
    let failures = 1;
    const depsA: TwinsDeps = {
      stores: hooked(kvTwinStores(a), async () => {
        if (failures-- > 0) throw new Error("connection lost");
      }),
      writer: twinWriter(a),
      repairEveryMs: 100,
    };
    await expect(putOne(address, depsA, "x", "from A")).rejects.toThrow("connection lost");
    // B's process: A is alive (answers), so B may only wait; A's repair must finish the claim.
    // Generous attempts (each waits at most 200 ms): B returns as soon as A's repair lands, however busy the machine.
    const depsB = deps(b, { attempts: 100 });
    expect((await putOne(address, depsB, "y", "from B")).status).toBe(200);
    expect(await desired(b, address, "x")).toBe("from A");
  });

  it.for(["writing", "reading the revision it writes from"])(
    "twins - a writer stalled before %s that wakes after its claim was taken over cannot overwrite the later commit",
    async (where, { connection }) => {
      const { address, a, b } = await twoProcesses(connection);
      const stall = stallPoint();
      const none = async () => {};
      const depsA: TwinsDeps = {
        stores: where === "writing" ? hooked(kvTwinStores(a), stall.hook) : hooked(kvTwinStores(a), none, stall.hook),
        writer: twinWriter(a),
      };
      const first = putOne(address, depsA, "x", "old").catch((e: { status?: number }) => e);
      await stall.reached; // A holds its claim
      // B takes over by the lease (A is alive but stalled), then writes a newer value.
      const depsB = deps(b, { leaseMs: 300 });
      expect((await putOne(address, depsB, "y", "b")).status).toBe(200);
      expect(await desired(b, address, "x")).toBe("old"); // rolled forward
      expect((await putOne(address, depsB, "x", "new")).status).toBe(200);
      stall.release();
      expect(await first).toMatchObject({ status: 409 });
      expect(await desired(b, address, "x")).toBe("new");
    },
  );

  it("twins - writers in two processes taking turns on one key both succeed (a stale remembered revision is not a takeover)", async ({
    connection,
  }) => {
    const { address, a, depsA, depsB } = await twoWriters(connection);
    for (let round = 0; round < 3; round++) {
      for (const [name, deps] of [
        ["A", depsA],
        ["B", depsB],
      ] as const) {
        expect((await putOne(address, deps, "x", `${name}${round}`)).status).toBe(200);
      }
    }
    expect(await desired(a, address, "x")).toBe("B2");
  });

  it("twins - If-Match is judged against the group's stored version, not the one this process remembers from its own last commit", async ({
    connection,
  }) => {
    const { address, b, depsA, depsB } = await twoWriters(connection);
    const version = (res: { headers: Record<string, string> }) => Number(JSON.parse(res.headers.ETag!));
    const _first = await putOne(address, depsA, "x", "a");
    const second = await putOne(address, depsB, "x", "b");
    // A remembers the version of its own commit; the group has moved on since.
    const third = await putOne(address, depsA, "x", "c", version(second));
    expect(third.status).toBe(200);
    await putOne(address, depsB, "x", "d");
    await expect(putOne(address, depsA, "x", "stale", version(third))).rejects.toMatchObject({ status: 412 });
    expect(await desired(b, address, "x")).toBe("d");
  });
});
