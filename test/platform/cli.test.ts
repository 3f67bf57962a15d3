import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { endpoint, serveActor } from "../../actors/runtime/service.ts";
import { subjects } from "../../subjects/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { join } from "node:path";
import { clientToken, eventually, TEST_CLIENTS } from "../harness/index.ts";
import { CLI, ROOT, cliDataDir, cliEnv, spawnCli } from "../harness/cli.ts";

/** The environment of a `derrick start` with its own data dir and ports (embedded NATS: NATS_URL unset). */
async function startEnv(prefix: string, extra: Record<string, string>) {
  const dataDir = cliDataDir(prefix);
  return { dataDir, ...(await cliEnv(dataDir, extra)) };
}

/** `derrick start` as a child process, its output collected. */
const runStart = (env: NodeJS.ProcessEnv, options: { preload?: string; detached?: boolean } = {}) => spawnCli(["start"], env, options);

/** Waits until a started derrick answers /healthz (its log tail names what went wrong otherwise). */
const untilHealthy = (base: string, run: { log(): string }) =>
  eventually(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.status === 200, {
    timeoutMs: 20_000,
    what: `healthz (log: ${run.log().slice(-500)})`,
  });

/** A connection as the embedded server's internal user (from the data dir), as derrick's own processes connect. */
function internalConnection(dataDir: string, natsPort: number): Promise<NatsConnection> {
  const internal = JSON.parse(readFileSync(join(dataDir, "nats", "users.json"), "utf8")).internal as { user: string; password: string };
  return connect({ servers: `nats://127.0.0.1:${natsPort}`, user: internal.user, pass: internal.password });
}

/** Running, that is: a zombie (exited, not yet reaped by whoever adopted it) counts as gone. */
function pidAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** Pids of the embedded nats-server a derrick started with `dataDir`. */
const serverPids = (dataDir: string) =>
  spawnSync("pgrep", ["-f", join(dataDir, "nats", "nats-server.conf")], { encoding: "utf8" })
    .stdout.trim()
    .split("\n")
    .filter(Boolean)
    .map(Number);

/**
 * Starts derrick with the identity actor only and serves, from this test, a system actor whose info
 * answers 1.5 s after a request reaches it; `body` runs while such a request is in flight.
 */
async function withRequestInFlight(
  prefix: string,
  extra: Record<string, string>,
  options: { preload?: string; detached?: boolean },
  body: (run: ReturnType<typeof runStart>, inFlight: Promise<number>, dataDir: string) => Promise<void>,
) {
  const { dataDir, httpPort, natsPort, env } = await startEnv(prefix, {
    ACTORS: "identity",
    DERRICK_REQUEST_TIMEOUT: "10s",
    DERRICK_LOG_LEVEL: "info",
    ...extra,
  });
  const run = runStart(env, options);
  const { child } = run;
  let slow: { stop(): Promise<void> } | undefined;
  let nc: NatsConnection | undefined;
  try {
    const base = `http://127.0.0.1:${httpPort}`;
    await untilHealthy(base, run);
    nc = await internalConnection(dataDir, natsPort);
    let arrived!: () => void;
    const reached = new Promise<void>((r) => (arrived = r));
    const handler = async () => {
      arrived();
      await new Promise((r) => setTimeout(r, 1_500));
      return { version: "slow" };
    };
    slow = await serveActor(
      nc,
      { name: "system", description: "slow", endpoints: [endpoint({ name: "info", subject: subjects.system.info(), handler })] },
      { log: createLogger("silent"), concurrency: 4 },
    );
    const inFlight = fetch(`${base}/v1/system/info`).then((r) => r.status);
    await reached;
    await body(run, inFlight, dataDir);
  } finally {
    await slow?.stop().catch(() => undefined);
    await nc?.close().catch(() => undefined);
    if (child.exitCode === null) {
      if (options.detached) process.kill(-child.pid!, "SIGKILL");
      else child.kill("SIGKILL");
    }
  }
}

describe("derrick CLI", () => {
  it("cli - a bad configuration value stops start-up with exit 2 naming the variable", () => {
    const out = spawnSync(process.execPath, [CLI, "start"], { env: { ...process.env, DERRICK_HTTP_PORT: "eighty" }, encoding: "utf8" });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("DERRICK_HTTP_PORT");
  });

  it("cli - `derrick help` prints every command and exits 0; an unknown command prints the same to stderr and exits 2; `derrick config` masks URL credentials", () => {
    const help = spawnSync(process.execPath, [CLI, "--help"], { encoding: "utf8" });
    expect(help.status).toBe(0);
    for (const command of [
      "start",
      "edge",
      "actor",
      "apps create",
      "keys list",
      "devices add",
      "token --user",
      "sdk migrate",
      "seed",
      "config",
    ])
      expect(help.stdout).toContain(command);
    const unknown = spawnSync(process.execPath, [CLI, "strat"], { encoding: "utf8" });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("usage: derrick");
    const mirrors = JSON.stringify([{ organization: "o", environment: "e", twinId: "t", redis: "redis://:redis-pass@127.0.0.1:6379" }]);
    const config = spawnSync(process.execPath, [CLI, "config"], {
      env: { ...process.env, DERRICK_TWIN_MIRRORS: mirrors, DERRICK_LOG_LEVEL: "" },
      encoding: "utf8",
    });
    expect(config.status, config.stderr).toBe(0);
    expect(config.stdout).not.toContain("redis-pass");
    expect(JSON.parse(config.stdout)).toMatchObject({ logLevel: "info", twinMirrors: [{ redis: "redis://***@127.0.0.1:6379" }] });
  });

  it("cli - `derrick start` runs embedded NATS, every actor and the edge, and SIGTERM stops them all", async () => {
    const { dataDir, httpPort, env } = await startEnv("derrick-cli-", {
      DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.alpha]),
      DERRICK_LOG_LEVEL: "info",
    });
    const run = runStart(env);
    const { child, exited } = run;
    try {
      const base = `http://127.0.0.1:${httpPort}`;
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, {
        timeoutMs: 20_000,
        what: `readyz (log: ${run.log().slice(-500)})`,
      });
      const access_token = await clientToken(base, TEST_CLIENTS.alpha);
      const who = await fetch(`${base}/v1/system/whoami`, {
        headers: { authorization: `Bearer ${access_token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" },
      });
      expect(who.status).toBe(200);
      expect(existsSync(join(dataDir, "nats", "jetstream"))).toBe(true);
      expect(existsSync(join(dataDir, "issuer", "signing-key.jwk.json"))).toBe(true);
      const pids = serverPids(dataDir);
      expect(pids.length).toBe(1);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(run.log()).toContain("stopped");
      expect(pidAlive(pids[0]!)).toBe(false);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});

describe("derrick start and the terminal's Ctrl-C", () => {
  it("cli - a SIGINT to the whole process group (Ctrl-C) still lets a request in flight finish: the embedded server stops last", async () => {
    // Its own process group, like a shell job: a signal to -pid reaches everything in it.
    await withRequestInFlight("derrick-cli-int-", {}, { detached: true }, async ({ child, exited }, inFlight, dataDir) => {
      process.kill(-child.pid!, "SIGINT");
      expect(await inFlight).toBe(200);
      expect(await exited).toBe(0);
      expect(serverPids(dataDir)).toEqual([]);
    });
  });
});

describe("derrick start and an error nobody caught", () => {
  const FAIL_ON_SIGNAL = join(ROOT, "test", "platform", "fixtures", "fail-on-signal.ts");
  for (const [failAs, kind] of [
    ["rejection", "unhandledRejection"],
    ["exception", "uncaughtException"],
  ] as const) {
    it(`cli - an ${kind} in a background task is logged with its stack, the request in flight is still answered, and derrick exits 1 after draining`, async () => {
      // The fixture makes SIGUSR2 fail a background task inside derrick, with nothing to catch it.
      const extra = { FAIL_AS: failAs };
      await withRequestInFlight(`derrick-cli-${failAs}-`, extra, { preload: FAIL_ON_SIGNAL }, async (run, inFlight, dataDir) => {
        process.kill(run.child.pid!, "SIGUSR2");
        expect(await inFlight).toBe(200);
        expect(await run.exited).toBe(1);
        const lines = run
          .log()
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { level: number; msg: string; kind?: string; err?: { stack?: string }; exitCode?: number });
        const fatal = lines.find((line) => line.level === 60 && line.kind === kind);
        expect(fatal?.msg).toMatch(/stopping \(drain\)/);
        expect(fatal?.err?.stack).toMatch(/injected: .*\n\s+at /);
        expect(lines.at(-1)).toMatchObject({ msg: "stopped", exitCode: 1 });
        expect(serverPids(dataDir)).toEqual([]);
      });
    });
  }
});

describe("derrick start after a crash", () => {
  it("cli - a server left running by a derrick killed with SIGKILL is stopped by the next start in the same data dir", async () => {
    const { dataDir, httpPort, env } = await startEnv("derrick-cli-kill-", { ACTORS: "system,identity", DERRICK_LOG_LEVEL: "info" });
    const start = () => runStart(env);
    const ready = (run: ReturnType<typeof start>) =>
      eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200, {
        timeoutMs: 20_000,
        what: `readyz (log: ${run.log().slice(-500)})`,
      });
    const first = start();
    const second = { run: undefined as ReturnType<typeof start> | undefined };
    try {
      await ready(first);
      const [left] = serverPids(dataDir);
      // A second start on a data dir whose derrick is alive refuses, and leaves the first one's server be.
      const meanwhile = start();
      expect(await meanwhile.exited).not.toBe(0);
      expect(meanwhile.log()).toMatch(/another derrick \(pid \d+\) runs an embedded nats-server/);
      expect(pidAlive(left!)).toBe(true);
      first.child.kill("SIGKILL");
      await first.exited;
      expect(pidAlive(left!)).toBe(true); // its own process group: it outlived derrick
      second.run = start();
      await ready(second.run);
      expect(pidAlive(left!)).toBe(false);
      expect(serverPids(dataDir)).toHaveLength(1);
      second.run.child.kill("SIGTERM");
      expect(await second.run.exited).toBe(0);
      expect(serverPids(dataDir)).toEqual([]);
    } finally {
      for (const run of [first, second.run]) if (run && run.child.exitCode === null) run.child.kill("SIGKILL");
      for (const pid of serverPids(dataDir)) process.kill(pid, "SIGKILL");
    }
  });
});

describe("embedded nats-server users", () => {
  it("cli - the embedded server refuses anonymous clients and confines each device user to its own twin", async () => {
    const { connect } = await import("@nats-io/transport-node");
    const { Kvm } = await import("@nats-io/kv");
    const { jetstream } = await import("@nats-io/jetstream");
    const { DEVICE_JS_API } = await import("../../subjects/twins.ts");
    // A device account reaches its twin through the JetStream API derrick's account exports to it.
    const deviceKv = (nc: Parameters<typeof jetstream>[0], bucket: string) =>
      new Kvm(jetstream(nc, { apiPrefix: DEVICE_JS_API, checkAPI: false })).open(bucket, { allow_direct: true });
    const { dataDir, httpPort, natsPort, env } = await startEnv("derrick-cli-auth-", {
      DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.admin]),
      DERRICK_LOG_LEVEL: "warn",
    });
    const { child, exited } = runStart(env);
    const base = `http://127.0.0.1:${httpPort}`;
    const natsUrl = `nats://127.0.0.1:${natsPort}`;
    // `devices add` reloads the server's users: a device may log in once the reload is through.
    const deviceLogin = (creds: { user: string; password: string; inboxPrefix: string }, what: string) =>
      eventually(
        () =>
          connect({
            servers: natsUrl,
            user: creds.user,
            pass: creds.password,
            inboxPrefix: creds.inboxPrefix,
            reconnect: false,
            timeout: 2000,
          }),
        { what },
      );
    try {
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: 20_000, what: "readyz" });
      await expect(connect({ servers: natsUrl, reconnect: false, timeout: 2000 })).rejects.toThrow(/Authorization/i);

      // Desired values for two twins, through the REST API.
      const token = await clientToken(base, TEST_CLIENTS.admin);
      for (const twinId of ["dev-a", "dev-b"]) {
        const res = await fetch(`${base}/api/twin-properties/v1/acme/prod/${twinId}/twin-properties`, {
          method: "PUT",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ group: "g", twins: [{ name: "p", value: `for-${twinId}` }] }),
        });
        expect(res.status).toBe(200);
      }

      const added = spawnSync(
        process.execPath,
        [CLI, "devices", "add", "acme", "prod", "dev-a", "--name", "AppA", "--subscribe", "slbapps.AppA.DataIn", "--json"],
        { env, encoding: "utf8" },
      );
      expect(added.status).toBe(0);
      const creds = JSON.parse(added.stdout) as { user: string; password: string; inboxPrefix: string; reloaded: boolean };
      // Subjects that would reach derrick's actors, JetStream or other inboxes are refused, nothing written.
      const refused = spawnSync(
        process.execPath,
        [CLI, "devices", "add", "acme", "prod", "dev-x", "--name", "AppX", "--subscribe", "derrick.>", "--json"],
        { env, encoding: "utf8" },
      );
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toMatch(/\/subscribe\/0.*reserved/);
      expect(JSON.parse(readFileSync(join(dataDir, "nats", "users.json"), "utf8")).devices.AppX).toBeUndefined();
      expect(creds.reloaded).toBe(true);
      const device = await deviceLogin(creds, "device login after reload");
      try {
        const { twinBucket } = await import("../../subjects/twins.ts");
        const own = await deviceKv(device, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-a" }));
        expect((await own.get("twin_properties/g/desired/p"))?.string()).toBe("for-dev-a");
        const other = await deviceKv(device, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-b" })).catch(
          (e: Error) => e,
        );
        if (!(other instanceof Error)) {
          await expect(other.get("twin_properties/g/desired/p")).rejects.toThrow();
        }
        await expect(device.request("derrick.system.ping", undefined, { timeout: 1000 })).rejects.toThrow();
      } finally {
        await device.close();
      }
      // A device whose twin was never written: `devices add` creates its bucket (devices may not).
      const addedC = spawnSync(process.execPath, [CLI, "devices", "add", "acme", "prod", "dev-c", "--name", "AppC", "--json"], {
        env,
        encoding: "utf8",
      });
      expect(addedC.status, addedC.stderr).toBe(0);
      const credsC = JSON.parse(addedC.stdout) as { user: string; password: string; inboxPrefix: string; bucketCreated: boolean };
      expect(credsC.bucketCreated, addedC.stderr).toBe(true);
      const deviceC = await deviceLogin(credsC, "device C login");
      try {
        const { twinBucket } = await import("../../subjects/twins.ts");
        const bucket = twinBucket({ organization: "acme", environment: "prod", twinId: "dev-c" });
        expect((await (await deviceKv(deviceC, bucket)).status()).bucket).toBe(bucket);
      } finally {
        await deviceC.close();
      }
      // derrick's own processes work on with the internal user once the restarted server is back
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, {
        timeoutMs: 20_000,
        what: "readyz after the restarts",
      });
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
