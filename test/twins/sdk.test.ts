import { afterAll, describe, expect } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually, freePort, startSlowLink, startTestNats, type SlowLink, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { twinBucket, twinBucketOptions, twinKey, type TwinPutReply } from "../../subjects/twins.ts";
import { putTwin, twinState } from "./helpers.ts";
import { accountsConfig } from "../../platform/nats-users.ts";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { JetStreamTwinBackend } from "../../sdk/kv/jetstream.ts";
import {
  DeviceClient,
  parseAppConfig,
  configStatusName,
  type AppConfig,
  type InboundMessage,
  type SdkLog,
  type TwinChange,
} from "../../sdk/index.ts";

function appDocument(name: string, twin: string, server: string, bus: { sub?: string[]; out?: string[] } = {}) {
  return {
    Name: name,
    AEA2: {
      Twin: { Organization: "acme", Environment: "prod", Id: twin },
      BusClient: {
        Server: server,
        Subscriptions: [{ DataIn: bus.sub ?? [`slbapps.${name}.DataIn`] }, { RequestIn: [`slbapps.${name}.RequestIn`] }],
        Targets: [
          { DataOut: bus.out ?? [`slbapps.${name}.DataOut`, "slbapps.events.DataIn"] },
          { RequestOut: [`slbapps.${name}.RequestOut`] },
        ],
      },
    },
    AppConfig: { Factor: "0.5" },
  };
}

/** `peer`: a connection of its own, as another process on the bus. */
const it = derrickTest({ actors: ["identity", "twins"] }).extend("peer", { scope: "file" }, async ({ connection }) => connection("peer"));

const put = (derrick: TestDerrick, twin: string, group: string, twins: Array<{ name: string; value: string }>) =>
  putTwin(derrick, twin, { group, twins });

describe("device SDK over JetStream KV", () => {
  const devices: DeviceClient[] = [];
  const links: SlowLink[] = [];
  const start = async (config: AppConfig, log?: SdkLog) => {
    const device = await DeviceClient.connect(config, { reconnectTimeWaitMs: 100, ...(log ? { log } : {}) });
    devices.push(device);
    return device;
  };
  afterAll(async () => {
    for (const device of devices) await device.close().catch(() => undefined);
    for (const link of links) await link.close();
  });
  /** A device of `app` on twin `twinId` observing g/p, once the first value PUT (v1) has reached it. */
  const observingFirstValue = async (derrick: TestDerrick, natsUrl: string, app: string, twinId: string) => {
    const device = await start(parseAppConfig(appDocument(app, twinId, natsUrl)));
    const seen: TwinChange[] = [];
    device.observe("g", "p", (c) => void seen.push(c));
    await put(derrick, twinId, "g", [{ name: "p", value: "v1" }]);
    await eventually(() => seen.length === 1, { what: "the first value" });
    return { device, values: () => seen.map((c) => c.value), seen };
  };

  it("sdk - a REST PUT reaches the observe callback with the value and the version", async ({ derrick, nats }) => {
    const device = await start(parseAppConfig(appDocument("App1", "dev-a", nats.url)));
    const seen: TwinChange[] = [];
    device.observe("setpoints", undefined, (change) => seen.push(change));
    const res = await put(derrick, "dev-a", "setpoints", [
      { name: "rate", value: "5" },
      { name: "limit", value: '{"max":9}' },
    ]);
    const body = await json<TwinPutReply>(res);
    await eventually(() => seen.length === 2, { what: "both properties" });
    expect(seen.map((c) => [c.name, c.value, c.version])).toEqual(
      body.twins.map((t) => [t.name, t.name === "rate" ? "5" : '{"max":9}', t.version]),
    );
    expect(await device.getDesired("setpoints", "rate")).toEqual({ value: "5", version: body.twins[0]!.version });
    await device.setReported("setpoints", "rate", "5");
    const state = await twinState(derrick, "dev-a");
    expect(state.reported.setpoints!.rate!.value).toBe("5");
    // Readers ignore reserved names, so the SDK refuses to write them.
    await expect(device.setReported("__proto__", "rate", "5")).rejects.toThrow(/reserved/);
    await expect(device.setReported("setpoints", "constructor", "5")).rejects.toThrow(/reserved/);
    // A late observer gets the current values at once.
    const late: string[] = [];
    device.observe("setpoints", "rate", (c) => late.push(c.value!));
    await eventually(() => late.length === 1);
    expect(late).toEqual(["5"]);
  });

  it("sdk - a device starting on a twin with history gets each property's current value once: no value a later PUT replaced comes first", async ({
    derrick,
    peer,
  }) => {
    const names = ["a", "b", "c"];
    for (let round = 0; round < 4; round++)
      expect(
        (
          await put(
            derrick,
            "dev-hist",
            "g",
            names.map((name) => ({ name, value: `r${round}` })),
          )
        ).status,
      ).toBe(200);
    // The bucket keeps round 2's values but not its claim records: a watch that handed on what it
    // received at once would give r2 first, one property at a time.
    const backend = new JetStreamTwinBackend(peer, { organization: "acme", environment: "prod", twinId: "dev-hist" }, () => undefined);
    const delivered: string[] = [];
    await backend.start((changes) => delivered.push(...changes.map((c) => `${c.name}=${c.value}`)));
    try {
      await eventually(() => delivered.length >= 3, { what: "the current values" });
      await new Promise((r) => setTimeout(r, 300));
      expect(delivered.sort()).toEqual(["a=r3", "b=r3", "c=r3"]);
    } finally {
      await backend.close();
    }
  });

  it("sdk - callbacks that throw or reject are logged and the app goes on: a late observer still gets every current value", async ({
    derrick,
    nats,
    peer,
  }) => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const errors: string[] = [];
      const device = await start(
        parseAppConfig(appDocument("AppThrows", "dev-throws", nats.url)),
        (level, message, data) => void (level === "error" && errors.push(`${message}: ${String(data?.error)}`)),
      );
      await put(derrick, "dev-throws", "setpoints", [
        { name: "a", value: "bad" },
        { name: "b", value: "2" },
        { name: "c", value: "3" },
      ]);
      const first: string[] = [];
      device.observe("setpoints", undefined, (c) => void first.push(c.name));
      await eventually(() => first.length === 3, { what: "the values" });
      // Registered later: its first values come from the replay; the first one throws.
      const late: string[] = [];
      device.observe("setpoints", undefined, (c) => {
        late.push(c.name);
        if (c.value === "bad") throw new Error("bad setpoint");
      });
      device.observe("setpoints", "b", async () => {
        throw new Error("async apply failed");
      });
      device.on("DataIn", async () => {
        throw new Error("async DataIn handler failed");
      });
      device.onConfig(async () => {
        throw new Error("async onConfig failed");
      });
      await eventually(() => late.length === 3, { what: "every current value for the late observer" });
      expect(late.sort()).toEqual(["a", "b", "c"]);
      peer.publish("slbapps.AppThrows.DataIn", "{}");
      await put(derrick, "dev-throws", "config", [{ name: "AppThrows", value: "{not json" }]);
      await put(derrick, "dev-throws", "setpoints", [{ name: "b", value: "22" }]);
      await eventually(() => late.length === 4, { what: "the next change" });
      await eventually(() => errors.length === 5, { what: "the five failures logged" });
      expect(errors.sort()).toEqual([
        "message callback failed: async DataIn handler failed",
        "onConfig listener failed: async onConfig failed",
        "twin callback failed: async apply failed",
        "twin callback failed: async apply failed",
        "twin callback failed: bad setpoint",
      ]);
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("sdk - an observer registered while a batch is delivered never gets an older value after a newer one", async ({ derrick, nats }) => {
    const device = await start(parseAppConfig(appDocument("AppOrder", "dev-order", nats.url)));
    await put(derrick, "dev-order", "g", [
      { name: "a", value: "a0" },
      { name: "b", value: "b0" },
    ]);
    const seenA: string[] = [];
    const seenB: string[] = [];
    device.observe("g", "a", (c) => {
      seenA.push(c.value!);
      // The app starts following b once a says so: in the middle of the batch {a1, b1}.
      if (c.value === "a1") device.observe("g", "b", (b) => void seenB.push(`${b.value}@${b.version}`));
    });
    await eventually(() => seenA.length === 1, { what: "a0" });
    const res = await put(derrick, "dev-order", "g", [
      { name: "a", value: "a1" },
      { name: "b", value: "b1" },
    ]);
    const versionB = (await json<TwinPutReply>(res)).twins.find((t) => t.name === "b")!.version;
    await eventually(() => seenB.length >= 1, { what: "b for the new observer" });
    // A marker change after the batch: once it has arrived, any replay has run.
    const marker: string[] = [];
    device.observe("g", "marker", (c) => void marker.push(c.value!));
    await put(derrick, "dev-order", "g", [{ name: "marker", value: "m" }]);
    await eventually(() => marker.length === 1, { what: "the marker" });
    expect(seenB).toEqual([`b1@${versionB}`]);
  });

  it("sdk - messages() keeps at most its limit for a slow reader, dropping the oldest and counting them", async ({ nats, peer }) => {
    const device = await start(parseAppConfig(appDocument("AppSlow", "dev-slow", nats.url)));
    const iterator = device.messages("DataIn", { limit: 5 });
    for (let seq = 0; seq < 20; seq++) peer.publish("slbapps.AppSlow.DataIn", JSON.stringify({ seq }));
    await peer.flush();
    await eventually(() => iterator.dropped === 15, { what: "15 dropped" });
    const kept: unknown[] = [];
    for (let i = 0; i < 5; i++) kept.push(((await iterator.next()).value!.data as { seq: number }).seq);
    expect(kept).toEqual([15, 16, 17, 18, 19]);
    await iterator.return!();
  });

  it("sdk - close() ends the messages() iterators: what was queued is still read, then a for-await loop over them finishes", async ({
    nats,
    peer,
  }) => {
    const device = await DeviceClient.connect(parseAppConfig(appDocument("AppClosing", "dev-closing", nats.url)), {
      reconnectTimeWaitMs: 100,
    });
    const messages = device.messages("DataIn");
    let arrived = 0;
    device.on("DataIn", () => void arrived++);
    peer.publish("slbapps.AppClosing.DataIn", JSON.stringify({ n: 1 }));
    await eventually(() => arrived === 1, { what: "the message queued" });
    await device.close();
    const read: unknown[] = [];
    const loop = (async () => {
      for await (const m of messages) read.push(m.data);
      return "ended";
    })();
    expect(await Promise.race([loop, new Promise((r) => setTimeout(() => r("still waiting"), 2_000))])).toBe("ended");
    expect(read).toEqual([{ n: 1 }]);
  });

  it("sdk - a config twin that leaves Subscriptions unchanged loses no inbound message", async ({ derrick, nats, peer }) => {
    // Over a slow link, messages are still on their way to the client when a config is applied: a
    // re-subscription (the client drops messages of the subscription it closed) would lose them.
    const link = await startSlowLink(nats, { pieceBytes: 2_048, pauseMs: 2 });
    links.push(link);
    const device = await start(parseAppConfig(appDocument("AppKeep", "dev-keep", link.url)));
    const got = new Set<number>();
    device.on("DataIn", (m) => void got.add((m.data as { seq: number }).seq));
    let seq = 0;
    let running = true;
    const publishing = (async () => {
      while (running) {
        for (let i = 0; i < 20; i++) peer.publish("slbapps.AppKeep.DataIn", JSON.stringify({ seq: seq++ }));
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    for (let k = 1; k <= 3; k++) {
      const doc = { ...appDocument("AppKeep", "dev-keep", nats.url), AppConfig: { Factor: String(k) } };
      await put(derrick, "dev-keep", "config", [{ name: "AppKeep", value: JSON.stringify(doc) }]);
      await eventually(async () => (await device.getReported("config", "AppKeep"))?.value === JSON.stringify(doc), {
        what: `config ${k} acknowledged`,
      });
    }
    running = false;
    await publishing;
    await peer.flush();
    await eventually(() => got.size === seq, { what: "every message", timeoutMs: 5_000 }).catch(() => undefined);
    const missing = Array.from({ length: seq }, (_, i) => i).filter((i) => !got.has(i));
    expect(missing).toEqual([]);
  });

  it("sdk - sendData and sendEvent return 0 and publish nothing while the bus link is down; isConnected() says so, and true again once it is back", async ({
    nats,
  }) => {
    const bus = await startTestNats();
    try {
      const doc = appDocument("AppOffline", "dev-offline", bus.url);
      (doc.AEA2 as Record<string, unknown>).KvClient = { Server: nats.url };
      const device = await start(parseAppConfig(doc));
      expect(device.isConnected()).toBe(true);
      expect(device.sendData({ x: 1 })).toBe(2);
      await bus.restart(async () => {
        await eventually(() => device.sendData({ x: 2 }) === 0, { what: "sendData refused while offline" });
        expect(device.isConnected()).toBe(false);
        expect(device.sendEvent({ x: 3 })).toBe(0);
      });
      await eventually(() => device.isConnected(), { what: "the link back", timeoutMs: 10_000 });
      expect(device.sendData({ x: 4 })).toBe(2);
      await device.close();
      expect(device.isConnected()).toBe(false);
    } finally {
      await bus.cleanup();
    }
  });

  it("sdk - inbound kinds arrive as callbacks and iterators; sendData goes to every DataOut subject; sendRequest gets replies", async ({
    nats,
    peer,
  }) => {
    const device = await start(parseAppConfig(appDocument("App2", "dev-b", nats.url)));
    const received: InboundMessage[] = [];
    device.on("DataIn", (m) => received.push(m));
    const iterator = device.messages("DataIn");
    const report = device.dataReport({ temp: { value: 21.5, quality_code: 0, metadata: { uom: "temperature:degC", prop: "value" } } });
    peer.publish("slbapps.App2.DataIn", JSON.stringify(report));
    await eventually(() => received.length === 1);
    expect((received[0]!.data as typeof report).device[0]!.tags.temp!.value).toBe(21.5);
    expect((await iterator.next()).value?.subject).toBe("slbapps.App2.DataIn");
    await iterator.return!();

    const outs: string[] = [];
    peer.subscribe("slbapps.App2.DataOut", { callback: (_e, m) => void outs.push(m.subject) });
    peer.subscribe("slbapps.events.DataIn", { callback: (_e, m) => void outs.push(m.subject) });
    await peer.flush();
    expect(device.sendData(report)).toBe(2);
    await eventually(() => outs.length === 2);
    expect(outs.sort()).toEqual(["slbapps.App2.DataOut", "slbapps.events.DataIn"]);

    peer.subscribe("slbapps.App2.RequestOut", {
      callback: (_e, m) => void m.respond(JSON.stringify({ ok: (JSON.parse(m.string()) as { q: number }).q + 1 })),
    });
    await peer.flush();
    expect(await device.sendRequest({ q: 1 }, { timeoutMs: 2_000 })).toEqual([
      { subject: "slbapps.App2.RequestOut", ok: true, data: { ok: 2 } },
    ]);

    device.on("RequestIn", (m) => m.respond?.({ pong: m.data }));
    const reply = await peer.request("slbapps.App2.RequestIn", JSON.stringify("hi"), { timeout: 2_000 });
    expect(reply.json()).toEqual({ pong: "hi" });
  });

  it("sdk - an invalid config twin is ignored and its problem reported", async ({ derrick, nats }) => {
    const config = parseAppConfig(appDocument("App3", "dev-c", nats.url));
    const device = await start(config);
    const statuses: number[] = [];
    device.onConfig((_c, status) => statuses.push(status.ac));
    await put(derrick, "dev-c", "config", [{ name: "App3", value: "{not json" }]);
    await eventually(() => statuses.length === 1);
    expect(statuses).toEqual([400]);
    expect(device.config.bus.subscriptions.DataIn).toEqual(["slbapps.App3.DataIn"]);
    const status = await device.getReported("config", configStatusName("App3"));
    expect(JSON.parse(status!.value)).toMatchObject({ ac: 400 });
    expect(await device.getReported("config", "App3")).toBeUndefined();
    // Valid JSON, wrong shape: named key in the report.
    const bad = appDocument("App3", "dev-c", nats.url);
    (bad.AEA2.BusClient as Record<string, unknown>).Subscriptions = [{ DataIn: ["has space"] }];
    await put(derrick, "dev-c", "config", [{ name: "App3", value: JSON.stringify(bad) }]);
    await eventually(() => statuses.length === 2);
    const second = JSON.parse((await device.getReported("config", configStatusName("App3")))!.value) as { ac: number; ad: string };
    expect(second.ac).toBe(400);
    expect(second.ad).toContain("AEA2:BusClient:Subscriptions:0:DataIn:0");
  });

  it("sdk - a valid config twin reloads, re-subscribes Subscriptions and Targets, and is acknowledged as reported", async ({
    derrick,
    nats,
    peer,
  }) => {
    const device = await start(parseAppConfig(appDocument("App4", "dev-d", nats.url)));
    const received: string[] = [];
    device.on("DataIn", (m) => received.push(m.subject));
    const next = appDocument("App4", "dev-d", nats.url, { sub: ["slbapps.App4.NewIn"], out: ["slbapps.App4.NewOut"] });
    const text = JSON.stringify(next);
    const res = await put(derrick, "dev-d", "config", [{ name: "App4", value: text }]);
    expect(res.status).toBe(200);
    await eventually(async () => (await device.getReported("config", "App4"))?.value === text, { what: "reported ack" });
    expect(device.config.bus.subscriptions.DataIn).toEqual(["slbapps.App4.NewIn"]);
    peer.publish("slbapps.App4.DataIn", "{}");
    peer.publish("slbapps.App4.NewIn", "{}");
    await eventually(() => received.length >= 1);
    await peer.flush();
    expect(received).toEqual(["slbapps.App4.NewIn"]);
    const outs: string[] = [];
    peer.subscribe("slbapps.App4.>", { callback: (_e, m) => void outs.push(m.subject) });
    await peer.flush();
    device.sendData({ x: 1 });
    await eventually(() => outs.length === 1);
    expect(outs).toEqual(["slbapps.App4.NewOut"]);
  });

  it("sdk - a config twin whose new subscriptions the broker refuses is not acknowledged as applied: ac 403 and the old subscriptions stay", async () => {
    const twin = { organization: "acme", environment: "prod", twinId: "dev-perm" };
    const accounts = accountsConfig({ user: "admin", password: "pw" }, [
      { user: "AppPerm", password: "AppPerm-pw", twin, subscribe: ["slbapps.AppPerm.DataIn"], publish: ["slbapps.AppPerm.DataOut"] },
    ]);
    const dir = mkdtempSync(join(tmpdir(), "derrick-sdk-perm-"));
    let server: NatsServer | undefined;
    let admin: NatsConnection | undefined;
    try {
      server = await startNatsServer({ dir, port: -1, extraConfig: `accounts: ${JSON.stringify(accounts)}` });
      const url = server.url;
      admin = await connect({ servers: url, user: "admin", pass: "pw" });
      const kv = await new Kvm(admin).create(twinBucket(twin), twinBucketOptions(twin));
      const doc = (sub: string) => ({
        Name: "AppPerm",
        AEA2: {
          Twin: { Organization: "acme", Environment: "prod", Id: "dev-perm" },
          BusClient: { Server: url, Subscriptions: [{ DataIn: [sub] }], Targets: [{ DataOut: ["slbapps.AppPerm.DataOut"] }] },
        },
      });
      const device = await start(parseAppConfig(doc("slbapps.AppPerm.DataIn"), { NATS_USER: "AppPerm", NATS_PASSWORD: "AppPerm-pw" }));
      const got: string[] = [];
      device.on("DataIn", (m) => void got.push(m.subject));
      const statuses: number[] = [];
      device.onConfig((_c, status) => void statuses.push(status.ac));
      await kv.put(twinKey("config", "desired", "AppPerm"), JSON.stringify(doc("slbapps.AppPerm.Forbidden")));
      await eventually(async () => (await kv.get(twinKey("config", "reported", configStatusName("AppPerm"))))?.string(), {
        what: "the config status",
      });
      const status = JSON.parse((await kv.get(twinKey("config", "reported", configStatusName("AppPerm"))))!.string()) as {
        ac: number;
        ad: string;
      };
      expect(status.ac).toBe(403);
      expect(status.ad).toContain("slbapps.AppPerm.Forbidden");
      expect(statuses).toEqual([403]);
      expect(await kv.get(twinKey("config", "reported", "AppPerm"))).toBeNull();
      expect(device.config.bus.subscriptions.DataIn).toEqual(["slbapps.AppPerm.DataIn"]);
      // The running subscription still delivers.
      admin.publish("slbapps.AppPerm.DataIn", "{}");
      await eventually(() => got.length === 1, { what: "a message on the old subscription" });
    } finally {
      await admin?.close();
      await server?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sdk - connect applies the config twin already stored before it returns (SDK 3.x read_config_twin at connect)", async ({
    derrick,
    nats,
    peer,
  }) => {
    const next = appDocument("App6", "dev-f", nats.url, { out: ["slbapps.App6.FromTwin"] });
    expect((await put(derrick, "dev-f", "config", [{ name: "App6", value: JSON.stringify(next) }])).status).toBe(200);
    const outs: string[] = [];
    peer.subscribe("slbapps.App6.>", { callback: (_e, m) => void outs.push(m.subject) });
    await peer.flush();
    const device = await start(parseAppConfig(appDocument("App6", "dev-f", nats.url)));
    // No waiting: the first send after connect already goes to the twin's Targets.
    expect(device.config.bus.targets.DataOut).toEqual(["slbapps.App6.FromTwin"]);
    device.sendData({ x: 1 });
    await eventually(() => outs.length === 1);
    expect(outs).toEqual(["slbapps.App6.FromTwin"]);
  });

  it("sdk - a device starting while a PUT of its config twin is pending runs the committed config, not the held one, until the commit", async ({
    derrick,
    nats,
    peer,
  }) => {
    const v1 = JSON.stringify(appDocument("AppHeld", "dev-held", nats.url, { out: ["slbapps.AppHeld.FromV1"] }));
    const v2 = JSON.stringify(appDocument("AppHeld", "dev-held", nats.url, { out: ["slbapps.AppHeld.FromV2"] }));
    expect((await put(derrick, "dev-held", "config", [{ name: "AppHeld", value: v1 }])).status).toBe(200);
    const kv = await openBucket(peer, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-held" }));
    // A writer claimed the group for two properties, wrote one of them, and has not committed yet.
    const record = (await kv.get("twin_commits/config"))!;
    const version = (JSON.parse(record.string()) as { version: number }).version;
    const claim = {
      state: "pending",
      names: ["AppHeld", "Other"],
      values: { AppHeld: v2, Other: "x" },
      version,
      at: new Date().toISOString(),
      owner: "busy-writer",
    };
    const claimed = await kv.update("twin_commits/config", JSON.stringify(claim), record.revision);
    await kv.put(twinKey("config", "desired", "AppHeld"), v2);
    const device = await start(parseAppConfig(appDocument("AppHeld", "dev-held", nats.url)));
    // The REST GET shows v1 as the desired value while the claim is pending; so does the device.
    const shown = await twinState(derrick, "dev-held", "config");
    expect(shown.desired.config!.AppHeld!.value).toBe(v1);
    expect(device.config.bus.targets.DataOut).toEqual(["slbapps.AppHeld.FromV1"]);
    expect((await device.getDesired("config", "AppHeld"))?.value).toBe(v1);
    expect((await device.getReported("config", "AppHeld"))?.value).not.toBe(v2);
    // The commit releases v2 (with the other property of the same PUT).
    await kv.put(twinKey("config", "desired", "Other"), "x");
    await kv.update(
      "twin_commits/config",
      JSON.stringify({ state: "committed", names: claim.names, version: claimed + 2, at: new Date().toISOString() }),
      claimed,
    );
    await eventually(() => device.config.bus.targets.DataOut[0] === "slbapps.AppHeld.FromV2", { what: "v2 applied at the commit" });
    expect((await device.getDesired("config", "AppHeld"))?.value).toBe(v2);
  });

  it("sdk - a commit record the device's app wrote with names that are no list neither crashes the device nor stops its twin watch", async ({
    derrick,
    nats,
    peer,
  }) => {
    const { seen, values } = await observingFirstValue(derrick, nats.url, "AppBadCommit", "dev-bad-commit");
    // Devices may write any key of their own bucket, the group's commit record included.
    const kv = await openBucket(peer, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-bad-commit" }));
    await kv.put("twin_commits/g", JSON.stringify({ state: "pending", names: 1 }));
    await put(derrick, "dev-bad-commit", "g", [{ name: "p", value: "v2" }]);
    await eventually(() => seen.length === 2, { what: "the PUT after the bad record" });
    expect(values()).toEqual(["v1", "v2"]);
  });

  it("sdk - a change whose live notice is lost still reaches the callback once (the follower reads on at its poll)", async ({
    derrick,
    nats,
  }) => {
    const { device, seen, values } = await observingFirstValue(derrick, nats.url, "AppWatchEnds", "dev-watch-ends");
    // The notices are core NATS: a reconnect can lose them. Stop them and the poll still reads on.
    const follower = (device as unknown as { twins: { watcher: { notices: { unsubscribe(): void } } } }).twins.watcher;
    follower.notices.unsubscribe();
    await put(derrick, "dev-watch-ends", "g", [{ name: "p", value: "v2" }]);
    await eventually(() => seen.length === 2, { what: "the PUT whose notice was lost", timeoutMs: 10_000 });
    expect(values()).toEqual(["v1", "v2"]);
  });

  it("sdk - two watch restarts at once (a reconnect and an ended watch) leave one watch: each change arrives once", async ({
    derrick,
    nats,
  }) => {
    const device = await start(parseAppConfig(appDocument("App9", "dev-i", nats.url)));
    const backend = (device as unknown as { twins: { watch(cb: (changes: TwinChange[]) => void): Promise<void> } }).twins;
    const seen: TwinChange[] = [];
    await Promise.all([backend.watch((c) => seen.push(...c)), backend.watch((c) => seen.push(...c))]);
    const res = await put(derrick, "dev-i", "racing", [{ name: "once", value: "1" }]);
    const version = (await json<TwinPutReply>(res)).twins[0]!.version;
    await eventually(() => seen.some((c) => c.name === "once"), { what: "the change" });
    // A marker written after it: once it has arrived, a second watch would have delivered the first twice.
    await put(derrick, "dev-i", "racing", [{ name: "marker", value: "m" }]);
    await eventually(() => seen.some((c) => c.name === "marker"), { what: "the marker" });
    expect(seen.filter((c) => c.name === "once" && c.version === version)).toHaveLength(1);
  });

  it("sdk - after a nats-server restart the device reconnects, does not replay what it has, and gets the next change once", async ({
    derrick,
    nats,
  }) => {
    const { device, seen, values } = await observingFirstValue(derrick, nats.url, "App5", "dev-e");
    const reconnected = (async () => {
      for await (const s of device.nc.status()) if (s.type === "reconnect") return true;
      return false;
    })();
    await nats.restart();
    expect(await reconnected).toBe(true);
    await eventually(async () => (await put(derrick, "dev-e", "g", [{ name: "p", value: "v2" }])).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 200,
      what: "PUT after restart",
    });
    await eventually(() => values().includes("v2"), { timeoutMs: 15_000, what: "v2 after reconnect" });
    expect(values()).toEqual(["v1", "v2"]);
    expect(seen[1]!.version).toBeGreaterThan(seen[0]!.version);
  });

  it("sdk - a twin bucket deleted and made again is noticed: a warning, and the new bucket's values (versions from 1 again) reach the callback", async ({
    derrick,
    nats,
  }) => {
    const logs: Array<{ level: string; message: string }> = [];
    const device = await DeviceClient.connect(parseAppConfig(appDocument("AppRecreated", "dev-recreated", nats.url)), {
      reconnectTimeWaitMs: 100,
      twinCheckEveryMs: 200,
      log: (level, message) => logs.push({ level, message }),
    });
    devices.push(device);
    const seen: string[] = [];
    device.observe("setpoints", undefined, (change) => seen.push(`${change.value}@${change.version}`));
    for (let i = 1; i <= 5; i++)
      expect((await put(derrick, "dev-recreated", "setpoints", [{ name: "rate", value: String(i) }])).status).toBe(200);
    await eventually(() => seen.at(-1)?.startsWith("5@") === true, { what: "the fifth value" });
    const operator = await connect({ servers: nats.url });
    await (await jetstreamManager(operator)).streams.delete(
      `KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-recreated" })}`,
    );
    await operator.close();
    // The twins actor makes the bucket again on this PUT; its revisions are below every one delivered.
    expect((await put(derrick, "dev-recreated", "setpoints", [{ name: "rate", value: "6" }])).status).toBe(200);
    await eventually(() => seen.some((s) => s.startsWith("6@")), {
      what: "the value written after the bucket was made again",
      timeoutMs: 10_000,
    });
    expect((await put(derrick, "dev-recreated", "setpoints", [{ name: "rate", value: "7" }])).status).toBe(200);
    await eventually(() => seen.some((s) => s.startsWith("7@")), { what: "the next value" });
    expect(logs.some((l) => l.level === "warn" && /deleted and made again/.test(l.message))).toBe(true);
  });
});

describe("device SDK start-up", () => {
  /** A free port with no broker yet, and a way to start one there later. */
  async function brokerLater() {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "derrick-sdk-later-"));
    let server: NatsServer | undefined;
    return {
      url: `nats://127.0.0.1:${port}`,
      start: async () => (server = await startNatsServer({ dir, port })),
      cleanup: async () => {
        await server?.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }

  it("sdk - connect waits for a broker that is not up yet instead of failing", async () => {
    const broker = await brokerLater();
    let settled = false;
    const connecting = DeviceClient.connect(parseAppConfig(appDocument("Late", "dev-late", broker.url)), {
      reconnectTimeWaitMs: 100,
    }).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 600));
    expect(settled).toBe(false);
    try {
      const server = await broker.start();
      const device = await connecting;
      const seen: InboundMessage[] = [];
      device.on("DataIn", (m) => seen.push(m));
      const peer = await connect({ servers: server.url });
      await eventually(async () => {
        peer.publish("slbapps.Late.DataIn", JSON.stringify({ v: 1 }));
        await peer.flush();
        return seen.length > 0;
      });
      await peer.close();
      await device.close();
    } finally {
      await broker.cleanup();
    }
  });

  it("sdk - a connect whose signal aborts before the broker is up rejects and leaves no client behind", async () => {
    const broker = await brokerLater();
    const started = Date.now();
    await expect(
      DeviceClient.connect(parseAppConfig(appDocument("Ghost", "dev-ghost", broker.url)), {
        reconnectTimeWaitMs: 100,
        signal: AbortSignal.timeout(400),
      }),
    ).rejects.toThrow(/timed out|timeout|abort/i);
    expect(Date.now() - started).toBeLessThan(3_000);
    try {
      const server = await broker.start();
      // Had the dial gone on, the app would be subscribed to its RequestIn by now.
      await new Promise((r) => setTimeout(r, 1_000));
      const peer = await connect({ servers: server.url });
      await expect(peer.request("slbapps.Ghost.RequestIn", "{}", { timeout: 1_000 })).rejects.toThrow(/no responders/i);
      await peer.close();
    } finally {
      await broker.cleanup();
    }
  });
});
