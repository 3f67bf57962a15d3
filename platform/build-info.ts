/** What build this is: package version and git commit, read once per process. */
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BuildInfo } from "../subjects/system.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const STARTED_AT = new Date().toISOString();
let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  if (cached) return cached;
  const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8")) as { name: string; version: string };
  let commit = process.env.DERRICK_BUILD_COMMIT;
  if (!commit) {
    try {
      commit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
    } catch {
      commit = undefined; // not a git checkout (e.g. a packaged build)
    }
  }
  const runtime = typeof Bun !== "undefined" ? `bun ${Bun.version}` : `node ${process.versions.node}`;
  cached = { name: pkg.name, version: pkg.version, ...(commit ? { commit } : {}), runtime, startedAt: STARTED_AT };
  return cached;
}
