import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { eventually } from "../harness/index.ts";
import { deviceInboxPrefix, deviceUserPermissions, twinBucket, twinBucketOptions, type TwinAddress } from "../../subjects/twins.ts";
import { DeviceClient, parseAppConfig, type TwinChange } from "../../sdk/index.ts";

const twinA: TwinAddress = { organization: "acme", environment: "prod", twinId: "dev-a" };
const twinB: TwinAddress = { organization: "acme", environment: "prod", twinId: "dev-b" };
const device = (name: string, twin: TwinAddress) => ({
  user: name,
  password: `${name}-pw`,
  permissions: deviceUserPermissions({ twin, appName: name, subscribe: [`slbapps.${name}.DataIn`], publish: [`slbapps.${name}.DataOut`] }),
});

describe("device isolation with per-device NATS users", () => {
  let dir: string;
  let server: NatsServer;
  let admin: NatsConnection;
  let appA: DeviceClient | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "derrick-nats-auth-"));
    const users = [{ user: "derrick", password: "derrick-pw" }, device("AppA", twinA), device("AppB", twinB)];
    server = await startNatsServer({ dir, port: -1, extraConfig: `authorization: ${JSON.stringify({ users })}` });
    admin = await connect({ servers: server.url, user: "derrick", pass: "derrick-pw" });
    for (const twin of [twinA, twinB]) {
      const kv = await new Kvm(admin).create(twinBucket(twin), twinBucketOptions(twin));
      await kv.put("twin_properties/g/desired/p", `secret-of-${twin.twinId}`);
    }
  });
  afterAll(async () => {
    await appA?.close();
    await admin?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("isolation - a device user reads and writes its own twin through the SDK", async () => {
    const config = parseAppConfig(
      { Name: "AppA", AEA2: { Twin: { Organization: "acme", Environment: "prod", Id: "dev-a" }, BusClient: { Server: server.url, Subscriptions: [{ DataIn: ["slbapps.AppA.DataIn"] }], Targets: [{ DataOut: ["slbapps.AppA.DataOut"] }] } } },
      { NATS_USER: "AppA", NATS_PASSWORD: "AppA-pw" },
    );
    appA = await DeviceClient.connect(config);
    const seen: TwinChange[] = [];
    appA.observe("g", "p", (c) => seen.push(c));
    await eventually(() => seen.length === 1);
    expect(seen[0]!.value).toBe("secret-of-dev-a");
    expect(await appA.setReported("g", "p", "ok")).toBeGreaterThan(0);
    await admin.flush();
    const kv = await new Kvm(admin).open(twinBucket(twinA));
    expect((await kv.get("twin_properties/g/reported/p"))?.string()).toBe("ok");
  });

  it("isolation - a device cannot read or write another device's twin or subjects", async () => {
    const nc = await connect({ servers: server.url, user: "AppA", pass: "AppA-pw", inboxPrefix: deviceInboxPrefix("AppA"), timeout: 2_000 });
    const violations: string[] = [];
    void (async () => {
      for await (const s of nc.status()) if (s.type === "error") violations.push(String((s as { error?: Error }).error?.message ?? s.type));
    })();
    try {
      const other = await new Kvm(nc).open(twinBucket(twinB));
      await expect(other.get("twin_properties/g/desired/p")).rejects.toThrow();
      await expect(other.put("twin_properties/g/reported/p", "hijack")).rejects.toThrow();
      nc.subscribe("slbapps.AppB.DataIn");
      nc.publish("slbapps.AppB.DataOut", "spoof");
      await eventually(() => violations.filter((v) => /permission/i.test(v)).length >= 2, { what: "permission violations" });
    } finally {
      await nc.close().catch(() => undefined);
    }
    const kvB = await new Kvm(admin).open(twinBucket(twinB));
    expect(await kvB.get("twin_properties/g/reported/p")).toBeNull();
  });
});
