/**
 * The README's quickstart, run as a person would: derrick started as its first block says (on free
 * ports, in a temporary data dir), then every other `sh` block of the section, in order, in one bash
 * session from the repository's folder. The receiver's port 9000 becomes a free one. A block that
 * fails fails the test with the session's output.
 */
import { describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, freePort } from "../harness/index.ts";
import { CLI, ROOT, cliDataDir, cliEnv } from "../harness/cli.ts";

const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** The `sh` blocks of the README's "## Quickstart" section, in order. */
export function quickstartBlocks(readme: string): string[] {
  const section = readme.split(/^## /m).find((s) => s.startsWith("Quickstart"));
  if (!section) throw new Error("README.md has no Quickstart section");
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe("README quickstart", () => {
  it("readme - every quickstart block runs as written against a started derrick", { timeout: 240_000 }, async () => {
    const [start, ...blocks] = quickstartBlocks(README);
    expect(start!.trim()).toMatch(/npm start$/);
    expect(blocks.length).toBeGreaterThanOrEqual(7);
    // The start block's settings, as `VAR=value … npm start`.
    const settings = Object.fromEntries([...start!.matchAll(/(DERRICK_[A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
    const dataDir = cliDataDir("derrick-readme-");
    const work = cliDataDir("derrick-readme-work-");
    const receiverPort = await freePort();
    const { env, httpPort } = await cliEnv(dataDir, {
      PATH: `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`,
      DERRICK_LOG_LEVEL: "warn",
      ...settings,
    });
    delete env.DERRICK_CLIENTS;
    const derrick = spawn(process.execPath, [CLI, "start"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let derrickOut = "";
    derrick.stdout.on("data", (d) => (derrickOut += d));
    derrick.stderr.on("data", (d) => (derrickOut += d));
    const exited = new Promise((r) => derrick.once("exit", r));
    let session: ReturnType<typeof spawn> | undefined;
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200, {
        timeoutMs: 60_000,
        what: `derrick ready (log: ${derrickOut.slice(-400)})`,
      });
      // Files the blocks write (receiver.log, app.log) go to a temporary folder; paths in the blocks are the repository's.
      const script = [
        "set -euo pipefail",
        `cd ${JSON.stringify(ROOT)}`,
        ...blocks.map((b) => b.replace(/\b9000\b/g, String(receiverPort)).replace(/\b(receiver|app)\.log\b/g, (f) => join(work, f))),
      ].join("\n");
      session = spawn("bash", ["-c", script], { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
      let out = "";
      session.stdout!.on("data", (d) => (out += d));
      session.stderr!.on("data", (d) => (out += d));
      const code = await new Promise<number | null>((r) => session!.once("exit", (c) => r(c)));
      expect(code, `quickstart session output:\n${out.slice(-4000)}\nderrick:\n${derrickOut.slice(-1500)}`).toBe(0);
      // What each capability's block shows a person.
      expect(out).toMatch(/"clientId":"demo"/);
      expect(out).toMatch(/verified \S+ PublishData/);
      expect(out).toMatch(/"rate":\{"value":"42"/);
      expect(out).toMatch(/"well-name"[\s\S]*NO 15\/9-F-21 A/);
      expect(out).toMatch(/Volve F-21/);
      expect(out).toMatch(/"chanceOfSuccess"|"pg"|"probability/i);
      expect(out).toMatch(/factor 2/);
    } finally {
      if (session?.pid) {
        try {
          process.kill(-session.pid, "SIGKILL"); // the blocks' background jobs (receiver, device app)
        } catch {
          // already gone
        }
      }
      derrick.kill("SIGTERM");
      await exited;
    }
  });
});
