/**
 * TwinWatchView against entry sequences with holes, as a watcher behind the writers receives them
 * (JetStream removed the messages whose keys were written twice more). Pure: the stream's last
 * sequence is a function the test sets.
 */
import { describe, expect, it } from "vitest";
import { twinCommitKey, twinKey } from "../subjects/twins.ts";
import { TwinCommitGate, TwinWatchView, type TwinEntry } from "./twin-commit.ts";

const NAMES = ["a", "b", "c"];

/** The messages of PUT rounds of all NAMES, as the twins actor writes them: claim, values, commit. */
function rounds(count: number, firstRevision = 1): TwinEntry[] {
  const out: TwinEntry[] = [];
  let revision = firstRevision;
  const entry = (key: string, value: string): TwinEntry => ({ key, revision: revision++, operation: "PUT", value, created: new Date(0) });
  for (let round = 0; round < count; round++) {
    const values = Object.fromEntries(NAMES.map((n) => [n, `r${round}`]));
    out.push(entry(twinCommitKey("g"), JSON.stringify({ state: "pending", names: NAMES, values, version: 0, at: "2026-11-24T00:00:00Z" })));
    for (const name of NAMES) out.push(entry(twinKey("g", "desired", name), `r${round}`));
    out.push(
      entry(twinCommitKey("g"), JSON.stringify({ state: "committed", names: NAMES, version: revision - 1, at: "2026-11-24T00:00:00Z" })),
    );
  }
  return out;
}

/** What a watcher keeps of them: a message goes once its key was written twice more (history 2). */
function survivors(all: TwinEntry[]): TwinEntry[] {
  return all.filter((e, i) => all.slice(i + 1).filter((later) => later.key === e.key).length < 2);
}

/** Feeds entries to a view and records each visible state it hands on. */
function watcher(lastSeq: () => number) {
  const visible = new Map<string, string>();
  const states: string[][] = [];
  let asked = 0;
  const view = new TwinWatchView({
    lastSeq: async () => {
      asked++;
      return lastSeq();
    },
    emit: (entries) => {
      for (const e of entries) visible.set(e.key.split("/").at(-1)!, e.value);
      states.push(NAMES.map((n) => visible.get(n) ?? "-"));
    },
    settleMs: 1,
    retryMs: 5,
  });
  return { view, states, asked: () => asked };
}

const torn = (states: string[][]) => states.filter((s) => new Set(s).size !== 1);
const settle = (ms = 30) => new Promise((r) => setTimeout(r, ms));

describe("twin watch view", () => {
  it("twin watch - a replay that lost a claim's pending record hands on a committed state, never part of the PUT", async () => {
    const all = rounds(4);
    const replay = survivors(all);
    // The hole the view must notice: round 2's pending record is gone, its values are not.
    expect(replay.some((e) => e.value.includes('"pending"') && e.value.includes("r2"))).toBe(false);
    expect(replay.filter((e) => e.value === "r2")).toHaveLength(3);
    // The gate alone shows round 2's values one by one.
    const gate = new TwinCommitGate();
    const seen = new Map<string, string>();
    const gateStates = replay.flatMap((e) =>
      gate.feed(e).map((v) => (seen.set(v.key.split("/").at(-1)!, v.value), NAMES.map((n) => seen.get(n) ?? "-"))),
    );
    expect(torn(gateStates).length).toBeGreaterThan(0);

    const w = watcher(() => all.at(-1)!.revision);
    for (const entry of replay) await w.view.feed(entry, replay.at(-1)!.revision - entry.revision);
    await settle();
    expect(torn(w.states)).toEqual([]);
    expect(w.states.at(-1)).toEqual(["r3", "r3", "r3"]);
    w.view.stop();
  });

  it("twin watch - a live watcher that falls behind mid-stream and misses messages hands on nothing until it caught up, then one committed state", async () => {
    const all = rounds(6);
    // Rounds 0 and 1 arrive live, one by one; then the watcher stalls while rounds 2 to 5 are written.
    const live = all.slice(0, 10);
    let end = live.at(-1)!.revision;
    const w = watcher(() => end);
    for (const entry of live) await w.view.feed(entry, 0);
    await settle();
    expect(w.states.at(-1)).toEqual(["r1", "r1", "r1"]);
    const before = w.states.length;
    end = all.at(-1)!.revision;
    const later = survivors(all).filter((e) => e.revision > live.at(-1)!.revision);
    expect(later[0]!.revision).toBeGreaterThan(live.at(-1)!.revision + 1);
    for (const entry of later.slice(0, -1)) await w.view.feed(entry, 3);
    await settle();
    expect(w.states.length).toBe(before);
    await w.view.feed(later.at(-1)!, 0);
    await settle();
    expect(torn(w.states)).toEqual([]);
    expect(w.states.slice(before)).toEqual([["r5", "r5", "r5"]]);
    w.view.stop();
  });

  it("twin watch - without holes each visible entry is handed on at once, without asking the stream again", async () => {
    const all = rounds(2);
    const w = watcher(() => all[0]!.revision);
    await w.view.feed(all[0]!, 0);
    await settle();
    const asked = w.asked();
    expect(asked).toBeGreaterThan(0);
    for (const entry of all.slice(1)) await w.view.feed(entry, 0);
    expect(w.states).toEqual([
      ["r0", "r0", "r0"],
      ["r1", "r1", "r1"],
    ]);
    expect(w.asked()).toBe(asked);
    w.view.stop();
  });

  it("twin watch - while the stream says more is to come, or cannot be read, nothing is handed on; it is asked again", async () => {
    const all = rounds(2);
    let last = all.at(-1)!.revision + 5;
    let failing = true;
    const w = watcher(() => {
      if (failing) throw new Error("JetStream away");
      return last;
    });
    for (const entry of all) await w.view.feed(entry, 0);
    await settle();
    expect(w.states).toEqual([]);
    failing = false;
    await settle();
    expect(w.states).toEqual([]);
    last = all.at(-1)!.revision;
    await eventuallyTrue(() => w.states.length === 1);
    expect(w.states).toEqual([["r1", "r1", "r1"]]);
    w.view.stop();
  });

  it("twin watch - a stopped view hands nothing on and stops asking", async () => {
    const all = rounds(1);
    const w = watcher(() => all.at(-1)!.revision + 1);
    for (const entry of all) await w.view.feed(entry, 1);
    w.view.stop();
    const asked = w.asked();
    await settle(50);
    expect(w.asked()).toBe(asked);
    expect(w.states).toEqual([]);
  });

  it("twin gate - a new claim releases what an earlier claim held: claims are made one after another, so that one was finished", () => {
    const [pending0, a0, b0, c0, , pending1] = rounds(2);
    const gate = new TwinCommitGate();
    expect([pending0, a0, b0, c0].flatMap((e) => gate.feed(e!))).toEqual([]);
    // The commit of round 0 was missed; round 1's claim says it is done.
    expect(gate.feed(pending1!).map((e) => e.value)).toEqual(["r0", "r0", "r0"]);
  });
});

async function eventuallyTrue(check: () => boolean, ms = 1_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await settle(5);
  }
}
