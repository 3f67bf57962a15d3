/**
 * SIGHUP to a process joined to an external NATS server: it reloads nothing, so it drains and stops as
 * for SIGTERM (exit 0), never ending at the signal's default without draining.
 */
import { afterAll, describe, expect, it } from "vitest";
import { cliDataDir, cliEnv, spawnCli } from "../harness/cli.ts";
import { eventually, startTestNats } from "../harness/index.ts";

const nats = await startTestNats();
afterAll(() => nats.cleanup());

describe("SIGHUP", () => {
  it("hangup - an actor process on an external NATS server drains and exits 0 on SIGHUP", async () => {
    const { env } = await cliEnv(cliDataDir(), { NATS_URL: nats.url, DERRICK_LOG_LEVEL: "info" });
    const run = spawnCli(["actor", "system"], env);
    try {
      await eventually(() => run.log().includes("actor serving"), { timeoutMs: 30_000, what: "the actor serving" });
      run.child.kill("SIGHUP");
      expect(await run.exitWithin(20_000), run.log()).toBe(0);
      expect(run.log()).toContain("shutting down: draining");
      expect(run.log()).toContain("actor stopped");
    } finally {
      if (run.child.exitCode === null) run.child.kill("SIGKILL");
    }
  });
});
