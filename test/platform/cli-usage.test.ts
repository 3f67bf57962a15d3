/** The CLI's answers to command lines it cannot act on: a message naming the fault, exit 2, nothing started. */
import { describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { eventually, freePort, TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { CLI, ROOT, cliDataDir, cliEnv, spawnCli } from "../harness/cli.ts";
import { derrickTest, natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";

/** The CLI run to its end (bounded), with its own data dir and ports, NATS_URL pointing nowhere unless given. */
async function derrick(args: string[], extra: Record<string, string> = {}) {
  // A refused `start` that started its server after all is not left behind: cliDataDir stops it.
  const dataDir = cliDataDir("derrick-usage-");
  const { env } = await cliEnv(dataDir, { DERRICK_LOG_LEVEL: "silent", ...extra });
  const out = spawnSync(process.execPath, [CLI, ...args], { env, encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
  return { status: out.status, stdout: out.stdout, stderr: out.stderr, dataDir };
}

describe("derrick CLI usage errors", () => {
  it("cli usage - `derrick start` with an argument refuses with exit 2 instead of starting everything", async () => {
    const out = await derrick(["start", "--nats-url", "nats://elsewhere:4222"]);
    expect(out.status, out.stderr).toBe(2);
    expect(out.stderr).toContain("takes no arguments");
    expect(out.stderr).toContain("--nats-url");
    expect(existsSync(join(out.dataDir, "nats"))).toBe(false);
  });

  it("cli usage - `derrick edge` and `derrick config` with an argument refuse with exit 2", async () => {
    for (const args of [
      ["edge", "extra"],
      ["config", "--json"],
    ]) {
      const out = await derrick(args, { NATS_URL: `nats://127.0.0.1:${await freePort()}` });
      expect(out.status, `${args.join(" ")}: ${out.stderr}`).toBe(2);
      expect(out.stderr).toContain("takes no arguments");
    }
  });

  it("cli usage - an unknown option or a missing option value exits 2 naming it, for every command that takes options", async () => {
    const cases: Array<[string[], string]> = [
      [["actor", "--bogus", "search"], "--bogus"],
      [["keys", "list", "--bogus"], "--bogus"],
      [["apps", "list", "--bogus"], "--bogus"],
      [["token", "--user"], "--user"],
      [["token", "--user", "alice", "--bogus"], "--bogus"],
      [["seed", "--bogus"], "--bogus"],
      [["devices", "list", "--bogus"], "--bogus"],
    ];
    for (const [args, named] of cases) {
      const out = await derrick(args);
      expect(out.status, `${args.join(" ")}: ${out.stderr}`).toBe(2);
      expect(out.stderr).toContain(named);
    }
  });

  it("cli usage - `derrick token --ttl` with a value that is no duration exits 2 naming --ttl", async () => {
    const out = await derrick(["token", "--user", "alice", "--ttl", "soon"]);
    expect(out.status, out.stderr).toBe(2);
    expect(out.stderr).toContain("--ttl");
    expect(out.stderr).toContain('"soon" is not a duration');
  });

  it("cli usage - `derrick apps` with a missing or unknown action prints its usage (exit 2) without first needing NATS", async () => {
    for (const args of [["apps"], ["apps", "delete"], ["apps", "remove", "x"]]) {
      const out = await derrick(args, { NATS_URL: `nats://127.0.0.1:${await freePort()}` });
      expect(out.status, `${args.join(" ")}: ${out.stderr}`).toBe(2);
      expect(out.stderr).toContain("usage: derrick apps");
      expect(out.stderr).not.toContain("cannot reach NATS");
    }
  });

  it("cli usage - `derrick help` and `derrick sdk migrate` work while a configuration variable is wrong", async () => {
    const help = await derrick(["help"], { DERRICK_HTTP_PORT: "eighty" });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain("usage: derrick");
    const migrate = await derrick(["sdk", "migrate"], { DERRICK_HTTP_PORT: "eighty" });
    expect(migrate.status).toBe(2);
    expect(migrate.stderr).toContain("usage: derrick sdk migrate");
    expect(migrate.stderr).not.toContain("DERRICK_HTTP_PORT");
  });
});

describe("derrick start on a port another process holds", () => {
  /** `derrick start` with `variable` set to a port a plain TCP listener holds: it exits 1 naming the address and the variable. */
  async function startOnHeldPort(variable: "DERRICK_NATS_PORT" | "DERRICK_HTTP_PORT") {
    const port = await freePort();
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    try {
      const out = await derrick(["start"], { [variable]: String(port) });
      expect(out.status, out.stderr).toBe(1);
      expect(out.stderr).toContain(`127.0.0.1:${port}`);
      expect(out.stderr).toContain(variable);
      return out;
    } finally {
      server.close();
    }
  }

  it("cli usage - a taken DERRICK_NATS_PORT is named in one line, not answered with the server's whole log", async () => {
    const out = await startOnHeldPort("DERRICK_NATS_PORT");
    expect(out.stderr).not.toContain("JETSTREAM");
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("cli usage - a taken DERRICK_HTTP_PORT is named, and the embedded nats-server started before it is stopped", async () => {
    const out = await startOnHeldPort("DERRICK_HTTP_PORT");
    const left = spawnSync("pgrep", ["-f", join(out.dataDir, "nats", "nats-server.conf")], { encoding: "utf8" }).stdout.trim();
    expect(left).toBe("");
  });
});

describe("npm start and a stop signal sent to npm", () => {
  /** A process's descendants (pgrep -P, recursively). */
  const descendants = (pid: number): number[] => {
    const children = spawnSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
      .stdout.split("\n")
      .filter(Boolean)
      .map(Number);
    return children.flatMap((child) => [child, ...descendants(child)]);
  };

  /** `npm start` (the start script alone) with its own data dir and ports, in a process group of its own like a terminal's foreground job. */
  async function npmStart() {
    const dataDir = cliDataDir("derrick-npm-start-");
    const { env, httpPort } = await cliEnv(dataDir, { DERRICK_LOG_LEVEL: "info" });
    // The start script's own defaults, whatever the shell running the tests sets.
    delete env.MIMALLOC_PURGE_DELAY;
    delete env.MIMALLOC_PURGE_HOLES;
    // --ignore-scripts: the start script alone (the prestart setup installs packages; not what is tested here).
    const npm = spawn("npm", ["start", "--ignore-scripts"], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let log = "";
    npm.stdout.on("data", (d) => (log += d));
    npm.stderr.on("data", (d) => (log += d));
    const healthz = () =>
      fetch(`http://127.0.0.1:${httpPort}/healthz`).then(
        (r) => r.status === 200,
        () => false,
      );
    const serverRuns = () =>
      spawnSync("pgrep", ["-f", join(dataDir, "nats", "nats-server.conf")], { encoding: "utf8" }).stdout.trim() !== "";
    await eventually(healthz, { timeoutMs: 30_000, what: `healthz (log: ${log.slice(-500)})` });
    const started = descendants(npm.pid!);
    expect(serverRuns()).toBe(true);
    return {
      npm,
      log: () => log,
      /** The environment derrick itself (the `bun bin/derrick.ts` descendant) was started with. */
      derrickEnv(): string[] {
        const cmdline = (pid: number) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8");
          } catch {
            return ""; // a descendant that has exited since
          }
        };
        const derrick = started.find((pid) => cmdline(pid).includes("bin/derrick.ts"));
        if (derrick === undefined) throw new Error(`no bin/derrick.ts among npm's descendants ${started.join(", ")}`);
        return readFileSync(`/proc/${derrick}/environ`, "utf8").split("\0");
      },
      stopped: () =>
        eventually(async () => !serverRuns() && !(await healthz()), {
          timeoutMs: 20_000,
          intervalMs: 100,
          what: `derrick and its nats-server to stop (log: ${log.slice(-500)})`,
        }),
      cleanup() {
        for (const pid of [npm.pid!, ...started]) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
      },
    };
  }

  it("cli usage - SIGTERM to the `npm start` process stops derrick and its embedded nats-server (none is left orphaned)", async () => {
    const run = await npmStart();
    try {
      // The start script gives derrick the allocator settings of docs/operations.md#the-memory-allocator.
      expect(run.derrickEnv()).toEqual(expect.arrayContaining(["MIMALLOC_PURGE_DELAY=1000", "MIMALLOC_PURGE_HOLES=0"]));
      await eventually(() => run.log().includes("derrick is up"), { timeoutMs: 10_000, what: "derrick is up" });
      expect(run.log()).not.toContain("allocator variables unset or empty");
      run.npm.kill("SIGTERM");
      await run.stopped();
    } finally {
      run.cleanup();
    }
  });

  it("cli usage - one Ctrl-C to `npm start` (SIGINT to the whole group, which npm forwards too) drains instead of exiting at once", async () => {
    const run = await npmStart();
    try {
      process.kill(-run.npm.pid!, "SIGINT");
      await run.stopped();
      await eventually(() => run.log().includes('"msg":"stopped"'), { timeoutMs: 5_000, what: "derrick's stopped line" });
      expect(run.log()).not.toContain("second signal");
    } finally {
      run.cleanup();
    }
  });
});

describe("derrick edge and actor without a reachable NATS", () => {
  it("cli usage - `derrick edge`, `derrick actor` and the admin commands name the NATS URL (credentials masked) and the variables to check when it cannot be reached", async () => {
    const url = `nats://derrick:s3cret@127.0.0.1:${await freePort()}`;
    for (const args of [["edge"], ["actor", "system"], ["apps", "list"]]) {
      const out = await derrick(args, { NATS_URL: url });
      expect(out.status, `${args.join(" ")}: ${out.stderr}`).toBe(1);
      expect(out.stderr).toContain(url.replace("derrick:s3cret@", "***@"));
      expect(out.stderr).toContain("NATS_URL");
      expect(out.stderr).not.toContain("s3cret");
    }
  });
});

describe("derrick start with NATS_USER but no NATS_URL", () => {
  it("cli usage - the embedded server is joined with its internal user (NATS_USER is for NATS_URL), with a warning", async () => {
    const dataDir = cliDataDir("derrick-usage-");
    const { env, httpPort } = await cliEnv(dataDir, {
      DERRICK_LOG_LEVEL: "warn",
      ACTORS: "system",
      NATS_USER: "alice",
      NATS_PASSWORD: "alice-password",
    });
    const { child, log, exited } = spawnCli(["start"], env);
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200 || child.exitCode !== null,
        { timeoutMs: 20_000, what: "readyz or an exit" },
      );
      expect(child.exitCode, log()).toBeNull();
      expect(log()).toContain("NATS_USER is set but NATS_URL is not");
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

const issuing = derrickTest({ actors: ["identity", "system"] });
const stopWhileStarting = natsTest();

describe("derrick token", () => {
  const it = issuing;
  const whoami = (running: TestDerrick, token: string) =>
    fetch(`${running.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" },
    });
  /** `derrick token` for alice as client alpha, in the running deployment's data dir (its issuer's key). */
  const aliceToken = (running: TestDerrick, ...options: string[]) =>
    derrick(["token", "--user", "alice@example.com", "--client", "alpha", ...options], { DERRICK_DATA_DIR: running.dataDir });

  it("cli usage - `derrick token --user` with the identity actor's data dir mints a user token the edge accepts", async ({
    derrick: running,
  }) => {
    const out = await aliceToken(running, "--groups", "a,b");
    expect(out.status, out.stderr).toBe(0);
    const res = await whoami(running, out.stdout.trim());
    expect(res.status).toBe(200);
    expect((await json(res)).principal).toEqual({
      clientId: "alpha",
      subject: "alice@example.com",
      groups: ["a", "b"],
      kind: "user",
    });
  });

  it("cli usage - `derrick token` in a data dir without the issuer's key refuses (exit 2) instead of signing with a key no edge knows", async () => {
    const out = await derrick(["token", "--user", "alice@example.com", "--client", "alpha"]);
    expect(out.status, out.stdout).toBe(2);
    expect(out.stderr).toContain("no signing key");
    expect(out.stdout).toBe("");
    expect(existsSync(join(out.dataDir, "issuer"))).toBe(false);
  });

  it("cli usage - `derrick token --ttl 0` refuses (exit 2) instead of printing a token that has already expired", async ({
    derrick: running,
  }) => {
    const out = await aliceToken(running, "--ttl", "0");
    expect(out.status, out.stdout).toBe(2);
    expect(out.stderr).toContain("--ttl");
  });
});

describe("derrick start without the allocator settings", () => {
  it("cli usage - a start outside `npm start` without the allocator variables warns once it is up, naming them", async () => {
    const dataDir = cliDataDir("derrick-usage-");
    const { env } = await cliEnv(dataDir, { DERRICK_LOG_LEVEL: "info", ACTORS: "system" });
    delete env.MIMALLOC_PURGE_DELAY;
    env.MIMALLOC_PURGE_HOLES = "1"; // an operator's own choice is kept and not named
    const { child, log, exitWithin } = spawnCli(["start"], env);
    try {
      await eventually(() => log().includes("derrick is up"), { timeoutMs: 20_000, what: "derrick is up" }).catch((error) => {
        throw new Error(`${error}; log: ${log().slice(-500)}`);
      });
      const warning = log()
        .split("\n")
        .find((line) => line.includes("allocator variables unset or empty"));
      expect(warning, log().slice(-800)).toBeDefined();
      expect(JSON.parse(warning!)).toMatchObject({ level: 40, unset: ["MIMALLOC_PURGE_DELAY"] });
      child.kill("SIGTERM");
      expect(await exitWithin(15_000), log().slice(-800)).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);
});

describe("derrick start when its embedded nats-server dies", () => {
  it("cli usage - a killed embedded nats-server stops derrick with exit 1 (a supervisor restarts both) instead of answering 503 for ever", async () => {
    const dataDir = cliDataDir("derrick-usage-");
    const { env, httpPort } = await cliEnv(dataDir, { DERRICK_LOG_LEVEL: "info", ACTORS: "system" });
    const { child, log, exitWithin } = spawnCli(["start"], env);
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200, {
        timeoutMs: 20_000,
        what: `readyz (log: ${log().slice(-500)})`,
      });
      const server = spawnSync("pgrep", ["-f", join(dataDir, "nats", "nats-server.conf")], { encoding: "utf8" }).stdout.trim();
      expect(server).toMatch(/^\d+$/);
      process.kill(Number(server), "SIGKILL");
      const code = await exitWithin(15_000);
      expect(code, log().slice(-1000)).toBe(1);
      expect(log()).toContain("the embedded nats-server exited");
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("two derrick starts on one data dir", () => {
  it("cli usage - a start finding the dir claimed by a live derrick that has not yet started its server refuses, and leaves the claim alone", async () => {
    // The first start's window between claiming the dir (owner file) and its server's pid file, held open:
    // a live process stands in for that derrick, with the owner line derrick writes (pid and start time).
    const first = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      const stat = readFileSync(`/proc/${first.pid}/stat`, "utf8");
      const startTime = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
      const dataDir = cliDataDir("derrick-usage-");
      mkdirSync(join(dataDir, "nats"), { recursive: true });
      const claim = `${first.pid} ${startTime}\n`;
      writeFileSync(join(dataDir, "nats", "owner"), claim);
      const out = await derrick(["start"], { DERRICK_DATA_DIR: dataDir, ACTORS: "system" });
      expect(out.status, out.stderr).toBe(1);
      expect(out.stderr).toContain(`another derrick (pid ${first.pid})`);
      expect(readFileSync(join(dataDir, "nats", "owner"), "utf8")).toBe(claim);
    } finally {
      first.kill("SIGKILL");
    }
  });
});

describe("a stop signal while start-up still waits", () => {
  const it = stopWhileStarting;

  it("cli usage - SIGTERM to an actor process whose start-up waits for an unreachable device Redis stops it (exit 0), not only a second signal", async ({
    nats,
  }) => {
    const dataDir = cliDataDir("derrick-usage-");
    const mirrors = JSON.stringify([{ organization: "o", environment: "e", twinId: "t", redis: `redis://127.0.0.1:${await freePort()}` }]);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NATS_URL: nats.url,
      DERRICK_DATA_DIR: dataDir,
      DERRICK_LOG_LEVEL: "info",
      DERRICK_TWIN_MIRRORS: mirrors,
    };
    const { child, log, exitWithin } = spawnCli(["actor", "twin-mirror"], env);
    try {
      await eventually(() => log().includes("Redis unreachable"), {
        timeoutMs: 15_000,
        what: `the mirror waiting for Redis (log: ${log().slice(-500)})`,
      });
      expect(log()).not.toContain("derrick is up");
      child.kill("SIGTERM");
      const code = await exitWithin(12_000);
      expect(code, log().slice(-800)).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

/**
 * `derrick actor system` whose start-up hangs on a NATS that accepts the connection and never speaks
 * (nats.js waits 20 s), so it is still starting when the test signals it; resolves once connected.
 */
async function actorOnSilentNats() {
  let connected = false;
  const silent = createServer((socket) => {
    connected = true;
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const port = (silent.address() as { port: number }).port;
  const dataDir = cliDataDir("derrick-usage-");
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NATS_URL: `nats://127.0.0.1:${port}`,
    DERRICK_DATA_DIR: dataDir,
    DERRICK_LOG_LEVEL: "info",
    ACTORS: "system",
  };
  const { child, log, exitWithin } = spawnCli(["actor"], env);
  const stop = () => {
    child.kill("SIGKILL");
    silent.close();
  };
  try {
    // Signals before the handlers are installed would kill it outright: wait until it is connecting.
    await eventually(() => connected, { timeoutMs: 15_000, what: "the connection to the silent NATS" });
  } catch (error) {
    stop();
    throw error;
  }
  return { child, exitWithin, log, stop };
}

describe("a stop signal while start-up waits for a NATS that does not answer", () => {
  it("cli usage - SIGTERM while the connection to NATS_URL hangs (a server that accepts and never speaks) stops the process (exit 0) within the start-up grace, not at the 20 s connect timeout", async () => {
    // The twin mirror's wait no longer holds start-up (2 s at most): a silent NATS keeps it waiting.
    const { child, exitWithin, log, stop } = await actorOnSilentNats();
    try {
      const signalled = performance.now();
      child.kill("SIGTERM");
      const code = await exitWithin(15_000);
      expect(code, log().slice(-800)).toBe(0);
      // Within the 5 s start-up grace (plus process exit), well before nats.js's 20 s connect timeout.
      expect(performance.now() - signalled).toBeLessThan(14_000);
    } finally {
      stop();
    }
  });
});

describe("a second stop signal", () => {
  it("cli usage - a second signal within a second of the first is the same stop (one Ctrl-C twice: terminal and npm); one a second or more later exits at once with 130", async () => {
    // Start-up waiting on a NATS that never speaks keeps the process in its stop for 5 s: time to send more.
    const { child, exitWithin, log, stop } = await actorOnSilentNats();
    try {
      // One Ctrl-C under npm start: from the terminal and forwarded by npm, back to back. The second is ignored.
      child.kill("SIGINT");
      child.kill("SIGINT");
      await eventually(() => log().includes("shutting down: draining"), {
        timeoutMs: 5_000,
        what: `the first signal taken (log: ${log().slice(-300)})`,
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(child.exitCode, log().slice(-500)).toBeNull();
      child.kill("SIGINT"); // a second Ctrl-C: now
      const code = await exitWithin(3_000);
      expect(code, log().slice(-500)).toBe(130);
      expect(log()).toContain("second signal: exiting now");
    } finally {
      stop();
    }
  });
});

describe("derrick start with a device Redis down", () => {
  it("cli usage - an unreachable DERRICK_TWIN_MIRRORS Redis does not hold back the other actors and the edge: /readyz answers 200, SIGTERM exits 0", async () => {
    const dataDir = cliDataDir("derrick-usage-");
    const httpPort = await freePort();
    const mirrors = JSON.stringify([{ organization: "o", environment: "e", twinId: "t", redis: `redis://127.0.0.1:${await freePort()}` }]);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DERRICK_DATA_DIR: dataDir,
      DERRICK_HTTP_PORT: String(httpPort),
      DERRICK_NATS_PORT: String(await freePort()),
      DERRICK_LOG_LEVEL: "info",
      DERRICK_TWIN_MIRRORS: mirrors,
    };
    delete env.NATS_URL;
    delete env.ACTORS;
    const { child, log, exitWithin } = spawnCli(["start"], env);
    try {
      await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200, {
        timeoutMs: 25_000,
        intervalMs: 200,
        what: `readyz (log: ${log().slice(-600)})`,
      });
      expect(log()).toContain("Redis is not reachable yet");
      child.kill("SIGTERM");
      const code = await exitWithin(15_000);
      expect(code, log().slice(-800)).toBe(0);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
