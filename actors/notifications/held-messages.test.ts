import { describe, expect, it } from "vitest";
import { ManualClock } from "../../platform/clock.ts";
import { HeldMessages, renewalPeriod } from "./held-messages.ts";

const message = () => {
  const renewed: number[] = [];
  return { renewed, working: () => void renewed.push(0) };
};

describe("notifications held messages", () => {
  it("notifications held messages - held messages are renewed twice per ack wait until released; a released one no more", async () => {
    const clock = new ManualClock();
    const held = new HeldMessages<{ working(): void }>(clock);
    const at: number[] = [];
    const msg = { working: () => void at.push(clock.now()) };
    const ackWait = 5_000;
    const stop = clock.every(renewalPeriod(ackWait), () => held.renew());
    held.hold(msg);
    await clock.advance(4 * ackWait);
    expect(at).toEqual([2_500, 5_000, 7_500, 10_000, 12_500, 15_000, 17_500, 20_000]);
    held.release(msg);
    await clock.advance(ackWait);
    expect(at).toHaveLength(8);
    expect(renewalPeriod(600)).toBe(500);
    stop();
  });

  it("notifications held messages - past the renewal window a message is no longer renewed and the holder counts as stuck", async () => {
    const clock = new ManualClock();
    const held = new HeldMessages<ReturnType<typeof message>>(clock, 20_000);
    const old = message();
    held.hold(old);
    await clock.advance(15_000);
    const young = message();
    held.hold(young);
    held.renew();
    expect([old.renewed.length, young.renewed.length, held.stuck()]).toEqual([1, 1, false]);
    await clock.advance(5_000);
    held.renew();
    expect([old.renewed.length, young.renewed.length, held.stuck()]).toEqual([1, 2, true]);
    held.release(old);
    expect(held.stuck()).toBe(false);
  });

  it("notifications held messages - a renewal that cannot be sent (connection closed) does not stop the others", () => {
    const held = new HeldMessages<{ working(): void }>(new ManualClock());
    const ok = message();
    held.hold({
      working: () => {
        throw new Error("closed");
      },
    });
    held.hold(ok);
    held.renew();
    expect(ok.renewed).toHaveLength(1);
  });
});
