import { afterAll, describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { eventually, freePort, TEST_CLIENTS } from "../harness/index.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CLI = join(ROOT, "bin", "derrick.ts");
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("derrick CLI", () => {
  it("cli - a bad configuration value stops start-up with exit 2 naming the variable", () => {
    const out = spawnSync(process.execPath, [CLI, "start"], { env: { ...process.env, DERRICK_HTTP_PORT: "eighty" }, encoding: "utf8" });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("DERRICK_HTTP_PORT");
  });

  it("cli - `derrick start` runs embedded NATS, every actor and the edge, and SIGTERM stops them all", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-cli-"));
    dirs.push(dataDir);
    const [httpPort, natsPort] = [await freePort(), await freePort()];
    const env = { ...process.env, DERRICK_DATA_DIR: dataDir, DERRICK_HTTP_PORT: String(httpPort), DERRICK_NATS_PORT: String(natsPort), DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.alpha]), DERRICK_LOG_LEVEL: "info" };
    delete (env as Record<string, string | undefined>).NATS_URL;
    const child = spawn(process.execPath, [CLI, "start"], { env, stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    child.stdout.on("data", (d) => (log += d));
    child.stderr.on("data", (d) => (log += d));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    try {
      const base = `http://127.0.0.1:${httpPort}`;
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: 20_000, what: `readyz (log: ${log.slice(-500)})` });
      const res = await fetch(`${base}/v2/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "client_credentials", client_id: "alpha", client_secret: TEST_CLIENTS.alpha.client_secret }),
      });
      const { access_token } = (await res.json()) as { access_token: string };
      const who = await fetch(`${base}/v1/system/whoami`, { headers: { authorization: `Bearer ${access_token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" } });
      expect(who.status).toBe(200);
      expect(existsSync(join(dataDir, "nats", "jetstream"))).toBe(true);
      expect(existsSync(join(dataDir, "issuer", "signing-key.jwk.json"))).toBe(true);
      const serverPids = spawnSync("pgrep", ["-f", join(dataDir, "nats", "nats-server.conf")], { encoding: "utf8" }).stdout.trim().split("\n").filter(Boolean).map(Number);
      expect(serverPids.length).toBe(1);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(log).toContain("stopped");
      expect(pidAlive(serverPids[0]!)).toBe(false);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});

describe("embedded nats-server users", () => {
  it("cli - the embedded server refuses anonymous clients and confines each device user to its own twin", async () => {
    const { connect } = await import("@nats-io/transport-node");
    const { Kvm } = await import("@nats-io/kv");
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-cli-auth-"));
    dirs.push(dataDir);
    const [httpPort, natsPort] = [await freePort(), await freePort()];
    const env = { ...process.env, DERRICK_DATA_DIR: dataDir, DERRICK_HTTP_PORT: String(httpPort), DERRICK_NATS_PORT: String(natsPort), DERRICK_CLIENTS: JSON.stringify([TEST_CLIENTS.admin]), DERRICK_LOG_LEVEL: "warn" };
    delete (env as Record<string, string | undefined>).NATS_URL;
    const child = spawn(process.execPath, [CLI, "start"], { env, stdio: ["ignore", "pipe", "pipe"] });
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    const base = `http://127.0.0.1:${httpPort}`;
    const natsUrl = `nats://127.0.0.1:${natsPort}`;
    try {
      await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: 20_000, what: "readyz" });
      await expect(connect({ servers: natsUrl, reconnect: false, timeout: 2000 })).rejects.toThrow(/Authorization/i);

      // Desired values for two twins, through the REST API.
      const token = ((await (await fetch(`${base}/v2/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ grant_type: "client_credentials", client_id: "admin", client_secret: TEST_CLIENTS.admin.client_secret }) })).json()) as { access_token: string }).access_token;
      for (const twinId of ["dev-a", "dev-b"]) {
        const res = await fetch(`${base}/api/twin-properties/v1/acme/prod/${twinId}/twin-properties`, {
          method: "PUT",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ group: "g", twins: [{ name: "p", value: `for-${twinId}` }] }),
        });
        expect(res.status).toBe(200);
      }

      const added = spawnSync(process.execPath, [CLI, "devices", "add", "acme", "prod", "dev-a", "--name", "AppA", "--subscribe", "slbapps.AppA.DataIn", "--json"], { env, encoding: "utf8" });
      expect(added.status).toBe(0);
      const creds = JSON.parse(added.stdout) as { user: string; password: string; inboxPrefix: string; reloaded: boolean };
      expect(creds.reloaded).toBe(true);
      const device = await eventually(() => connect({ servers: natsUrl, user: creds.user, pass: creds.password, inboxPrefix: creds.inboxPrefix, reconnect: false, timeout: 2000 }), { what: "device login after reload" });
      try {
        const { twinBucket } = await import("../../subjects/twins.ts");
        const own = await new Kvm(device).open(twinBucket({ organization: "acme", environment: "prod", twinId: "dev-a" }));
        expect((await own.get("twin_properties/g/desired/p"))?.string()).toBe("for-dev-a");
        const other = await new Kvm(device).open(twinBucket({ organization: "acme", environment: "prod", twinId: "dev-b" })).catch((e: Error) => e);
        if (!(other instanceof Error)) {
          await expect(other.get("twin_properties/g/desired/p")).rejects.toThrow();
        }
        await expect(device.request("derrick.system.ping", undefined, { timeout: 1000 })).rejects.toThrow();
      } finally {
        await device.close();
      }
      // A device whose twin was never written: `devices add` creates its bucket (devices may not).
      const addedC = spawnSync(process.execPath, [CLI, "devices", "add", "acme", "prod", "dev-c", "--name", "AppC", "--json"], { env, encoding: "utf8" });
      expect(addedC.status, addedC.stderr).toBe(0);
      const credsC = JSON.parse(addedC.stdout) as { user: string; password: string; inboxPrefix: string; bucketCreated: boolean };
      expect(credsC.bucketCreated).toBe(true);
      const deviceC = await eventually(() => connect({ servers: natsUrl, user: credsC.user, pass: credsC.password, inboxPrefix: credsC.inboxPrefix, reconnect: false, timeout: 2000 }), { what: "device C login" });
      try {
        const { twinBucket } = await import("../../subjects/twins.ts");
        const bucket = twinBucket({ organization: "acme", environment: "prod", twinId: "dev-c" });
        expect((await (await new Kvm(deviceC).open(bucket)).status()).bucket).toBe(bucket);
      } finally {
        await deviceC.close();
      }
      // derrick's own processes kept working with the internal user
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
