import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { loadConfig } from "../../config/index.ts";
import { boot } from "../../bin/boot.ts";
import { createLogger } from "../../platform/logger.ts";
import { Header, serviceName, subjects } from "../../subjects/index.ts";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { eventually, openBucket } from "../harness/index.ts";
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
  let appB: DeviceClient | undefined;
  let derrick: { stop(): Promise<void> } | undefined;
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
    await appB?.close();
    await derrick?.stop();
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
    const kv = await openBucket(admin, twinBucket(twinA));
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
    const kvB = await openBucket(admin, twinBucket(twinB));
    expect(await kvB.get("twin_properties/g/reported/p")).toBeNull();
  });

  it("isolation - a device cannot create streams: not its own bucket's stream with other devices' or derrick's subjects either", async () => {
    const nc = await connect({ servers: server.url, user: "AppA", pass: "AppA-pw", inboxPrefix: deviceInboxPrefix("AppA"), timeout: 2_000 });
    try {
      const jsm = await jetstreamManager(nc, { timeout: 1_000 });
      await admin.request(`$JS.API.STREAM.DELETE.KV_${twinBucket(twinA)}`, undefined, { timeout: 2_000 });
      await expect(jsm.streams.add({ name: `KV_${twinBucket(twinA)}`, subjects: [`$KV.${twinBucket(twinA)}.>`, "slbapps.AppB.>", "derrick.twins.>"] })).rejects.toThrow();
      const names: string[] = [];
      for await (const name of (await jetstreamManager(admin)).streams.names()) names.push(name);
      expect(names).not.toContain(`KV_${twinBucket(twinA)}`);
    } finally {
      await nc.close().catch(() => undefined);
      const kv = await new Kvm(admin).create(twinBucket(twinA), twinBucketOptions(twinA));
      await kv.put("twin_properties/g/desired/p", "secret-of-dev-a");
    }
  });

  it("isolation - a JetStream consumer a device aims at an actor or at another device's subscription delivers nothing they act on", async () => {
    // The twins actor, on this server as the internal user.
    const cfg = loadConfig({ NATS_URL: server.url, DERRICK_HTTP_PORT: "0", DERRICK_DATA_DIR: join(dir, "data"), DERRICK_LOG_LEVEL: "silent", DERRICK_CLIENTS: "[]" });
    derrick = await boot({ cfg, natsUrl: server.url, natsAuth: { user: "derrick", pass: "derrick-pw" }, log: createLogger("silent"), edge: false, actors: ["twins"], processMetrics: false });
    appB = await DeviceClient.connect(
      parseAppConfig(
        { Name: "AppB", AEA2: { Twin: { Organization: "acme", Environment: "prod", Id: "dev-b" }, BusClient: { Server: server.url, Subscriptions: [{ DataIn: ["slbapps.AppB.DataIn"] }], Targets: [{ DataOut: ["slbapps.AppB.DataOut"] }] } } },
        { NATS_USER: "AppB", NATS_PASSWORD: "AppB-pw" },
      ),
    );
    const inputsOfB: string[] = [];
    appB.on("DataIn", (m) => inputsOfB.push(JSON.stringify(m.data)));

    const nc = await connect({ servers: server.url, user: "AppA", pass: "AppA-pw", inboxPrefix: deviceInboxPrefix("AppA") });
    try {
      const bucket = twinBucket(twinA);
      // A twin write for device B with a forged principal, stored in A's own bucket ...
      const forged = headers();
      forged.set(Header.principal, JSON.stringify({ clientId: "x", subject: "x", groups: ["twins.writers"], kind: "service" }));
      forged.set(Header.partition, "opendes");
      nc.publish(`$KV.${bucket}.evil`, JSON.stringify({ organization: "acme", environment: "prod", twinId: "dev-b", group: "g", twins: [{ name: "p", value: "PWNED" }] }), { headers: forged });
      nc.publish(`$KV.${bucket}.spoof`, JSON.stringify({ spoofed: true }));
      await nc.flush();
      // ... and consumers that deliver it to the twins actor's queue group and to B's input subject.
      const jsm = await jetstreamManager(nc);
      await jsm.consumers.add(`KV_${bucket}`, { deliver_subject: subjects.twins.put(), deliver_group: serviceName("twins"), filter_subject: `$KV.${bucket}.evil`, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
      await jsm.consumers.add(`KV_${bucket}`, { deliver_subject: "slbapps.AppB.DataIn", filter_subject: `$KV.${bucket}.spoof`, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
      const delivered = async () => {
        let total = 0;
        for await (const c of (await jetstreamManager(admin)).consumers.list(`KV_${bucket}`)) total += c.delivered.stream_seq > 0 ? 1 : 0;
        return total;
      };
      await eventually(async () => (await delivered()) === 2, { what: "both consumers delivered" });
      await new Promise((r) => setTimeout(r, 300)); // the actor's turn (without the guard the write lands within ms)
      // A real publish to B's input arrives: the subscription works, only the delivery was dropped.
      admin.publish("slbapps.AppB.DataIn", JSON.stringify({ real: true }));
      await eventually(() => inputsOfB.length > 0, { what: "the real input" });
      expect(inputsOfB).toEqual([JSON.stringify({ real: true })]);
      const kvB = await openBucket(admin, twinBucket(twinB));
      expect((await kvB.get("twin_properties/g/desired/p"))?.string()).toBe("secret-of-dev-b");
    } finally {
      await nc.close().catch(() => undefined);
    }
  });
});
