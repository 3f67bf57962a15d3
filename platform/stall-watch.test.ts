import { describe, expect, it } from "vitest";
import pino from "pino";
import { watchStalls } from "./stall-watch.ts";

function capture() {
  const lines: Array<{ level: number; blockedMs?: number; msg: string }> = [];
  const log = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("stall watch", () => {
  it("stall watch - a blocked event loop is logged with how long it was blocked; a turning one is not", async () => {
    const { log, lines } = capture();
    const stop = watchStalls(log, { everyMs: 20, warnAfterMs: 300 });
    try {
      await sleep(200);
      expect(lines).toEqual([]);
      busy(600);
      await sleep(100);
      expect(lines).toHaveLength(1);
      expect(lines[0]!.msg).toMatch(/event loop blocked/);
      expect(lines[0]!.blockedMs).toBeGreaterThanOrEqual(300);
    } finally {
      stop();
    }
    busy(400);
    await sleep(100);
    expect(lines, "stopped: no more warnings").toHaveLength(1);
  });
});
