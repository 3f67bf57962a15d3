/**
 * A newcomer's first `derrick start`: no configuration but a data dir and ports. A demo client with
 * every group is created once and printed; admin commands find the running instance from the data
 * dir alone. Never a demo client on another address or with an external issuer.
 */
import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { loadConfig } from "../../config/index.ts";
import { demoClient } from "../../bin/demo-client.ts";
import { ALL_GROUPS } from "../../subjects/groups.ts";
import { eventually } from "../harness/index.ts";
import { CLI, cliDataDir, cliEnv, spawnCli } from "../harness/cli.ts";
import { json } from "../harness/json.ts";
import type { TokenResponse } from "../../subjects/identity.ts";
import type { Principal } from "../../subjects/principal.ts";

const tempDir = () => cliDataDir("derrick-first-run-");

describe("first run", () => {
  it("first run - `derrick start` with no clients prints a demo client whose token works, and keeps it across restarts; admin commands find the instance without its port", async () => {
    const dataDir = tempDir();
    const { env, httpPort } = await cliEnv(dataDir, { DERRICK_LOG_LEVEL: "warn" });
    delete env.DERRICK_CLIENTS;
    const base = `http://127.0.0.1:${httpPort}`;
    const run = () => spawnCli(["start"], env);
    const first = run();
    let secret: string;
    let appkey: string;
    try {
      await eventually(() => /client secret:/.test(first.log()), {
        timeoutMs: 30_000,
        what: `the demo client (log: ${first.log().slice(-400)})`,
      });
      secret = /client secret: (\S+)/.exec(first.log())![1]!;
      appkey = /appkey: +(\S+)/.exec(first.log())![1]!;
      expect(first.log()).toContain(`${base}/docs`);
      // The printed curl works as printed.
      const curl = /(curl -s -d grant_type=client_credentials .*)/.exec(first.log())![1]!;
      const form = new URLSearchParams(curl.match(/-d (\S+)/g)!.map((d) => d.slice(3).split("=") as [string, string]));
      const token = (await json<TokenResponse>(await fetch(`${base}/v2/token`, { method: "POST", body: form }), 200)).access_token;
      const whoami = await fetch(`${base}/v1/system/whoami`, {
        headers: { authorization: `Bearer ${token}`, appkey, "slb-partition-id": "opendes" },
      });
      expect(whoami.status).toBe(200);
      expect((await json<{ principal: Principal }>(whoami)).principal.groups.sort()).toEqual([...ALL_GROUPS].sort());
      // An admin command with only the data dir: the embedded server's port is found there.
      const adminEnv = { ...env };
      delete adminEnv.DERRICK_NATS_PORT;
      const listed = spawnSync(process.execPath, [CLI, "apps", "list", "--json"], { env: adminEnv, encoding: "utf8", timeout: 30_000 });
      expect(listed.status, listed.stderr).toBe(0);
      expect(listed.stdout).toContain('"demo"');
    } finally {
      first.child.kill("SIGTERM");
      await first.exited;
    }
    const second = run();
    try {
      await eventually(() => /client secret:/.test(second.log()), { timeoutMs: 30_000, what: "the demo client again" });
      expect(/client secret: (\S+)/.exec(second.log())![1]).toBe(secret);
      expect(/appkey: +(\S+)/.exec(second.log())![1]).toBe(appkey);
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });

  it("first run - no demo client with DERRICK_CLIENTS, an external issuer, or an edge on another address", () => {
    const base = { DERRICK_DATA_DIR: tempDir() };
    expect(demoClient(loadConfig(base))?.groups).toEqual([...ALL_GROUPS]);
    expect(demoClient(loadConfig({ ...base, DERRICK_CLIENTS: "[]" }))).toBeUndefined();
    expect(demoClient(loadConfig({ ...base, DERRICK_HTTP_HOST: "0.0.0.0" }))).toBeUndefined();
    expect(
      demoClient(
        loadConfig({ ...base, DERRICK_AUTH_ISSUER: "https://login.example.com", DERRICK_AUTH_JWKS_URL: "https://login.example.com/jwks" }),
      ),
    ).toBeUndefined();
  });
});
