import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect } from "vitest";
import { eventually, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { putTwin } from "./helpers.ts";
import { runEdgeApp } from "../../sdk/examples/edge-app.ts";
import { KvWatchInclude } from "@nats-io/kv";
import { twinBucket } from "../../subjects/twins.ts";
import type { DeviceClient, IoDataReport } from "../../sdk/index.ts";

const it = derrickTest({ actors: ["identity", "twins"] });

describe("sdk example edge app", () => {
  let app: DeviceClient;
  let document: Record<string, unknown> & { AEA2: { BusClient: { Server: string } }; AppConfig: Record<string, string> };
  it.beforeAll(async ({ nats }) => {
    document = JSON.parse(readFileSync(new URL("../../sdk/examples/AEA.json", import.meta.url), "utf8"));
    document.AEA2.BusClient.Server = nats.url;
    const path = join(mkdtempSync(join(tmpdir(), "edge-app-")), "AEA.json");
    writeFileSync(path, JSON.stringify(document));
    app = await runEdgeApp(path, () => undefined);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("sdk example - reads IoPoints, publishes the scaled average, and applies a config change it reports", async ({
    derrick,
    nc: peer,
  }) => {
    const outputs: number[] = [];
    peer.subscribe("slbapps.scaler.DataOut", {
      callback: (_e, m) => void outputs.push((m.json() as IoDataReport).device[0]!.tags["scaled-average"]!.value!),
    });
    await peer.flush();
    const input = app.dataReport({ Sensor1: { value: 10 }, Sensor2: { value: 30 } });
    peer.publish("slbapps.scaler.DataIn", JSON.stringify(input));
    await eventually(() => outputs.length === 1);
    expect(outputs[0]).toBe(10);
    const next = JSON.stringify({ ...document, AppConfig: { ...document.AppConfig, Factor: "2" } });
    // The acknowledgement (the reported config) must not be visible before the app has applied it.
    let applied = false;
    const stopListening = app.onConfig(() => (applied = true));
    const acks: boolean[] = [];
    const bucket = await openBucket(peer, twinBucket({ organization: "acme", environment: "prod", twinId: "rig-7" }));
    const watch = await bucket.watch({ key: "twin_properties/config/reported/scaler", include: KvWatchInclude.UpdatesOnly });
    void (async () => {
      for await (const entry of watch) if (entry.string() === next) acks.push(applied);
    })();
    await putTwin(derrick, "rig-7", { group: "config", twins: [{ name: "scaler", value: next }] });
    await eventually(async () => (await app.getReported("config", "scaler"))?.value === next, { what: "reported config" });
    await eventually(() => acks.length === 1, { what: "the acknowledgement through a watch" });
    watch.stop();
    stopListening();
    expect(acks).toEqual([true]);
    peer.publish("slbapps.scaler.DataIn", JSON.stringify(input));
    await eventually(() => outputs.length === 2);
    expect(outputs[1]).toBe(40);
  });

  it("sdk example - a malformed DataIn message is skipped and the next one is still processed", async ({ nc: peer }) => {
    const outputs: number[] = [];
    const sub = peer.subscribe("slbapps.scaler.DataOut", {
      callback: (_e, m) => void outputs.push((m.json() as IoDataReport).device[0]!.tags["scaled-average"]!.value!),
    });
    await peer.flush();
    const report = (meta?: Record<string, unknown>) =>
      JSON.stringify({
        header: {},
        device: [{ id: "x", tags: { Sensor1: { value: 1, ...(meta ? { metadata: meta } : {}) }, Sensor2: { value: 3 } } }],
      });
    // Not JSON at all, then a point whose metadata value is not a string (the output would copy it).
    peer.publish("slbapps.scaler.DataIn", "not json at all");
    peer.publish("slbapps.scaler.DataIn", report({ uom: "temperature:degC", scale: 2 }));
    // Off the uom convention: the SDK does not validate units, so this one is processed.
    peer.publish("slbapps.scaler.DataIn", report({ uom: "degC" }));
    peer.publish("slbapps.scaler.DataIn", JSON.stringify(app.dataReport({ Sensor1: { value: 20 }, Sensor2: { value: 40 } })));
    await eventually(() => outputs.length === 2, { what: "the outputs after the malformed inputs" });
    sub.unsubscribe();
    // Factor 2 since the previous test.
    expect(outputs).toEqual([4, 60]);
  });
});
