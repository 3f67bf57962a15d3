import { describe, expect, it } from "vitest";
import { CallbackRefused, callbackPolicy, refuseAddress, refuseCallbackUri, resolveCallback, type Resolver } from "./callback-policy.ts";

describe("notifications callback policy", () => {
  const strict = callbackPolicy({ allowHttp: false });
  const local = callbackPolicy({ allowHttp: true, allowCidrs: ["127.0.0.1/32"] });

  it("notifications - loopback, private and metadata addresses are refused by default", () => {
    const v6Forms = ["::127.0.0.1", "::ffff:0:127.0.0.1", "::ffff:0:a00:1", "2001:0:4136:e378:8000:63bf:3fff:fdd2"]; // IPv4-compatible, SIIT, Teredo
    for (const address of [
      "127.0.0.1",
      "10.0.0.1",
      "172.20.1.1",
      "192.168.0.1",
      "169.254.169.254",
      "100.100.1.1",
      "0.0.0.0",
      "::1",
      "fe80::1",
      "fd12::1",
      "::ffff:127.0.0.1",
      "ff02::1",
      ...v6Forms,
    ]) {
      expect(refuseAddress(strict, address), address).toBeDefined();
    }
    for (const address of ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
      expect(refuseAddress(strict, address), address).toBeUndefined();
  });

  it("notifications - an allowed CIDR opens exactly that range", () => {
    expect(refuseAddress(local, "127.0.0.1")).toBeUndefined();
    expect(refuseAddress(local, "127.0.0.2")).toBeDefined();
  });

  it("notifications - plain http needs DERRICK_CALLBACK_ALLOW_HTTP", () => {
    // The refusal names the setting that would allow it.
    expect(refuseCallbackUri(strict, "http://hooks.example.com/x")).toMatch(/https.*DERRICK_CALLBACK_ALLOW_HTTP=true/);
    expect(refuseCallbackUri(strict, "https://127.0.0.1/x")).toMatch(/DERRICK_CALLBACK_ALLOW_CIDRS/);
    expect(refuseCallbackUri(strict, "https://localhost/x")).toMatch(/DERRICK_CALLBACK_ALLOW_CIDRS/);
    expect(refuseCallbackUri(local, "http://hooks.example.com/x")).toBeUndefined();
    expect(refuseCallbackUri(strict, "https://localhost/x")).toBeDefined();
  });

  it("notifications - at delivery time a name resolving to a refused address is refused", async () => {
    await expect(resolveCallback(strict, "https://localhost./x")).rejects.toThrow(/refused/);
    await expect(resolveCallback(local, "http://127.0.0.1:9/x")).resolves.toMatchObject({ address: "127.0.0.1" });
  });

  it("notifications - a refusal after DNS does not tell the subscriber which address the name resolved to", async () => {
    const internal: Resolver = async () => [
      { address: "93.184.216.34", family: 4 },
      { address: "10.1.2.3", family: 4 },
    ];
    const refusal = await resolveCallback(strict, "https://db.internal.example/x", internal).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(CallbackRefused);
    expect((refusal as CallbackRefused).message).toBe(
      "callback refused: db.internal.example resolves to an address callbacks may not reach",
    );
    expect((refusal as CallbackRefused).message).not.toContain("10.1.2.3");
    expect((refusal as CallbackRefused).detail).toContain("10.1.2.3");
    const publicOnly: Resolver = async () => [{ address: "93.184.216.34", family: 4 }];
    await expect(resolveCallback(strict, "https://hooks.example/x", publicOnly)).resolves.toMatchObject({ address: "93.184.216.34" });
  });
});
