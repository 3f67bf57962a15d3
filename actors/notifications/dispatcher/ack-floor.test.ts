import { describe, expect, it } from "vitest";
import { afterOpening, progressToStore, resumeFloor, type FloorState } from "./ack-floor.ts";

const stream = "2026-11-20T10:00:00.123456789Z";
const recreated = "2026-11-21T08:30:00.5Z";
const known = (ackFloor: number, storedFloor = 0, on = stream): FloorState => ({ stream: on, ackFloor, storedFloor });

describe("notifications dispatcher: where its consumer starts", () => {
  it("notifications ack floor - a consumer created again starts after the higher of the floor read here and the stored one, each only on its own stream", () => {
    const events = { created: stream, lastSeq: 100 };
    expect(resumeFloor(events, known(40), undefined)).toEqual({ floor: 40, ackFloor: 40 });
    expect(resumeFloor(events, known(40), { events_created: stream, ack_floor: 60 })).toEqual({ floor: 60, ackFloor: 40 });
    expect(resumeFloor(events, known(40), { events_created: recreated, ack_floor: 60 })).toEqual({ floor: 40, ackFloor: 40 });
    // Read on another stream (or never): only the stored floor of this one counts.
    expect(resumeFloor(events, known(40, 0, recreated), { events_created: stream, ack_floor: 30 })).toEqual({ floor: 30, ackFloor: 40 });
    expect(resumeFloor(events, known(0, 0, ""), undefined)).toEqual({ floor: 0, ackFloor: 0 });
    // No EVENTS: nothing to resume.
    expect(resumeFloor(undefined, known(40), undefined)).toEqual({ floor: 0, ackFloor: 40 });
  });

  it("notifications ack floor - a floor past the stream's last event (messages lost under the same creation time) becomes its last event", () => {
    expect(resumeFloor({ created: stream, lastSeq: 50 }, known(80), { events_created: stream, ack_floor: 90 })).toEqual({
      floor: 50,
      ackFloor: 50,
      pastLast: 90,
    });
  });

  it("notifications ack floor - after opening, floors of another stream start over; on the same one the floor started after is dispatched", () => {
    const stored = { events_created: stream, ack_floor: 60 };
    expect(afterOpening(known(40, 30), { before: stream, after: stream, floor: 60, stored })).toEqual(known(60, 60));
    // EVENTS created again while opening: nothing is known of the new stream.
    expect(afterOpening(known(40, 30), { before: stream, after: recreated, floor: 60, stored })).toEqual(known(0, 0, recreated));
    // The first opening: the stream becomes known.
    expect(afterOpening(known(0, 0, ""), { before: stream, after: stream, floor: 0, stored: undefined })).toEqual(known(0, 0));
    expect(afterOpening(known(0, 0, ""), { before: undefined, after: undefined, floor: 0, stored: undefined })).toEqual(known(0, 0, ""));
  });

  it("notifications ack floor - the floor is stored only when it moved past what is known stored, on a known stream", () => {
    expect(progressToStore(known(50, 40))).toEqual({ events_created: stream, ack_floor: 50 });
    expect(progressToStore(known(50, 50))).toBeUndefined();
    expect(progressToStore(known(50, 0, ""))).toBeUndefined();
  });
});
