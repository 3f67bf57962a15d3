/**
 * The dispatcher's progress in KV (actors/notifications/progress.ts), written by several dispatchers
 * at once: a floor only moves forward on one EVENTS stream, a lower one written late never wins, a
 * floor of another stream replaces it only when that stream is EVENTS now, and a bucket deleted on
 * the server reads as nothing stored and is created again by the next write.
 */
import { describe, expect } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { DispatcherProgress, PROGRESS_BUCKET } from "../../actors/notifications/progress.ts";
import { natsTest } from "../harness/fixture.ts";

const OLD = "2026-11-20T10:00:00.123456789Z";
const NEW = "2026-11-21T08:30:00.5Z";
/** EVENTS as it exists now, as the dispatcher would answer it. */
let events = OLD;
const currentEvents = async () => events;

/** Two connections: the progress of dispatchers in two processes. */
const it = natsTest().extend("connections", { scope: "file" }, async ({ connection }) => Promise.all([connection(), connection()]));

describe("notifications dispatcher progress", () => {
  it("notifications - dispatchers writing their floors at once leave the highest, and a lower floor written late does not replace it", async ({
    connections,
  }) => {
    const [a, b] = await Promise.all(connections.map((nc) => DispatcherProgress.open(nc)));
    expect(await a!.read()).toBeUndefined();
    // Interleaved, out of order, from two connections: every write races the others' compare-and-set.
    const floors = [3, 17, 9, 40, 12, 39, 1, 25];
    await Promise.all(floors.map((floor, i) => (i % 2 ? a! : b!).advance({ events_created: OLD, ack_floor: floor }, currentEvents)));
    expect(await b!.read()).toEqual({ events_created: OLD, ack_floor: 40 });
    expect(await a!.advance({ events_created: OLD, ack_floor: 20 }, currentEvents)).toEqual({ events_created: OLD, ack_floor: 40 });
    expect(await b!.read()).toEqual({ events_created: OLD, ack_floor: 40 });
  });

  it("notifications - the floor of an EVENTS stream created again replaces the old stream's, and the old one's does not come back", async ({
    connections,
  }) => {
    const [a, b] = await Promise.all(connections.map((nc) => DispatcherProgress.open(nc)));
    await a!.advance({ events_created: OLD, ack_floor: 50 }, currentEvents);
    // Not before the new stream exists: a floor of a stream that is not EVENTS now does not replace the stored one.
    expect(await b!.advance({ events_created: NEW, ack_floor: 2 }, currentEvents)).toEqual({ events_created: OLD, ack_floor: 50 });
    events = NEW;
    expect(await b!.advance({ events_created: NEW, ack_floor: 2 }, currentEvents)).toEqual({ events_created: NEW, ack_floor: 2 });
    // A dispatcher that has not noticed the new stream yet writes the old one's floor late.
    expect(await a!.advance({ events_created: OLD, ack_floor: 60 }, currentEvents)).toEqual({ events_created: NEW, ack_floor: 2 });
    expect(await a!.read()).toEqual({ events_created: NEW, ack_floor: 2 });
  });

  it("notifications - the progress bucket deleted on the server reads as nothing stored, and the next write creates it again", async ({
    connections,
  }) => {
    events = NEW;
    const progress = await DispatcherProgress.open(connections[0]!);
    await progress.advance({ events_created: NEW, ack_floor: 8 }, currentEvents);
    const jsm = await jetstreamManager(connections[1]!);
    expect(await jsm.streams.delete(`KV_${PROGRESS_BUCKET}`)).toBe(true);
    expect(await progress.read()).toBeUndefined();
    expect(await progress.advance({ events_created: NEW, ack_floor: 9 }, currentEvents)).toEqual({ events_created: NEW, ack_floor: 9 });
    expect(await (await DispatcherProgress.open(connections[1]!)).read()).toEqual({ events_created: NEW, ack_floor: 9 });
    expect((await jsm.streams.info(`KV_${PROGRESS_BUCKET}`)).config.max_msgs_per_subject).toBe(1);
  });
});
