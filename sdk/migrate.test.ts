import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { migrateConfig, runMigrateCli } from "./migrate.ts";
import { parseAppConfig } from "./config.ts";

const examples = join(import.meta.dirname, "examples", "migrate");
const read = (file: string) => JSON.parse(readFileSync(join(examples, file), "utf8")) as unknown;

describe("sdk migrate", () => {
  it("sdk migrate - a 2.0 config and its routes become one valid 3.0 config", () => {
    const { config, unsupported, notes } = migrateConfig(read("AEA-2.0.json"), read("routes.json"), { natsServer: "nats://nats:4222" });
    const parsed = parseAppConfig(config);
    expect(parsed.bus.servers).toEqual(["nats://nats:4222"]);
    expect(parsed.bus.user).toBe("work");
    expect(parsed.bus.deviceId).toBe("321");
    expect(parsed.bus.subscriptions).toEqual({
      DataIn: ["slbapps.aea2-work-app.DataIn", "slbapps.Stratus.DataOut"],
      RequestIn: ["slbapps.aea2-work-app.RequestIn"],
      EventIn: [],
    });
    expect(parsed.bus.targets.DataOut).toEqual(["slbapps.Stratus.DataIn", "slbapps.pulser.DataIn"]);
    expect(parsed.kv).toMatchObject({ kind: "redis", host: "alpine-redis", port: 6379 });
    expect((config as { AppConfig: unknown }).AppConfig).toEqual({ Factor: "0.5", Input1: "Sensor1", Input2: "Sensor2" });
    expect(unsupported.map((u) => u.route)).toEqual([
      "nats:a.b TO nats:c.d",
      "/aea2-work-app/DataIn TO /pulser/DataIn",
      "/aea2-work-app/+/DataOut TO /pulser/DataIn",
    ]);
    expect(notes.some((n) => n.includes("/pulser/DataOut TO /other/DataIn"))).toBe(true);
    expect(notes.some((n) => n.includes("UseDataIn"))).toBe(true);
  });

  it("sdk migrate - the CLI writes the file and reports what it cannot express", () => {
    const out = join(mkdtempSync(join(tmpdir(), "migrate-")), "AEA.json");
    const errors: string[] = [];
    const code = runMigrateCli(
      ["--config", join(examples, "AEA-2.0.json"), "--routes", join(examples, "routes.json"), "--out", out],
      () => undefined,
      (l) => errors.push(l),
    );
    expect(code).toBe(0);
    expect(parseAppConfig(JSON.parse(readFileSync(out, "utf8"))).name).toBe("aea2-work-app");
    expect(errors.filter((l) => l.startsWith("cannot express"))).toHaveLength(3);
    expect(errors.some((l) => l.includes("BusClient:Server set to nats://aea-broker:4222"))).toBe(true);
    expect(
      runMigrateCli(
        ["--config", join(examples, "AEA-2.0.json")],
        () => undefined,
        () => undefined,
      ),
    ).toBe(2);
  });

  it("sdk migrate - a routes file of text lines (`<source>/<out> TO <target>/<in>`, the SDK 2.0 format) migrates like routes.json", () => {
    const lines = (read("routes.json") as { Routes: string[] }).Routes;
    const text = `# 2.0 routes\n${lines.join("\n")}\r\n\n`;
    const fromJson = migrateConfig(read("AEA-2.0.json"), read("routes.json"), { natsServer: "nats://nats:4222" });
    const fromText = migrateConfig(read("AEA-2.0.json"), text, { natsServer: "nats://nats:4222" });
    expect(fromText).toEqual(fromJson);
    const dir = mkdtempSync(join(tmpdir(), "migrate-"));
    writeFileSync(join(dir, "routes"), text);
    const out = join(dir, "AEA.json");
    const errors: string[] = [];
    expect(
      runMigrateCli(
        ["--config", join(examples, "AEA-2.0.json"), "--routes", join(dir, "routes"), "--out", out, "--nats", "nats://nats:4222"],
        () => undefined,
        (l) => errors.push(l),
      ),
    ).toBe(0);
    expect(JSON.parse(readFileSync(out, "utf8"))).toEqual(fromJson.config);
    expect(errors.filter((l) => l.startsWith("cannot express"))).toHaveLength(3);
  });
});
