/**
 * HTTP load from a separate process, the same generator for every peer: `wrk` (Debian package)
 * when present, else autocannon's CLI. Bounded by duration; loopback targets only.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LoadResult } from "./lib.ts";

const hasWrk = spawnSync("sh", ["-c", "command -v wrk"]).status === 0;
export const LOAD_GENERATOR = hasWrk ? "wrk" : "autocannon";

function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  if (!["127.0.0.1", "localhost", "[::1]", "::1"].includes(host)) throw new Error(`refusing to load ${host}: benches target loopback only`);
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  return unit === "us" ? n / 1000 : unit === "s" ? n * 1000 : n;
}

export type HttpLoadOptions = {
  connections: number;
  seconds: number;
  /** POST by default; a GET sends no body. */
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  /** Each request's body with `[<id>]` replaced by a number of its own (autocannon's `-I` token): nothing a cache could answer twice. */
  distinctBodies?: boolean;
};

/** Where `distinctBodies` puts each request's number. */
export const ID_TOKEN = "[<id>]";

export async function httpLoad(name: string, url: string, body: string, options: HttpLoadOptions): Promise<LoadResult> {
  assertLoopback(url);
  const method = options.method ?? "POST";
  if (hasWrk) {
    const dir = mkdtempSync(join(tmpdir(), "derrick-wrk-"));
    const script = join(dir, "load.lua");
    const headers = { ...(method === "POST" ? { "Content-Type": "application/json" } : {}), ...options.headers };
    const lines = [`wrk.method = "${method}"`, ...(method === "POST" ? [`wrk.body = ${JSON.stringify(body)}`] : [])];
    for (const [header, value] of Object.entries(headers)) lines.push(`wrk.headers[${JSON.stringify(header)}] = ${JSON.stringify(value)}`);
    if (options.distinctBodies && method === "POST") {
      const [before, after] = body.split(ID_TOKEN);
      if (after === undefined) throw new Error(`distinctBodies needs ${ID_TOKEN} in the body`);
      lines.push(
        "local n = 0",
        `request = function() n = n + 1; return wrk.format(nil, nil, nil, ${JSON.stringify(before)} .. n .. ${JSON.stringify(after)}) end`,
      );
    }
    writeFileSync(script, `${lines.join("\n")}\n`);
    const out = await run("wrk", ["-t1", `-c${options.connections}`, `-d${options.seconds}s`, "--latency", "-s", script, url]);
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
    const pct = (p: string) => {
      const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
      return m ? toMs(m[1]!, m[2]!) : Number.NaN;
    };
    const total = Number(/(\d+) requests in/.exec(out)?.[1]);
    const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
    const socketErrors = /Socket errors:.*?connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const errors =
      non2xx +
      (socketErrors
        ? socketErrors
            .slice(1)
            .map(Number)
            .reduce((a, b) => a + b, 0)
        : 0);
    return { name, count: total, errors, seconds: options.seconds, opsPerSec: rps, p50Ms: pct("50"), p99Ms: pct("99"), maxMs: Number.NaN };
  }
  const headerArgs = Object.entries(options.headers ?? {}).flatMap(([header, value]) => ["-H", `${header}=${value}`]);
  const ids = options.distinctBodies ? ["-I"] : [];
  return autocannon(name, url, method === "GET" ? undefined : body, options.seconds, [
    "-c",
    String(options.connections),
    ...ids,
    ...headerArgs,
  ]);
}

/**
 * Offered load at a fixed overall rate (open loop) from a separate process: autocannon `-R`.
 * For "p99 at X req/s": a closed loop would slow down with the server and hide queueing.
 */
export async function httpLoadAtRate(
  name: string,
  url: string,
  body: string,
  options: { perSecond: number; seconds: number; connections?: number },
): Promise<LoadResult> {
  assertLoopback(url);
  return autocannon(name, url, body, options.seconds, ["-c", String(options.connections ?? 32), "-R", String(options.perSecond)]);
}

/** JSON POSTs for `seconds` through autocannon's CLI, shaped by `load` (connections, rate). */
async function autocannon(name: string, url: string, body: string | undefined, seconds: number, load: string[]): Promise<LoadResult> {
  const bin = fileURLToPath(new URL("../node_modules/.bin/autocannon", import.meta.url));
  const request = body === undefined ? ["-m", "GET"] : ["-m", "POST", "-H", "content-type=application/json", "-b", body];
  const args = ["-j", ...load, "-d", String(seconds), ...request, url];
  const out = await run(bin, args);
  const r = JSON.parse(out.slice(out.indexOf("{"))) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number; max: number };
    non2xx: number;
    errors: number;
  };
  return {
    name,
    count: r.requests.total,
    errors: r.non2xx + r.errors,
    seconds,
    opsPerSec: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    maxMs: r.latency.max,
  };
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${out}`))));
  });
}

/** Starts a peer process that prints one JSON line `{ready: true, port}` when it serves. */
export async function startPeer(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ port: number; child: ChildProcess; stop(): Promise<void> }> {
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, ...env } });
  const port = await new Promise<number>((resolve, reject) => {
    let buffer = "";
    const timer = setTimeout(() => reject(new Error(`${args.join(" ")} did not get ready in 30 s`)), 30_000);
    child.stdout!.on("data", (d) => {
      buffer += d;
      const line = buffer.split("\n").find((l) => l.includes('"ready"'));
      if (line) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { port: number }).port);
      }
    });
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code}`)));
  });
  return {
    port,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGKILL"), 5000).unref();
      }),
  };
}
