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
  const commit = process.env.DERRICK_BUILD_COMMIT || gitOfBuild(["rev-parse", "HEAD"]);
  const runtime = typeof Bun !== "undefined" ? `bun ${Bun.version}` : `node ${process.versions.node}`;
  cached = { name: pkg.name, version: pkg.version, ...(commit ? { commit } : {}), runtime, startedAt: STARTED_AT };
  return cached;
}

/** A git answer about derrick's own checkout (not the working directory's); undefined when it is not one (a packaged build). */
export function gitOfBuild(args: string[]): string | undefined {
  try {
    return (
      execFileSync("git", args, { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] })
        .toString()
        .trim() || undefined
    );
  } catch {
    return undefined;
  }
}
