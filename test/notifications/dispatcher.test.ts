/**
 * The dispatcher's hold on events (actors/notifications/dispatcher.ts): events it holds are renewed
 * while their round is stored, so a short ack wait does not hand them to another dispatcher; a
 * dispatcher that dies, or whose round is stuck, gives them back after the ack wait. Dispatchers run
 * here on their own connections with a journal whose batch writes the test holds back.
 */
import { describe, expect } from "vitest";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import type { JetStreamManager } from "@nats-io/jetstream";
import { startDispatcher, type Dispatcher, type DispatcherLimits, type DispatcherTiming } from "../../actors/notifications/dispatcher.ts";
import { CONSUMERS, STREAMS, ensureStreams, openJournal, type Journal } from "../../actors/notifications/journal.ts";
import { DispatcherProgress } from "../../actors/notifications/progress.ts";
import { SUBSCRIPTIONS_BUCKET, SubscriptionCache, SubscriptionStore } from "../../actors/notifications/store.ts";
import { createLogger } from "../../platform/logger.ts";
import { eventually, type TestNats } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { DELIVERY_ENV, publishOnNats, subscribe } from "./helpers.ts";

/** A two-second ack wait keeps the tests short (and survives a stalled event loop on a busy machine); renewal six times within it. */
const FAST: DispatcherTiming = { ackWaitMs: 2_000, renewEveryMs: 300, renewForMs: 20_000, ackFloorEveryMs: 300 };

type Probe = {
  nc: NatsConnection;
  dispatcher: Dispatcher;
  /** Event ids of every batch write this dispatcher began. */
  written: string[];
  /** Called before each batch write goes on; the write waits for what it returns. */
  gate: () => Promise<void>;
  /** Called before the dispatcher creates or updates its consumer (at start and on re-opening); it waits for what it returns. */
  opening: () => Promise<void>;
};

// Subscriptions through the edge; no dispatcher and no deliverer: the tests run their own dispatchers.
const it = derrickTest({ actors: ["system", "identity", "notifications"], env: DELIVERY_ENV }).extend(
  "dispatcherProbe",
  async ({ nats }, { onCleanup }) => {
    const probes: Probe[] = [];
    // Each test's dispatchers go with it (a stuck or killed one included): a dispatcher left running
    // would re-open the shared consumer in a later test with its own view of the ack floor.
    onCleanup(async () => {
      for (const p of probes.splice(0)) {
        p.gate = async () => undefined;
        await Promise.race([p.dispatcher.stop(), new Promise((r) => setTimeout(r, 2_000))]).catch(() => undefined);
        await p.nc.close().catch(() => undefined);
      }
    });
    return async (timing: DispatcherTiming, limits?: DispatcherLimits) => {
      const probe = await startProbe(nats, timing, limits);
      probes.push(probe);
      return probe;
    };
  },
);

async function startProbe(nats: TestNats, timing: DispatcherTiming, limits?: DispatcherLimits): Promise<Probe> {
  const nc = await connect({ servers: nats.url });
  const real = await openJournal(nc);
  const probe = { nc, written: [] as string[], gate: async () => undefined, opening: async () => undefined } as Probe;
  const journal: Journal = {
    ...real,
    async ensureConsumer(spec) {
      await probe.opening();
      return real.ensureConsumer(spec);
    },
    async enqueueBatch(batch, msgID) {
      probe.written.push(...batch.events.map((e) => e.event_id));
      await probe.gate();
      return real.enqueueBatch(batch, msgID);
    },
  };
  const cache = new SubscriptionCache(await SubscriptionStore.open(nc), createLogger("silent"));
  await cache.start();
  probe.dispatcher = await startDispatcher(
    journal,
    cache,
    await DispatcherProgress.open(nc),
    { delaysMs: [0], jitter: false },
    createLogger("silent"),
    timing,
    limits,
  );
  return probe;
}

describe("notifications dispatcher", () => {
  const never = () => new Promise<void>(() => undefined);
  const waitMs = (ms: number) => () => new Promise<void>((r) => setTimeout(r, ms));
  const consumerIdle = async (jsm: JetStreamManager) =>
    eventually(
      async () => {
        const info = await jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher);
        return info.num_pending === 0 && info.num_ack_pending === 0;
      },
      { what: "every event acked", timeoutMs: 15_000 },
    );

  it("notifications dispatcher - a subscription copy whose watch does not move fails freshAsOf after its wait instead of hanging the round", async ({
    derrick,
    nats,
  }) => {
    await subscribe(derrick, "MasterPlanChanged", { callback_uri: "http://127.0.0.1:9/fresh" });
    const nc = await connect({ servers: nats.url });
    try {
      // Never started: its watch stays at revision 0 while the bucket holds writes.
      const cache = new SubscriptionCache(await SubscriptionStore.open(nc), createLogger("silent"));
      await expect(cache.freshAsOf(Date.now(), 300)).rejects.toThrow(/did not reach revision/);
    } finally {
      await nc.close();
    }
  });

  it("notifications dispatcher - a bucket whose last message was removed from the stream does not keep the copy from being fresh (a barrier write is)", async ({
    nats,
    jsm,
  }) => {
    const nc = await connect({ servers: nats.url });
    try {
      const store = await SubscriptionStore.open(nc);
      // The bucket's last sequence now names a message no watch can deliver.
      const seq = await store.kv.put("probe.removed", "x");
      await jsm.streams.deleteMessage(`KV_${SUBSCRIPTIONS_BUCKET}`, seq);
      const cache = new SubscriptionCache(store, createLogger("silent"));
      // Waited 60 s for that revision and failed before; now the barrier comes in about a second.
      await cache.start();
      await cache.freshAsOf(Date.now());
      await cache.stop();
    } finally {
      await nc.close();
    }
  });

  it("notifications dispatcher - the events held at once are bounded by bytes as well as by count: large events wait on the server while the held ones are stored", {
    timeout: 30_000,
  }, async ({ derrick, jsm, dispatcherProbe }) => {
    // In a partition of its own: the other tests count every batch written for their types in opendes.
    await subscribe(derrick, "PublishData", { callback_uri: "http://127.0.0.1:9/bytes" }, "beta", "other");
    const budget = 1024 * 1024;
    const held = await dispatcherProbe(FAST, { inFlightBytes: budget });
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    held.gate = () => opened;
    // 30 events of ~100 KB: 3 MB, far under the 1024-event bound, three times the byte budget.
    const ids = Array.from({ length: 30 }, (_, i) => `bytes-${i}`);
    for (const id of ids) await publishOnNats(derrick, "PublishData", { data: "x".repeat(100_000) }, id, "other");
    await eventually(() => held.written.length > 0, { what: "the dispatcher holding the first events" });
    // Give it time to pull more if it would; then at most the budget's worth (10 events of 100 KB) is held.
    await new Promise((r) => setTimeout(r, 1_000));
    const info = await jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher);
    expect(info.num_ack_pending).toBeLessThanOrEqual(Math.floor(budget / 100_000));
    expect(info.num_pending).toBeGreaterThan(0);
    open();
    await eventually(() => ids.every((id) => held.written.includes(id)), {
      what: "every event dispatched once the writes go on",
      timeoutMs: 15_000,
    });
    await consumerIdle(jsm);
    await held.dispatcher.stop();
  });

  it("notifications dispatcher - events held longer than the ack wait are renewed: no other dispatcher takes them", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "MasterPlanChanged", { callback_uri: "http://127.0.0.1:9/renewed" });
    const slow = await dispatcherProbe(FAST);
    slow.gate = waitMs(5_000);
    const ids = ["renew-1", "renew-2", "renew-3"];
    for (const id of ids) await publishOnNats(derrick, "MasterPlanChanged", { data: id }, id);
    await eventually(() => ids.every((id) => slow.written.includes(id)), { what: "the slow dispatcher holding the events" });
    const other = await dispatcherProbe(FAST);
    await consumerIdle(jsm);
    // Two and a half ack waits passed while the slow one held them; a redelivery would have reached the other.
    expect(other.written.filter((id) => ids.includes(id))).toEqual([]);
    await slow.dispatcher.stop();
    await other.dispatcher.stop();
  });

  it("notifications dispatcher - a dispatcher killed while holding events gives them back after the ack wait", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "PlanShared", { callback_uri: "http://127.0.0.1:9/killed" });
    const doomed = await dispatcherProbe(FAST);
    doomed.gate = never;
    const ids = ["killed-1", "killed-2"];
    for (const id of ids) await publishOnNats(derrick, "PlanShared", { data: id }, id);
    await eventually(() => ids.every((id) => doomed.written.includes(id)), { what: "the doomed dispatcher holding the events" });
    await doomed.nc.close();
    const rescuer = await dispatcherProbe(FAST);
    await eventually(() => ids.every((id) => rescuer.written.includes(id)), {
      what: "the events redelivered to another dispatcher",
      timeoutMs: 10_000,
    });
    await consumerIdle(jsm);
    await rescuer.dispatcher.stop();
  });

  it("notifications dispatcher - a stuck round is renewed only for a while: its events then go to another dispatcher", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "ProjectCreated", { callback_uri: "http://127.0.0.1:9/stuck" });
    const stuck = await dispatcherProbe({ ...FAST, renewForMs: 3_000 });
    stuck.gate = never;
    const ids = ["stuck-1", "stuck-2"];
    for (const id of ids) await publishOnNats(derrick, "ProjectCreated", { data: id }, id);
    await eventually(() => ids.every((id) => stuck.written.includes(id)), { what: "the stuck dispatcher holding the events" });
    const takenAt = Date.now();
    const other = await dispatcherProbe(FAST);
    // Not before the renewal window (3 s) has passed: still nothing 2 s after the events were taken
    // (renewed until 3 s, then one ack wait) …
    await new Promise((r) => setTimeout(r, Math.max(0, takenAt + 2_000 - Date.now())));
    expect(other.written.filter((id) => ids.includes(id))).toEqual([]);
    // … and soon after it, plus one ack wait.
    await eventually(() => ids.every((id) => other.written.includes(id)), {
      what: "the stuck round's events at another dispatcher",
      timeoutMs: 12_000,
    });
    await consumerIdle(jsm);
    // The stuck one pulled nothing more: its own redeliveries went elsewhere.
    expect(stuck.written.filter((id) => ids.includes(id))).toEqual(ids);
    await other.dispatcher.stop();
  });

  it("notifications dispatcher - a consumer deleted on the server is created again after the events already dispatched: those held or published since are dispatched, earlier ones not again", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "ReviewStateChanged", { callback_uri: "http://127.0.0.1:9/deleted" });
    const probe = await dispatcherProbe(FAST);
    const dispatchedSeq = await publishOnNats(derrick, "ReviewStateChanged", { data: "dispatched" }, "deleted-dispatched");
    await eventually(() => probe.dispatcher.stats.ackFloor >= dispatchedSeq, {
      what: "the dispatched event acked, and the ack floor read",
    });
    // The next event's first write waits: it is held, not acked, when the consumer goes.
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    probe.gate = () => {
      probe.gate = async () => undefined;
      return held;
    };
    await publishOnNats(derrick, "ReviewStateChanged", { data: "held" }, "deleted-held");
    await eventually(() => probe.written.includes("deleted-held"), { what: "the event held" });

    expect(await jsm.consumers.delete(STREAMS.events, CONSUMERS.dispatcher)).toBe(true);
    await publishOnNats(derrick, "ReviewStateChanged", { data: "after" }, "deleted-after");
    // The held event comes back through the new consumer, the one published since arrives, and no
    // event dispatched before (this file's earlier ones included) is dispatched again.
    await eventually(() => probe.written.includes("deleted-after") && probe.written.filter((id) => id === "deleted-held").length === 2, {
      what: "the held and the new event through the new consumer",
    });
    await consumerIdle(jsm);
    expect(probe.written.toSorted()).toEqual(["deleted-after", "deleted-dispatched", "deleted-held", "deleted-held"]);
    const info = await jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher);
    expect(info.config).toMatchObject({ ack_wait: FAST.ackWaitMs * 1e6, max_ack_pending: 10_000, opt_start_seq: dispatchedSeq + 1 });
    release();
    await probe.dispatcher.stop();
  });

  it("notifications dispatcher - on an EVENTS stream created again, a consumer created again starts at the new stream's first event, not after the old one's ack floor", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "PublishData", { callback_uri: "http://127.0.0.1:9/recreated" });
    const probe = await dispatcherProbe(FAST);
    const oldSeq = await publishOnNats(derrick, "PublishData", { data: "old stream" }, "recreated-old");
    await eventually(() => probe.dispatcher.stats.ackFloor >= oldSeq, { what: "the event acked, and the ack floor read" });
    // The dispatcher's re-opening waits while EVENTS is deleted, created again (as by an actor
    // starting) and given an event: its sequence (1) is below the old stream's ack floor.
    let release: () => void = () => undefined;
    const opening = new Promise<void>((r) => (release = r));
    probe.opening = () => opening;
    expect(await jsm.streams.delete(STREAMS.events)).toBe(true);
    await ensureStreams(jsm);
    expect(await publishOnNats(derrick, "PublishData", { data: "new stream" }, "recreated-new")).toBe(1);
    release();
    await eventually(() => probe.written.includes("recreated-new"), { what: "the new stream's event dispatched" });
    await consumerIdle(jsm);
    expect(probe.written).toEqual(["recreated-old", "recreated-new"]);
    await probe.dispatcher.stop();
  });
  it("notifications dispatcher - EVENTS created again while a re-opening is between its stream check and the consumer's creation: the new stream's events are not skipped", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "PublishData", { callback_uri: "http://127.0.0.1:9/raced" });
    const probe = await dispatcherProbe(FAST);
    let oldSeq = 0;
    for (let i = 0; i < 3; i++) oldSeq = await publishOnNats(derrick, "PublishData", { data: i }, `raced-old-${i}`);
    await eventually(() => probe.dispatcher.stats.ackFloor >= oldSeq, { what: "the events acked, and the ack floor read" });
    // The consumer goes: the next pull fails, the re-opening reads EVENTS (still the old stream, so
    // it would resume after the old floor) and waits here, at the consumer's creation.
    let release: () => void = () => undefined;
    let entered: () => void = () => undefined;
    const reached = new Promise<void>((r) => (entered = r));
    const held = new Promise<void>((r) => (release = r));
    probe.opening = () => (entered(), held);
    await jsm.consumers.delete(STREAMS.events, CONSUMERS.dispatcher);
    await reached;
    // Meanwhile EVENTS is deleted, created again and written: sequences 1 and 2, below the old floor.
    expect(await jsm.streams.delete(STREAMS.events)).toBe(true);
    await ensureStreams(jsm);
    expect(await publishOnNats(derrick, "PublishData", { data: "new" }, "raced-new-1")).toBe(1);
    expect(await publishOnNats(derrick, "PublishData", { data: "new" }, "raced-new-2")).toBe(2);
    probe.opening = async () => undefined;
    release();
    await eventually(() => probe.written.includes("raced-new-1") && probe.written.includes("raced-new-2"), {
      what: "the new stream's events dispatched",
    });
    await consumerIdle(jsm);
    expect(probe.written).toEqual(["raced-old-0", "raced-old-1", "raced-old-2", "raced-new-1", "raced-new-2"]);
    await probe.dispatcher.stop();
  });
  it("notifications dispatcher - a dispatcher that starts while its consumer is missing resumes after the stored progress: events dispatched before the restart are not dispatched again", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "PlanShared", { callback_uri: "http://127.0.0.1:9/restarted" });
    const first = await dispatcherProbe(FAST);
    let lastSeq = 0;
    for (let i = 0; i < 3; i++) lastSeq = await publishOnNats(derrick, "PlanShared", { data: i }, `restarted-old-${i}`);
    const progress = await DispatcherProgress.open(derrick.nc);
    await eventually(async () => ((await progress.read())?.ack_floor ?? 0) >= lastSeq, { what: "the dispatched events' ack floor stored" });
    await first.dispatcher.stop();
    // The consumer goes while no dispatcher runs (as by an operator, or a stream restored from backup).
    expect(await jsm.consumers.delete(STREAMS.events, CONSUMERS.dispatcher)).toBe(true);
    const second = await dispatcherProbe(FAST);
    expect(second.dispatcher.stats.ackFloor).toBe(lastSeq);
    await publishOnNats(derrick, "PlanShared", { data: "new" }, "restarted-new");
    await eventually(() => second.written.includes("restarted-new"), { what: "the new event dispatched" });
    await consumerIdle(jsm);
    // Not this file's earlier events, nor the three dispatched before the restart: only the new one.
    expect(second.written).toEqual(["restarted-new"]);
    expect((await jsm.consumers.info(STREAMS.events, CONSUMERS.dispatcher)).config.opt_start_seq).toBe(lastSeq + 1);
    await second.dispatcher.stop();
  });

  it("notifications dispatcher - a dispatcher that starts after EVENTS was created again dispatches the new stream's events from its first one: the old stream's stored progress is ignored", async ({
    derrick,
    jsm,
    dispatcherProbe,
  }) => {
    await subscribe(derrick, "ProjectCreated", { callback_uri: "http://127.0.0.1:9/restarted-recreated" });
    const first = await dispatcherProbe(FAST);
    let oldSeq = 0;
    for (let i = 0; i < 4; i++) oldSeq = await publishOnNats(derrick, "ProjectCreated", { data: i }, `restarted-recreated-old-${i}`);
    const oldStream = (await jsm.streams.info(STREAMS.events)).created;
    const progress = await DispatcherProgress.open(derrick.nc);
    await eventually(
      async () => {
        const stored = await progress.read();
        return stored?.events_created === oldStream && stored.ack_floor >= oldSeq;
      },
      { what: "the old stream's ack floor stored" },
    );
    await first.dispatcher.stop();
    // While no dispatcher runs, EVENTS is deleted, created again (as by an actor starting) and written:
    // sequences 1 and 2, below the old stream's stored floor.
    expect(oldSeq).toBeGreaterThan(2);
    expect(await jsm.streams.delete(STREAMS.events)).toBe(true);
    await ensureStreams(jsm);
    expect(await publishOnNats(derrick, "ProjectCreated", { data: "new" }, "restarted-recreated-new-1")).toBe(1);
    expect(await publishOnNats(derrick, "ProjectCreated", { data: "new" }, "restarted-recreated-new-2")).toBe(2);
    const second = await dispatcherProbe(FAST);
    // A consumer made on a new stream: on a machine busy with other work this took over 10 s once.
    await eventually(() => second.written.length >= 2, { what: "the new stream's events dispatched", timeoutMs: 20_000 });
    await consumerIdle(jsm);
    expect(second.written).toEqual(["restarted-recreated-new-1", "restarted-recreated-new-2"]);
    // The progress now belongs to the new stream.
    const newStream = (await jsm.streams.info(STREAMS.events)).created;
    await eventually(
      async () => {
        const stored = await progress.read();
        return stored?.events_created === newStream && stored.ack_floor === 2;
      },
      { what: "the new stream's ack floor stored" },
    );
    await second.dispatcher.stop();
  });
});
