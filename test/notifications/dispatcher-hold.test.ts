/**
 * The dispatcher's hold on events (actors/notifications/dispatcher.ts): everything it holds, in a
 * round or still waiting for a slot, is renewed while it works, and given up after the longest hold
 * so another dispatcher takes it. Short timings here; production waits 10 s / 3 s / 60 s.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import type { NatsConnection } from "@nats-io/nats-core";
import { jetstreamManager } from "@nats-io/jetstream";
import { startDispatcher, type Dispatcher, type DispatcherTiming } from "../../actors/notifications/dispatcher.ts";
import { CONSUMERS, STREAMS, openJournal, type Journal } from "../../actors/notifications/journal.ts";
import { createLogger } from "../../platform/logger.ts";
import { eventually, startTestNats, type TestNats } from "../harness/index.ts";

const schedule = { delaysMs: [0, 1_000], jitter: false };
const log = createLogger("silent");

/** Gates still closed: opened before the dispatchers stop (a stop waits for its rounds). */
const gates: Array<() => void> = [];
/** A subscription cache whose freshness waits for `open()`; nobody is subscribed. */
function gatedCache() {
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  gates.push(() => open());
  return { cache: { freshAsOf: () => gate, subscribersOf: () => [] }, open: () => open() };
}
const readyCache = { freshAsOf: async () => undefined, subscribersOf: () => [] };

describe("dispatcher hold", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let journal: Journal;
  const started: Dispatcher[] = [];
  beforeEach(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    journal = await openJournal(nc);
  });
  afterEach(async () => {
    for (const open of gates.splice(0)) open();
    for (const d of started.splice(0)) await d.stop();
    await nc?.close();
    await nats?.cleanup();
  });
  const start = async (cache: Parameters<typeof startDispatcher>[1], timing: DispatcherTiming) => {
    const d = await startDispatcher(journal, cache, schedule, log, timing);
    started.push(d);
    return d;
  };
  const publish = (n: number) => Promise.all(Array.from({ length: n }, (_, i) => journal.publishEvent("opendes", "PlanShared", `e-${i}`, { data: i })));
  const consumerInfo = async () => (await jetstreamManager(nc)).consumers.info(STREAMS.events, CONSUMERS.dispatcher);

  it("dispatcher - events held past the ack wait, in slow rounds and waiting behind them for a slot, are not redelivered", async () => {
    const { cache, open } = gatedCache();
    const d = await start(cache, { ackWaitMs: 1_000, renewEveryMs: 250, maxHoldMs: 30_000 });
    // More than the 1024 slots: the rest wait for one while the rounds hang on the cache.
    await publish(1_100);
    await eventually(async () => (await consumerInfo()).num_ack_pending === 1_100, { what: "every event held" });
    await new Promise((r) => setTimeout(r, 2_500));
    open();
    await eventually(() => d.stats.events === 1_100, { timeoutMs: 10_000, what: "every event dispatched" });
    const info = await consumerInfo();
    expect(info.num_redelivered).toBe(0);
    expect(info.num_ack_pending).toBe(0);
    expect(d.stats.events).toBe(1_100);
  });

  it("dispatcher - a round that never ends gives its events up after the longest hold: another dispatcher takes them", async () => {
    const stuck = gatedCache();
    await start(stuck.cache, { ackWaitMs: 1_000, renewEveryMs: 250, maxHoldMs: 1_500 });
    await publish(5);
    await eventually(async () => (await consumerInfo()).num_ack_pending === 5, { what: "the events held by the stuck dispatcher" });
    const rescuer = await start(readyCache, { ackWaitMs: 1_000, renewEveryMs: 250, maxHoldMs: 1_500 });
    await eventually(() => rescuer.stats.events === 5, { timeoutMs: 20_000, what: "the events dispatched by the other one" });
    stuck.open();
  });
});
