/**
 * A device's NATS credentials give it nothing in derrick's account. Every attack a review carried
 * out with a device user that shared derrick's account, run against the two ways derrick is deployed:
 * the embedded server (derrick writes the accounts from its users file) and an external server
 * configured with docs/nats/accounts.example.conf. The carriers are the reply subjects the server
 * answers on (a write's PubAck, a direct get) and consumer creation; the targets another twin, an
 * actor, the registry and the JetStream API.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { loadConfig } from "../../config/index.ts";
import { boot } from "../../bin/boot.ts";
import { createLogger } from "../../platform/logger.ts";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { accountsBlock, accountsConfig, addDeviceUser, ensureNatsUsers, migrateStoreToDerrickAccount } from "../../platform/nats-users.ts";
import { Header, subjects } from "../../subjects/index.ts";
import { DEVICE_JS_API, deviceInboxPrefix, twinBucket, twinKey, type TwinAddress } from "../../subjects/twins.ts";
import { REGISTRY_BUCKET } from "../../actors/identity/registry.ts";
import { RECORDS_STREAM } from "../../subjects/search.ts";
import { DeviceClient, parseAppConfig, type TwinChange } from "../../sdk/index.ts";
import { eventually, openBucket } from "../harness/index.ts";
import { EXAMPLE_DEVICES, EXAMPLE_INTERNAL } from "./accounts-example.ts";

const EXAMPLE = join(import.meta.dirname, "../../docs/nats/accounts.example.conf");
const twinA: TwinAddress = { organization: "acme", environment: "prod", twinId: "dev-a" };
const twinB: TwinAddress = { organization: "acme", environment: "prod", twinId: "dev-b" };
const bucketA = twinBucket(twinA);
const bucketB = twinBucket(twinB);
const ORIGINAL_B = "set by derrick for B";

type Deployment = {
  server: NatsServer;
  internal: { user: string; pass: string };
  devicePassword: string;
  /** The JetStream API prefix the device reaches its twin under (its KV writes go under it too). */
  api: string;
  cleanup(): Promise<void>;
};

/** `derrick start`'s way: a users file with devices added, its accounts block included by the server. */
async function embedded(): Promise<Deployment> {
  const dataDir = mkdtempSync(join(tmpdir(), "derrick-accounts-"));
  const users = ensureNatsUsers(dataDir);
  const devicePassword = await addDeviceUser(dataDir, {
    name: "AppA",
    twin: twinA,
    subscribe: ["slbapps.AppA.DataIn", "slbapps.AppA.RequestIn"],
    publish: ["slbapps.AppA.DataOut"],
  });
  await addDeviceUser(dataDir, { name: "AppB", twin: twinB, subscribe: ["slbapps.AppB.DataIn"], publish: ["slbapps.AppB.DataOut"] });
  const server = await startNatsServer({ dir: join(dataDir, "nats"), port: -1, authorization: accountsBlock(ensureNatsUsers(dataDir)) });
  return {
    server,
    internal: { user: users.internal.user, pass: users.internal.password },
    devicePassword,
    api: DEVICE_JS_API,
    cleanup: async () => (await server.stop(), rmSync(dataDir, { recursive: true, force: true })),
  };
}

/** An external server configured as docs/security.md says: the example accounts file included. */
async function external(): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "derrick-accounts-ext-"));
  copyFileSync(EXAMPLE, join(dir, "accounts.conf"));
  const server = await startNatsServer({ dir, port: -1, extraConfig: `include "accounts.conf"` });
  return {
    server,
    internal: { user: EXAMPLE_INTERNAL.user, pass: EXAMPLE_INTERNAL.password },
    devicePassword: EXAMPLE_DEVICES[0]!.password,
    api: DEVICE_JS_API,
    cleanup: async () => (await server.stop(), rmSync(dir, { recursive: true, force: true })),
  };
}

describe("device grants", () => {
  const b = { user: "AppB", password: "x", twin: twinB, subscribe: ["slbapps.AppB.DataIn"], publish: ["slbapps.AppB.DataOut"] };
  it("security - a grant that reaches the server's reply routing (_R_) or any reserved subject is refused before anything is written", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-grants-"));
    try {
      for (const subject of ["_R_.>", "_R_.abc.def", "_INBOX.>", "$KV.x.>", "derrick.>", ">"]) {
        await expect(addDeviceUser(dataDir, { name: "AppA", twin: twinA, subscribe: [subject], publish: [] }), subject).rejects.toThrow(
          /reserved/,
        );
        await expect(addDeviceUser(dataDir, { name: "AppA", twin: twinA, subscribe: [], publish: [subject] }), subject).rejects.toThrow(
          /reserved/,
        );
      }
      expect(ensureNatsUsers(dataDir).devices).toEqual({});
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("security - a device's Subscription or Target that can meet another device's Subscription is refused (wildcards included)", () => {
    const a = (subscribe: string[], publish: string[] = []) => ({ user: "AppA", password: "x", twin: twinA, subscribe, publish });
    for (const [subscribe, publish] of [
      [["slbapps.>"], []],
      [["slbapps.*.DataIn"], []],
      [["slbapps.AppB.DataOut"], []],
      [[], ["slbapps.AppB.DataIn"]],
      [[], ["slbapps.AppB.*"]],
    ] as const) {
      expect(() => accountsConfig(EXAMPLE_INTERNAL, [b, a([...subscribe], [...publish])]), JSON.stringify({ subscribe, publish })).toThrow(
        /AppB/,
      );
    }
    expect(() => accountsConfig(EXAMPLE_INTERNAL, [b, a(["slbapps.AppA.>"], ["slbapps.AppA.DataOut"])])).not.toThrow();
  });
});

describe("docs/nats/accounts.example.conf", () => {
  it("security - the example accounts file is what `derrick devices config` generates for its devices", () => {
    const text = readFileSync(EXAMPLE, "utf8");
    const block = text.slice(text.indexOf("accounts: ") + "accounts: ".length);
    expect(JSON.parse(block)).toEqual(accountsConfig(EXAMPLE_INTERNAL, EXAMPLE_DEVICES));
  });
});

describe.each([
  ["embedded", embedded],
  ["external", external],
] as const)("device accounts (%s nats-server)", (_name, deploy) => {
  let deployment: Deployment;
  let admin: NatsConnection;
  let device: NatsConnection;
  let derrick: { stop(): Promise<void> };
  let kvA: KV;
  let kvB: KV;
  let registry: KV;
  let app: DeviceClient | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), "derrick-accounts-data-"));
  /** Where the device's KV writes go: nats.js puts a prefixed API's prefix in front of `$KV`. */
  const kvWrites = () => (deployment.api === "$JS.API" ? "$KV" : `${deployment.api}.$KV`);

  beforeAll(async () => {
    deployment = await deploy();
    const url = deployment.server.url;
    const cfg = loadConfig({
      NATS_URL: url,
      NATS_USER: deployment.internal.user,
      NATS_PASSWORD: deployment.internal.pass,
      DERRICK_HTTP_PORT: "0",
      DERRICK_DATA_DIR: dataDir,
      DERRICK_LOG_LEVEL: "silent",
    });
    derrick = await boot({
      cfg,
      natsUrl: url,
      natsAuth: deployment.internal,
      log: createLogger("silent"),
      edge: false,
      actors: ["identity", "twins", "storage"],
      processMetrics: false,
    });
    admin = await connect({ servers: url, ...deployment.internal });
    const kvm = new Kvm(admin);
    kvA = await kvm.create(bucketA, { history: 2, allow_direct: true });
    kvB = await kvm.create(bucketB, { history: 2, allow_direct: true });
    await kvB.put(twinKey("g", "desired", "p"), ORIGINAL_B);
    registry = await openBucket(admin, REGISTRY_BUCKET);
    device = await connect({ servers: url, user: "AppA", pass: deployment.devicePassword, inboxPrefix: deviceInboxPrefix("AppA") });
  });
  afterAll(async () => {
    await app?.close();
    await device?.close();
    await admin?.close();
    await derrick?.stop();
    await deployment?.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** What the attacks aim at, unchanged: B's twin, the registry's keys, every stream. */
  async function targetsUntouched(streamsBefore: string[]) {
    expect((await kvB.get(twinKey("g", "desired", "p")))?.string()).toBe(ORIGINAL_B);
    for (const key of ["jwks.devkid", "appkeys.deadbeef", "revoked_keys.devkid"]) expect(await registry.get(key)).toBeNull();
    const streams: string[] = [];
    for await (const name of (await jetstreamManager(admin)).streams.names()) streams.push(name);
    expect(streams.sort()).toEqual(streamsBefore);
  }
  const streamNames = async () => {
    const names: string[] = [];
    for await (const name of (await jetstreamManager(admin)).streams.names()) names.push(name);
    return names.sort();
  };
  /** Where a carrier would deliver: another twin, an actor, the registry, the JetStream API. */
  const TARGETS = [
    `$KV.${bucketB}.${twinKey("g", "desired", "p")}`,
    subjects.twins.put(),
    `$KV.${REGISTRY_BUCKET}.jwks.devkid`,
    `$KV.${REGISTRY_BUCKET}.appkeys.deadbeef`,
    `$KV.${REGISTRY_BUCKET}.revoked_keys.devkid`,
    `$JS.API.STREAM.DELETE.${RECORDS_STREAM}`,
    `$JS.API.STREAM.DELETE.KV_${bucketB}`,
  ];

  it("security - the device works on its own twin through the SDK: reads desired, writes reported, gets changes", async () => {
    await kvA.put(twinKey("g", "desired", "p"), "for A");
    app = await DeviceClient.connect(
      parseAppConfig(
        {
          Name: "AppA",
          AEA2: {
            Twin: { Organization: "acme", Environment: "prod", Id: "dev-a" },
            BusClient: {
              Server: deployment.server.url,
              Subscriptions: [{ DataIn: ["slbapps.AppA.DataIn"] }],
              Targets: [{ DataOut: ["slbapps.AppA.DataOut"] }],
            },
          },
        },
        { NATS_USER: "AppA", NATS_PASSWORD: deployment.devicePassword },
      ),
    );
    const seen: TwinChange[] = [];
    app.observe("g", "p", (c) => seen.push(c));
    await eventually(() => seen.some((c) => c.value === "for A"), { what: "A's desired value" });
    await kvA.put(twinKey("g", "desired", "p"), "changed");
    await eventually(() => seen.some((c) => c.value === "changed"), { what: "the change" });
    expect(await app.setReported("g", "p", "ok")).toBeGreaterThan(0);
    expect((await kvA.get(twinKey("g", "reported", "p")))?.string()).toBe("ok");
    // Its subjects cross the boundary both ways.
    const inputs: unknown[] = [];
    app.on("DataIn", (m) => void inputs.push(m.data));
    const outs: string[] = [];
    const sub = admin.subscribe("slbapps.AppA.DataOut", { callback: (_e, m) => void outs.push(m.string()) });
    await admin.flush();
    admin.publish("slbapps.AppA.DataIn", JSON.stringify({ n: 1 }));
    await eventually(() => inputs.length === 1, { what: "a DataIn from derrick's side" });
    app.sendData({ n: 2 });
    await eventually(() => outs.length === 1, { what: "a DataOut on derrick's side" });
    sub.unsubscribe();
  });

  it("security - a PubAck aimed elsewhere (a write to its own bucket with another reply subject) lands in the device's account", async () => {
    const before = await streamNames();
    const write = `${kvWrites()}.${bucketA}.${twinKey("g", "reported", "carrier")}`;
    for (const target of TARGETS) device.publish(write, "carrier", { reply: target });
    // The carrier itself ran: each write was stored.
    await eventually(async () => (await kvA.get(twinKey("g", "reported", "carrier")))?.string() === "carrier", {
      what: "the device's writes",
    });
    await device.flush();
    await admin.flush();
    await targetsUntouched(before);
  });

  it("security - a direct get answered elsewhere carries nothing into derrick's account: not a forged twin PUT, a registry key or a stream deletion", async () => {
    const before = await streamNames();
    // A stored message with a forged principal, shaped as a twins.put request for B's twin.
    const forged = headers();
    forged.set(
      Header.principal,
      JSON.stringify({ clientId: "x", subject: "x", groups: ["twins.writers", "users.data.root"], kind: "service" }),
    );
    const ack = await device.request(
      `${kvWrites()}.${bucketA}.evil`,
      JSON.stringify({ ...twinB, group: "g", twins: [{ name: "p", value: "PWNED" }] }),
      { headers: forged, timeout: 5_000 },
    );
    const seq = (JSON.parse(ack.string()) as { seq: number }).seq;
    expect(seq).toBeGreaterThan(0);
    // The get itself is answered to the device.
    const own = await device.request(`${deployment.api}.DIRECT.GET.KV_${bucketA}`, JSON.stringify({ seq }));
    expect(own.headers?.get("Nats-Sequence")).toBe(String(seq));
    for (const target of TARGETS) {
      device.publish(`${deployment.api}.DIRECT.GET.KV_${bucketA}`, JSON.stringify({ seq }), { reply: target });
      device.publish(`${deployment.api}.DIRECT.GET.KV_${bucketA}.$KV.${bucketA}.evil`, undefined, { reply: target });
    }
    await device.flush();
    // A request after the carriers on the same connection: they were handled before its answer.
    await device.request(`${deployment.api}.STREAM.INFO.KV_${bucketA}`);
    await admin.flush();
    await targetsUntouched(before);
  });

  it("security - a device cannot create consumers or streams, call actors or reach any other JetStream API in derrick's account", async () => {
    const before = await streamNames();
    const consumersOf = async (stream: string) => {
      const names: string[] = [];
      for await (const c of (await jetstreamManager(admin)).consumers.list(stream)) names.push(c.name);
      return names;
    };
    const recordsConsumers = await consumersOf(RECORDS_STREAM);
    const aConsumers = await consumersOf(`KV_${bucketA}`);
    const consumer = (deliver: string) =>
      JSON.stringify({ stream_name: RECORDS_STREAM, config: { deliver_subject: deliver, ack_policy: "none", deliver_policy: "all" } });
    const attempts: Array<[string, string]> = [
      [`$JS.API.CONSUMER.CREATE.${RECORDS_STREAM}`, consumer(`${deviceInboxPrefix("AppA")}.records`)],
      [`${deployment.api}.CONSUMER.CREATE.${RECORDS_STREAM}`, consumer(`${deviceInboxPrefix("AppA")}.records`)],
      [
        `${deployment.api}.CONSUMER.CREATE.KV_${bucketA}`,
        JSON.stringify({ stream_name: `KV_${bucketA}`, config: { deliver_subject: subjects.twins.put(), ack_policy: "none" } }),
      ],
      [`$JS.API.STREAM.CREATE.KV_${bucketA}`, JSON.stringify({ name: `KV_${bucketA}`, subjects: ["derrick.>"] })],
      [`${deployment.api}.STREAM.DELETE.KV_${bucketB}`, ""],
      [`$JS.API.STREAM.DELETE.KV_${bucketB}`, ""],
      [`${deployment.api}.STREAM.MSG.GET.KV_${bucketA}`, JSON.stringify({ seq: 1 })],
      [subjects.twins.put(), JSON.stringify({ ...twinB, group: "g", twins: [{ name: "p", value: "PWNED" }] })],
      [subjects.twins.ensure(), JSON.stringify(twinB)],
    ];
    for (const [subject, body] of attempts) {
      // Refused (permissions), unanswered or answered with an error: never carried out.
      const answer = await device.request(subject, body, { timeout: 1_000 }).then(
        (m) => m.string(),
        (e: Error) => e.message,
      );
      expect(answer, subject).not.toMatch(/"created"|"config":\{"name"/);
    }
    await admin.flush();
    expect(await consumersOf(RECORDS_STREAM)).toEqual(recordsConsumers);
    expect(await consumersOf(`KV_${bucketA}`)).toEqual(aConsumers);
    await targetsUntouched(before);
  });

  it("security - a device cannot touch another device's twin or subjects", async () => {
    const violations: string[] = [];
    void (async () => {
      for await (const s of device.status()) if (s.type === "error") violations.push(String((s as { error?: Error }).error?.message));
    })();
    const other = await device.request(`${deployment.api}.DIRECT.GET.KV_${bucketB}`, JSON.stringify({ seq: 1 }), { timeout: 1_000 }).then(
      () => "answered",
      (e: Error) => e.message,
    );
    expect(other).not.toBe("answered");
    device.publish(`${kvWrites()}.${bucketB}.${twinKey("g", "desired", "p")}`, "hijack");
    device.publish(`$KV.${bucketB}.${twinKey("g", "desired", "p")}`, "hijack");
    device.subscribe("slbapps.AppB.DataIn");
    device.publish("slbapps.AppB.DataIn", "spoof");
    await device.flush();
    await eventually(() => violations.filter((v) => /permission/i.test(v)).length >= 1, { what: "permission violations" });
    expect((await kvB.get(twinKey("g", "desired", "p")))?.string()).toBe(ORIGINAL_B);
  });
});

describe("upgrading an embedded server's store", () => {
  it("security - streams made before accounts (global account) are found in account DERRICK after the move", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-accounts-upgrade-"));
    const natsDir = join(dataDir, "nats");
    try {
      const before = await startNatsServer({ dir: natsDir, port: -1 });
      const nc = await connect({ servers: before.url });
      await (await new Kvm(nc).create("kept", { allow_direct: true })).put("k", "from before");
      await nc.close();
      await before.stop();
      expect(migrateStoreToDerrickAccount(natsDir)).toBe(true);
      expect(migrateStoreToDerrickAccount(natsDir)).toBe(false); // once
      const users = ensureNatsUsers(dataDir);
      const after = await startNatsServer({ dir: natsDir, port: -1, authorization: accountsBlock(users) });
      const internal = await connect({ servers: after.url, user: users.internal.user, pass: users.internal.password });
      expect((await (await openBucket(internal, "kept")).get("k"))?.string()).toBe("from before");
      await internal.close();
      await after.stop();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("the users file", () => {
  it("security - devices added at the same moment are all kept (the users file is changed under a lock)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "derrick-users-race-"));
    try {
      const names = ["AppA", "AppB", "AppC", "AppD"];
      await Promise.all(
        names.map((name, i) =>
          addDeviceUser(dataDir, {
            name,
            twin: { organization: "acme", environment: "prod", twinId: `d${i}` },
            subscribe: [`slbapps.${name}.DataIn`],
            publish: [],
          }),
        ),
      );
      expect(Object.keys(ensureNatsUsers(dataDir).devices).sort()).toEqual(names);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("a device whose twin bucket does not exist yet", () => {
  it("security - the SDK waits for it with a back-off, not a stream of requests into derrick's account, and stops when closed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "derrick-accounts-nobucket-"));
    const twin = { organization: "acme", environment: "prod", twinId: "not-yet" };
    const accounts = accountsConfig(EXAMPLE_INTERNAL, [{ user: "Waiting", password: "waiting-pw", twin, subscribe: [], publish: [] }]);
    const server = await startNatsServer({ dir, port: -1, extraConfig: `accounts: ${JSON.stringify(accounts)}` });
    const admin = await connect({ servers: server.url, user: EXAMPLE_INTERNAL.user, pass: EXAMPLE_INTERNAL.password });
    const device = await connect({ servers: server.url, user: "Waiting", pass: "waiting-pw", inboxPrefix: deviceInboxPrefix("Waiting") });
    try {
      let lookups = 0;
      const spy = admin.subscribe(`$JS.API.STREAM.INFO.KV_${twinBucket(twin)}`, { callback: () => void lookups++ });
      await admin.flush();
      const { JetStreamTwinBackend } = await import("../../sdk/kv/jetstream.ts");
      const backend = new JetStreamTwinBackend(device, twin, () => undefined);
      const started = backend.start(() => undefined).catch((e: Error) => e);
      // The back-off doubles from 100 ms: a handful of lookups in the first second, not thousands.
      await eventually(() => lookups >= 3, { what: "a few lookups" });
      await new Promise((r) => setTimeout(r, 1_000));
      expect(lookups).toBeLessThan(30);
      await backend.close();
      expect(await started).toBeInstanceOf(Error);
      const atClose = lookups;
      await new Promise((r) => setTimeout(r, 2_500));
      expect(lookups - atClose).toBeLessThanOrEqual(1);
      spy.unsubscribe();
    } finally {
      await device.close();
      await admin.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
