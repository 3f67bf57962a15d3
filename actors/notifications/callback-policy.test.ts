import { describe, expect, it } from "vitest";
import { callbackPolicy, refuseAddress, refuseCallbackUri, resolveCallback } from "./callback-policy.ts";

describe("notifications callback policy", () => {
  const strict = callbackPolicy({ allowHttp: false });
  const local = callbackPolicy({ allowHttp: true, allowCidrs: ["127.0.0.1/32"] });

  it("notifications - loopback, private and metadata addresses are refused by default", () => {
    for (const address of ["127.0.0.1", "10.0.0.1", "172.20.1.1", "192.168.0.1", "169.254.169.254", "100.100.1.1", "0.0.0.0", "::1", "fe80::1", "fd12::1", "::ffff:127.0.0.1", "ff02::1"]) {
      expect(refuseAddress(strict, address), address).toBeDefined();
    }
    for (const address of ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]) expect(refuseAddress(strict, address), address).toBeUndefined();
  });

  it("notifications - an allowed CIDR opens exactly that range", () => {
    expect(refuseAddress(local, "127.0.0.1")).toBeUndefined();
    expect(refuseAddress(local, "127.0.0.2")).toBeDefined();
  });

  it("notifications - plain http needs DERRICK_CALLBACK_ALLOW_HTTP", () => {
    expect(refuseCallbackUri(strict, "http://hooks.example.com/x")).toMatch(/https/);
    expect(refuseCallbackUri(local, "http://hooks.example.com/x")).toBeUndefined();
    expect(refuseCallbackUri(strict, "https://localhost/x")).toBeDefined();
  });

  it("notifications - at delivery time a name resolving to a refused address is refused", async () => {
    await expect(resolveCallback(strict, "https://localhost./x")).rejects.toThrow(/refused/);
    await expect(resolveCallback(local, "http://127.0.0.1:9/x")).resolves.toMatchObject({ address: "127.0.0.1" });
  });
});
