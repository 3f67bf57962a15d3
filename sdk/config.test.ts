import { describe, expect, it } from "vitest";
import { parseAppConfig, parseAppConfigText, SdkConfigError } from "./config.ts";
import { dataReport, ioPoint, ioPointProblems, messageIdSequence, type IoPoint } from "./messages.ts";

const base = () => ({
  Name: "MyApp",
  AEA2: {
    RedisClient: { Server: "localhost", Port: "6379" },
    BusClient: {
      Server: "nats://localhost:4222",
      Subscriptions: [{ DataIn: ["slbapps.MyApp.DataIn", "slbapps.events.DataIn"] }, { RequestIn: ["slbapps.MyApp.RequestIn"] }],
      Targets: [{ DataOut: ["slbapps.events.DataIn"] }],
    },
  },
});

function errorKey(document: unknown, env = {}): string {
  try {
    parseAppConfig(document, env);
  } catch (error) {
    expect(error).toBeInstanceOf(SdkConfigError);
    return (error as SdkConfigError).key;
  }
  throw new Error("expected an SdkConfigError");
}

describe("sdk config", () => {
  it("sdk config - the tutorial's AEA.json loads with Redis as the key-value store and flattened kinds", () => {
    const config = parseAppConfig(base());
    expect(config.kv).toEqual({ kind: "redis", host: "localhost", port: 6379 });
    expect(config.bus.subscriptions).toEqual({
      DataIn: ["slbapps.MyApp.DataIn", "slbapps.events.DataIn"],
      RequestIn: ["slbapps.MyApp.RequestIn"],
      EventIn: [],
    });
    expect(config.bus.targets.DataOut).toEqual(["slbapps.events.DataIn"]);
    expect(config.bus.deviceId).toBe("999");
  });

  it("sdk config - the neutral alias Runtime works and a JetStream store needs the Twin", () => {
    const { AEA2, ...rest } = base();
    const { RedisClient: _r, ...runtime } = AEA2;
    expect(errorKey({ ...rest, Runtime: runtime })).toBe("Runtime:Twin");
    const config = parseAppConfig({ ...rest, Runtime: { ...runtime, Twin: { Organization: "acme", Environment: "prod", Id: "rig-7" } } });
    expect(config.runtimeKey).toBe("Runtime");
    expect(config.kv).toEqual({ kind: "jetstream", twin: { organization: "acme", environment: "prod", twinId: "rig-7" } });
    expect(errorKey({ ...base(), Runtime: runtime })).toBe("Runtime");
  });

  it("sdk config - environment variables override the server, user and password", () => {
    const config = parseAppConfig(base(), {
      NATS_ADDRESS: "nats://10.0.0.1:4333",
      NATS_USER: "dev",
      NATS_PASSWORD: "pw",
      REDIS_ADDRESS: "redis://10.0.0.2:6380",
    });
    expect(config.bus).toMatchObject({ servers: ["nats://10.0.0.1:4333"], user: "dev", password: "pw" });
    expect(config.kv).toMatchObject({ host: "10.0.0.2", port: 6380 });
  });

  it("sdk config - a bad file names the key at fault", () => {
    const cases: Array<[(d: ReturnType<typeof base>) => void, string]> = [
      [(d) => ((d as { Name: unknown }).Name = 7), "Name"],
      [(d) => (d.AEA2.BusClient.Server = "localhost:4222"), "AEA2:BusClient:Server"],
      [(d) => ((d.AEA2.BusClient.Subscriptions as unknown[]) = [{ DataOut: ["x"] }]), "AEA2:BusClient:Subscriptions:0:DataOut"],
      [(d) => ((d.AEA2.BusClient.Targets as unknown[]) = [{ DataOut: ["a b"] }]), "AEA2:BusClient:Targets:0:DataOut:0"],
      [(d) => ((d.AEA2.BusClient.Subscriptions as unknown) = "DataIn"), "AEA2:BusClient:Subscriptions"],
      [(d) => (d.AEA2.RedisClient.Port = "port"), "AEA2:RedisClient:Port"],
      [(d) => delete (d as Partial<typeof d>).AEA2, "AEA2"],
    ];
    for (const [mutate, key] of cases) {
      const document = base();
      mutate(document);
      expect(errorKey(document)).toBe(key);
    }
    expect(() => parseAppConfigText("{")).toThrow(SdkConfigError);
  });

  it("sdk messages - IoPoints are checked for shape and the uom convention, never converted", () => {
    expect(ioPointProblems({ value: 1.5, metadata: { uom: "length:m", prop: "value" } })).toEqual([]);
    expect(ioPointProblems({ value: "1" })).toEqual(["value: must be a number"]);
    expect(ioPointProblems({ metadata: { uom: "metres" } })).toEqual(['metadata/uom: "metres" should look like <quantity>:<unit>']);
    expect(ioPointProblems({ metadata: { prop: "value" } })).toHaveLength(1);
    const next = messageIdSequence(new Date(Date.UTC(2026, 0, 1, 0, 0, 10)));
    expect(() => ioPoint({ value: "1" as unknown as number })).toThrow(TypeError);
    expect([next(), next()]).toEqual([100, 101]);
    const report = dataReport({
      srcModule: "MyApp",
      messageId: 7,
      deviceId: "999",
      tags: { t: { value: 2, value_str: undefined } },
      now: 5_000,
    });
    expect(report).toEqual({
      header: { SrcModule: "MyApp", MessageType: "IODataReport", ConfigVersion: 1, MessageID: 7, TimeStamp: 5 },
      device: [{ id: "999", tags: { t: { value: 2 } } }],
    });
  });

  it("sdk messages - null fields are left out like the original encoder's None fields; a wrong type is still refused", () => {
    const point = { value: 3, value_str: null, quality_code: null, timestamp: null, metadata: null };
    expect(ioPointProblems(point)).toEqual([]);
    expect(ioPoint(point)).toEqual({ value: 3 });
    expect(
      JSON.stringify(
        dataReport({ srcModule: "M", messageId: 1, deviceId: "9", tags: { t: { value_str: "on", value: null } }, now: 0 }).device[0]!.tags
          .t,
      ),
    ).toBe('{"value_str":"on"}');
    expect(() => ioPoint({ value: "1" as unknown as number, value_str: null })).toThrow(/value: must be a number/);
    expect(() => ioPoint(null as unknown as IoPoint)).toThrow(/must be an object/);
    expect(() => ioPoint({ value: 1, colour: null } as unknown as IoPoint)).toThrow(/colour: is not an IoPoint field/);
    expect(() => ioPoint({ metadata: { uom: null } as unknown as Record<string, string> })).toThrow(/metadata\/uom: must be a string/);
  });

  it("sdk messages - a point off the uom convention is reported but still built (the SDK does not validate units)", () => {
    expect(ioPoint({ value: 21.5, metadata: { uom: "degC" } })).toEqual({ value: 21.5, metadata: { uom: "degC" } });
    expect(ioPoint({ value: 1, metadata: { prop: "value" } })).toEqual({ value: 1, metadata: { prop: "value" } });
    expect(
      dataReport({ srcModule: "M", messageId: 1, deviceId: "9", tags: { t: { value: 1, metadata: { uom: "degC" } } } }).device[0]!.tags.t!
        .metadata,
    ).toEqual({ uom: "degC" });
  });
});
