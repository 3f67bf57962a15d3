/**
 * The notifications actors' durable consumers deleted on the server (by an operator, a tool, a
 * stream restored from backup) while the actors run: each is created again, with the configuration
 * the actor starts it with, and events go on reaching their callbacks. Deleted while no dispatcher
 * runs, the dispatcher's consumer is created again after the stored progress.
 */
import { afterAll, describe, expect } from "vitest";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { eventually, startDerrick, type TestDerrick, type TestNats } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { EventAccepted } from "../../subjects/notifications.ts";
import { CONSUMERS, STREAMS } from "../../actors/notifications/journal.ts";
import { DISPATCHER_TIMING } from "../../actors/notifications/dispatcher.ts";
import { DispatcherProgress } from "../../actors/notifications/progress.ts";
import { subjects } from "../../subjects/index.ts";
import { receiverPool, type Receiver } from "./receiver.ts";
import { DELIVERY_ACTORS, DELIVERY_ENV, deliveryTest, publish, publishOnNats, publishedId, subscribe } from "./helpers.ts";

/** DELIVERY_ENV's 1 s delivery timeout plus the deliverer's 3 s for recording, in nanoseconds. */
const DELIVERER_ACK_WAIT_NS = 4_000 * 1e6;

const consumersDeleted = deliveryTest();
// A server of its own: the stream's sequences start at 1 there, as a young stream's do.
const eventsDeleted = deliveryTest();
const dispatcherStopped = natsTest();

describe("notifications consumers deleted on the server", () => {
  const it = consumersDeleted;
  const publishId = async (derrick: TestDerrick, type: string, data: string) => publishedId(derrick, type, { data });

  /**
   * Deletes `consumer` of `stream` between two events of `type`: both reach the callback, and the
   * consumer is back with the configuration the actor starts it with.
   */
  const deliveredAcrossDeletion = async (
    { derrick, jsm, receiver: r }: { derrick: TestDerrick; jsm: JetStreamManager; receiver: Receiver },
    type: string,
    stream: string,
    consumer: string,
    config: { filter_subject: string; ack_wait: number },
  ) => {
    await subscribe(derrick, type, { callback_uri: r.url });
    const before = await publishId(derrick, type, "before the deletion");
    await eventually(() => r.received.some((x) => x.id === before), { what: "the first event delivered" });

    expect(await jsm.consumers.delete(stream, consumer)).toBe(true);
    const after = await publishId(derrick, type, "after the deletion");
    await eventually(() => r.received.some((x) => x.id === after), { what: "the event published after the deletion delivered" });
    expect((await jsm.consumers.info(stream, consumer)).config).toMatchObject({ durable_name: consumer, ...config });
  };

  it("notifications - an event published after the deliverer's consumer was deleted on the server still reaches its callback", {
    timeout: 15_000,
  }, async ({ derrick, jsm, receiver }) => {
    await deliveredAcrossDeletion({ derrick, jsm, receiver }, "PlanShared", STREAMS.deliveries, CONSUMERS.deliverer, {
      filter_subject: subjects.notifications.allDeliveries(),
      ack_wait: DELIVERER_ACK_WAIT_NS,
    });
  });

  it("notifications - a retry booked after the deliverer's retry consumer was deleted on the server is still made", {
    timeout: 15_000,
  }, async ({ derrick, jsm, receiver: r }) => {
    // The first attempt of each event fails: its delivery goes on through the retry lane.
    r.respond = (req) => new Response(null, { status: r.received.filter((x) => x.id === req.id).length === 1 ? 500 : 204 });
    await subscribe(derrick, "ReviewStateChanged", { callback_uri: r.url });

    expect(await jsm.consumers.delete(STREAMS.deliveries, CONSUMERS.retries)).toBe(true);
    const id = await publishId(derrick, "ReviewStateChanged", "retried after the deletion");
    await eventually(() => r.received.filter((x) => x.id === id).length >= 2, { what: "the retry made" });
    const info = await jsm.consumers.info(STREAMS.deliveries, CONSUMERS.retries);
    expect(info.config).toMatchObject({
      durable_name: CONSUMERS.retries,
      filter_subject: subjects.notifications.allRetries(),
      ack_wait: DELIVERER_ACK_WAIT_NS,
    });
    await eventually(async () => (await jsm.streams.info(STREAMS.deliveries)).state.messages === 0, { what: "DELIVERIES to drain" });
  });

  it("notifications - an event published after DELIVERIES itself was deleted on the server still reaches its callback", {
    timeout: 15_000,
  }, async ({ derrick, jsm, receiver: r }) => {
    await subscribe(derrick, "PublishData", { callback_uri: r.url });
    // The deliverer's two consumers go with the stream: both are created again, with the stream.
    expect(await jsm.streams.delete(STREAMS.deliveries)).toBe(true);
    const id = await publishId(derrick, "PublishData", "after the stream's deletion");
    await eventually(() => r.received.some((x) => x.id === id), { what: "the event delivered" });
    for (const name of [CONSUMERS.deliverer, CONSUMERS.retries])
      expect((await jsm.consumers.info(STREAMS.deliveries, name)).config.ack_wait).toBe(DELIVERER_ACK_WAIT_NS);
  });

  it("notifications - an event published after the dispatcher's consumer was deleted on the server still reaches its callback", {
    timeout: 15_000,
  }, async ({ derrick, jsm, receiver }) => {
    await deliveredAcrossDeletion({ derrick, jsm, receiver }, "ProjectCreated", STREAMS.events, CONSUMERS.dispatcher, {
      filter_subject: subjects.notifications.allEvents(),
      ack_wait: DISPATCHER_TIMING.ackWaitMs * 1e6,
    });
  });
});

describe("notifications EVENTS deleted on the server", () => {
  const it = eventsDeleted;

  it("notifications - an event published after EVENTS itself was deleted on the server still reaches its callback", {
    timeout: 15_000,
  }, async ({ derrick, receiver: r }) => {
    await subscribe(derrick, "MasterPlanChanged", { callback_uri: r.url });
    const before = await publishedId(derrick, "MasterPlanChanged", { data: "before the stream's deletion" });
    await eventually(() => r.received.some((x) => x.id === before), { what: "the first event delivered" });

    const jsm = await jetstreamManager(derrick.nc);
    expect(await jsm.streams.delete(STREAMS.events)).toBe(true);
    // Publishing fails until the dispatcher has created EVENTS again. The new stream's first event
    // has the sequence the deleted one's first had, dispatched to the same subscription moments ago.
    const after = await eventually(
      async () => {
        const res = await publish(derrick, "MasterPlanChanged", { data: "after the stream's deletion" });
        return res.status === 202 ? (await json<EventAccepted>(res)).event_id : undefined;
      },
      { what: "EVENTS created again", intervalMs: 100 },
    );
    await eventually(() => r.received.some((x) => x.id === after), { what: "the event published after the deletion delivered" });
    expect((await jsm.streams.info(STREAMS.events)).state.first_seq).toBe(1);
  });

  it("notifications - on an EVENTS stream created again, an event at a sequence the old stream used is delivered with its own content, not the old event's", {
    timeout: 15_000,
  }, async ({ derrick, receivers }) => {
    const [theirs, ours] = [receivers.start(), receivers.start()];
    await subscribe(derrick, "PlanShared", { callback_uri: theirs.url }, "beta", "other");
    await subscribe(derrick, "PlanShared", { callback_uri: ours.url }, "beta", "opendes");
    // Larger than what a batch carries: the deliverer reads them from EVENTS by sequence.
    const large = (what: string) => ({ data: { what, padding: "x".repeat(8 * 1024) } });
    const jsm = await jetstreamManager(derrick.nc);
    expect((await publish(derrick, "ReviewStateChanged", { data: "filler" })).status).toBe(202);
    expect((await publish(derrick, "PlanShared", large("other's secret"), "other")).status).toBe(202);
    const oldSeq = (await jsm.streams.info(STREAMS.events)).state.last_seq;
    // Published on NATS without an id, so its id is evt_<sequence>: the new stream's event at that sequence has the same id.
    await publishOnNats(derrick, "PlanShared", { data: { what: "other's small secret" } }, undefined, "other");
    await eventually(() => theirs.received.length === 2, { what: "the old stream's events delivered" });

    expect(await jsm.streams.delete(STREAMS.events)).toBe(true);
    await eventually(async () => (await publish(derrick, "ReviewStateChanged", { data: "filler" })).status === 202, {
      what: "EVENTS created again",
      intervalMs: 100,
    });
    while ((await jsm.streams.info(STREAMS.events)).state.last_seq < oldSeq - 1)
      await publish(derrick, "ReviewStateChanged", { data: "filler" });
    const eventId = await publishedId(derrick, "PlanShared", large("ours"), "opendes");
    expect((await jsm.streams.info(STREAMS.events)).state.last_seq).toBe(oldSeq);

    const smallSeq = await publishOnNats(derrick, "PlanShared", { data: { what: "our small one" } }, undefined, "opendes");
    expect(smallSeq).toBe(oldSeq + 1);

    const got = await eventually(() => ours.received.find((x) => x.id === eventId), { what: "the new stream's event delivered" });
    expect(JSON.parse(got.body)).toMatchObject({ id: eventId, source: "/partitions/opendes", data: { what: "ours" } });
    const small = await eventually(() => ours.received.find((x) => x.id === `evt_${smallSeq}`), {
      what: "the new stream's small event delivered",
    });
    expect(JSON.parse(small.body)).toMatchObject({ source: "/partitions/opendes", data: { what: "our small one" } });
  });
});

describe("notifications dispatcher consumer deleted while no dispatcher runs", () => {
  const it = dispatcherStopped;
  const receivers = receiverPool();
  const started: TestDerrick[] = [];
  const start = async (nats: TestNats) => {
    const derrick = await startDerrick(nats, { actors: [...DELIVERY_ACTORS], env: DELIVERY_ENV });
    started.push(derrick);
    return derrick;
  };
  afterAll(async () => {
    receivers.stopAll();
    for (const derrick of started) await derrick.cleanup().catch(() => undefined);
  });

  it("notifications - a dispatcher restarted after its consumer was deleted delivers the events published since, not the earlier ones again", {
    timeout: 40_000,
  }, async ({ nats, nc }) => {
    const r = receivers.start();
    const first = await start(nats);
    await subscribe(first, "PlanShared", { callback_uri: r.url });
    const publishId = async (derrick: TestDerrick, data: string) => publishedId(derrick, "PlanShared", { data });
    const before: string[] = [];
    for (let i = 0; i < 3; i++) before.push(await publishId(first, `before ${i}`));
    await eventually(() => before.every((id) => r.received.some((x) => x.id === id)), { what: "the first events delivered" });
    const jsm = await jetstreamManager(first.nc);
    const lastSeq = (await jsm.streams.info(STREAMS.events)).state.last_seq;
    // Stored at the dispatcher's floor reads (every 5 s) and when it stops.
    const progress = await DispatcherProgress.open(first.nc);
    await eventually(async () => ((await progress.read())?.ack_floor ?? 0) >= lastSeq, {
      what: "the dispatcher's progress stored",
      timeoutMs: 20_000,
    });
    await first.cleanup();

    // While nothing runs: the consumer goes, and an event is published (as by another service).
    expect(await (await jetstreamManager(nc)).consumers.delete(STREAMS.events, CONSUMERS.dispatcher)).toBe(true);
    await jetstream(nc).publish(subjects.events("opendes", "PlanShared"), JSON.stringify({ data: "while stopped" }), {
      msgID: "evt_while_stopped",
    });
    const second = await start(nats);
    const after = await publishId(second, "after the restart");
    await eventually(() => r.received.some((x) => x.id === after) && r.received.some((x) => x.id === "evt_while_stopped"), {
      what: "the events published since delivered",
    });
    await eventually(
      async () => {
        const info = await (await jetstreamManager(second.nc)).consumers.info(STREAMS.events, CONSUMERS.dispatcher);
        return info.num_pending === 0 && info.num_ack_pending === 0;
      },
      { what: "every event dispatched" },
    );
    await eventually(async () => (await (await jetstreamManager(second.nc)).streams.info(STREAMS.deliveries)).state.messages === 0, {
      what: "DELIVERIES to drain",
    });
    // Each event once: before the fix the restarted dispatcher sent the first three again.
    expect(r.received.map((x) => x.id).toSorted()).toEqual([...before, "evt_while_stopped", after].toSorted());
  });
});
