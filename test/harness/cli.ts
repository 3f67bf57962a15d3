/**
 * The derrick CLI run as a user runs it: a child process with a data dir and ports of its own. Data
 * dirs are removed after the file, and an embedded nats-server a failed test left running in one is
 * stopped (it has its own process group, so a SIGKILLed derrick leaves it behind).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { freePort } from "./redis.ts";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CLI = join(ROOT, "bin", "derrick.ts");

const dirs: string[] = [];
// Registered when a test file imports this module: on that file's suite.
afterAll(() => {
  for (const d of dirs.splice(0)) {
    spawnSync("pkill", ["-KILL", "-f", join(d, "nats", "nats-server.conf")]);
    rmSync(d, { recursive: true, force: true });
  }
});

/** A temporary data dir for CLI children, removed (its embedded server stopped) after the file. */
export function cliDataDir(prefix = "derrick-cli-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** The environment of a `derrick` child on free ports: the embedded NATS server (NATS_URL unset) unless `extra` names one. */
export async function cliEnv(dataDir: string, extra: Record<string, string> = {}) {
  const [httpPort, natsPort] = [await freePort(), await freePort()];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DERRICK_DATA_DIR: dataDir,
    DERRICK_HTTP_PORT: String(httpPort),
    DERRICK_NATS_PORT: String(natsPort),
    ...extra,
  };
  if (!("NATS_URL" in extra)) delete env.NATS_URL;
  return { env, httpPort, natsPort };
}

/**
 * `derrick <args>` as a child process with its output collected; `exitWithin(ms)` answers its exit
 * code, or "still running" when it has not exited by then.
 */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv, options: { preload?: string; detached?: boolean } = {}) {
  const preload = options.preload ? ["--preload", options.preload] : [];
  const child = spawn(process.execPath, [...preload, CLI, ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.detached ?? false,
  });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const exitWithin = (ms: number) =>
    Promise.race([exited, new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), ms))]);
  return { child, log: () => log, exited, exitWithin };
}
