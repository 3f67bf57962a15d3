import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";

describe("platform smoke", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats);
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("platform - a token from the embedded issuer is accepted by the edge", async () => {
    const res = await derrick.call("/v1/system/whoami");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ principal: { clientId: "alpha" }, partition: "opendes" });
  });
});
