import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { startDerrick, startTestNats, TEST_CLIENTS, type TestDerrick, type TestNats } from "../harness/index.ts";

const ISSUER = "https://login.example.test";

describe("external identity service", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  let jwksServer: ReturnType<typeof Bun.serve>;
  let key: CryptoKey;
  let jwks: { keys: unknown[] };
  const sign = (claims: Record<string, unknown>, kid = "k1", signer = () => key) =>
    new SignJWT({ client_id: "alpha", groups: ["g"], ...claims })
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(ISSUER)
      .setAudience("derrick-api")
      .setSubject("alpha")
      .setExpirationTime("5m")
      .sign(signer());

  beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    key = pair.privateKey;
    jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] };
    jwksServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json(jwks) });
    nats = await startTestNats();
    derrick = await startDerrick(nats, {
      env: { DERRICK_AUTH_ISSUER: ISSUER, DERRICK_AUTH_JWKS_URL: `http://127.0.0.1:${jwksServer.port}/jwks`, DERRICK_AUTH_AUDIENCE: "derrick-api" },
    });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
    jwksServer?.stop(true);
  });

  const whoami = (token: string) =>
    fetch(`${derrick.url}/v1/system/whoami`, { headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" } });

  it("external issuer - its tokens are verified against its JWKS", async () => {
    const res = await whoami(await sign({}));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ principal: { clientId: "alpha", groups: ["g"] } });
  });

  it("external issuer - a token without an expiry is refused, however well signed", async () => {
    const forever = await new SignJWT({ client_id: "alpha", groups: ["g"] }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(ISSUER).setAudience("derrick-api").setSubject("alpha").sign(key);
    const res = await whoami(forever);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("invalid_token");
  });

  it("external issuer - a token signed by a key it does not publish is refused", async () => {
    const stranger = (await generateKeyPair("RS256")).privateKey;
    expect((await whoami(await sign({}, "k1", () => stranger))).status).toBe(401);
    expect((await whoami(await sign({}, "unknown-kid", () => stranger))).status).toBe(401);
  });

  it("external issuer - the embedded token endpoint is closed", async () => {
    const res = await fetch(`${derrick.url}/v2/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "grant_type=client_credentials&client_id=alpha&client_secret=x" });
    expect(res.status).toBe(404);
  });
});
