/**
 * The journal's reads of DEAD and ATTEMPTS (actors/notifications/journal.ts): a dead letter is found
 * however many letters the subscription has, by its message id alone; attempt listings give the
 * newest records; no read leaves a consumer behind.
 */
import { describe, expect } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { deadLetterId, isDeadLetterOf, openJournal, STREAMS, type AttemptRecord } from "../../actors/notifications/journal.ts";
import { subjects } from "../../subjects/index.ts";
import type { DeadLetter } from "../../subjects/notifications.ts";
import { eventually } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";

const it = natsTest().extend("journal", { scope: "file" }, async ({ nc }) => openJournal(nc));

const letter = (eventId: string, subscriptionId: string, attempt = 3): DeadLetter => ({
  event_id: eventId,
  event_seq: 1,
  partition: "opendes",
  type: "MasterPlanChanged",
  subscription_id: subscriptionId,
  attempt,
  due_at: 0,
  reason: "schedule exhausted",
});

const attempt = (n: number): AttemptRecord => ({ event_id: `e-${n}`, attempt: 1, state: "failed", status_code: 500, event_seq: n });

describe("notifications journal reads", () => {
  it("notifications journal - a dead letter's message id names its event and subscription, whatever the event id holds", () => {
    const id = deadLetterId({ event_id: "a:b", subscription_id: "sub-1", attempt: 12 });
    expect(id).toBe("dead:a:b:sub-1:12");
    expect(isDeadLetterOf(id, "a:b", "sub-1")).toBe(true);
    expect(isDeadLetterOf(id, "a", "sub-1")).toBe(false);
    expect(isDeadLetterOf(id, "a:b", "sub-2")).toBe(false);
    // An event id that starts like another event's letter id: its suffix is not an attempt number.
    expect(isDeadLetterOf(deadLetterId({ event_id: "a:sub-1:1", subscription_id: "sub-1", attempt: 2 }), "a", "sub-1")).toBe(false);
    expect(isDeadLetterOf("dead:a:sub-1:", "a", "sub-1")).toBe(false);
  });

  it("notifications journal - the oldest of 10,050 dead letters is found, and so is the newest; a deleted letter is not", async ({
    nc,
    jsm,
    journal,
  }) => {
    const sub = "sub-many";
    const js = jetstream(nc);
    const total = 10_050;
    // Letters with a body the size a real one carries, so a read of bodies would be felt.
    const filler = "x".repeat(2_000);
    for (let start = 0; start < total; start += 500) {
      const batch: Promise<unknown>[] = [];
      for (let i = start; i < Math.min(total, start + 500); i++) {
        const l = { ...letter(`ev-${i}`, sub), reason: filler };
        batch.push(js.publish(subjects.notifications.dead("opendes", sub), JSON.stringify(l), { msgID: deadLetterId(l) }));
      }
      await Promise.all(batch);
    }
    const oldest = await journal.findDead("opendes", sub, "ev-0");
    expect(oldest?.letter).toMatchObject({ event_id: "ev-0", subscription_id: sub, attempt: 3 });
    const newest = await journal.findDead("opendes", sub, `ev-${total - 1}`);
    expect(newest?.letter.event_id).toBe(`ev-${total - 1}`);
    expect(newest!.seq).toBeGreaterThan(oldest!.seq);
    expect(await journal.findDead("opendes", sub, "ev-none")).toBeUndefined();
    await journal.forgetDead(oldest!.seq);
    expect(await journal.findDead("opendes", sub, "ev-0")).toBeUndefined();
    await eventually(async () => (await jsm.consumers.list(STREAMS.dead).next()).length === 0, { what: "no consumer left on DEAD" });
  });

  it("notifications journal - the latest letter of an event wins when it died twice, and another subscription's letters are not seen", async ({
    journal,
  }) => {
    await journal.deadLetter(letter("twice", "sub-a", 3));
    await journal.deadLetter(letter("twice", "sub-b", 5));
    await journal.deadLetter(letter("twice", "sub-a", 7));
    expect((await journal.findDead("opendes", "sub-a", "twice"))?.letter.attempt).toBe(7);
    expect((await journal.findDead("opendes", "sub-b", "twice"))?.letter.attempt).toBe(5);
    expect(await journal.findDead("opendes", "sub-c", "twice")).toBeUndefined();
  });

  it("notifications journal - attempt listings give the newest records, oldest first, across grouped messages", async ({
    jsm,
    journal,
  }) => {
    const sub = "sub-attempts";
    // 40 turns of 1 to 5 records each: records written in one turn share a message.
    let n = 0;
    for (let turn = 0; turn < 40; turn++) {
      const group = Array.from({ length: (turn % 5) + 1 }, () => journal.recordAttempt("opendes", sub, attempt(n++)));
      await Promise.all(group);
    }
    const subject = subjects.notifications.attempts("opendes", sub);
    const info = await jsm.streams.info(STREAMS.attempts, { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBe(40);
    const listed = await journal.listAttempts("opendes", sub, 25);
    expect(listed.map((a) => a.event_seq)).toEqual(Array.from({ length: 25 }, (_, i) => n - 25 + i));
    expect((await journal.listAttempts("opendes", sub, 1000)).length).toBe(n);
    expect(await journal.listAttempts("opendes", "sub-none", 10)).toEqual([]);
    await eventually(async () => (await jsm.consumers.list(STREAMS.attempts).next()).length === 0, {
      what: "no consumer left on ATTEMPTS",
    });
  });
});
