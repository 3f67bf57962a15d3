import { describe, expect } from "vitest";
import { TEST_CLIENTS, clientToken, eventually, type TestDerrick } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import type { Jwks } from "../../subjects/identity.ts";
import { REGISTRY_BUCKET } from "../../actors/identity/registry.ts";
import { derrickTest } from "../harness/fixture.ts";

const it = derrickTest({ actors: ["identity", "system"] });

/**
 * The app registry deleted at runtime (an operator, a tool, a lost store) is made again with the
 * seed clients and the issuer's signing key put back, so the platform keeps issuing and verifying
 * tokens without a restart. Before, every token request and appkey check waited out its timeout.
 */
describe("identity after its registry was deleted", () => {
  const whoami = (derrick: TestDerrick, token: string) =>
    fetch(`${derrick.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "data-partition-id": "opendes" },
    });

  it("registry - made again with the configured clients and the signing key: new tokens are issued and accepted with their appkey", {
    timeout: 20_000,
  }, async ({ derrick, jsm }) => {
    expect((await whoami(derrick, await clientToken(derrick.url, TEST_CLIENTS.alpha))).status).toBe(200);
    expect(await jsm.streams.delete(`KV_${REGISTRY_BUCKET}`)).toBe(true);
    const token = await eventually(async () => clientToken(derrick.url, TEST_CLIENTS.alpha).catch(() => undefined), {
      timeoutMs: 10_000,
      what: "a token after the registry was made again",
    });
    await eventually(async () => (await whoami(derrick, token)).status === 200, {
      timeoutMs: 10_000,
      what: "the new token and the appkey accepted",
    });
    // The issuer's public key is published again (the JWKS other verifiers fetch).
    await eventually(async () => (await json<Jwks>(await fetch(`${derrick.url}/.well-known/jwks.json`))).keys.length > 0, {
      timeoutMs: 10_000,
      what: "the signing key published again",
    });
  });
});
