import { afterAll, describe, expect } from "vitest";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import { startDerrick, TEST_CLIENTS, type TestDerrick, type TestNats } from "../harness/index.ts";
import { derrickTest, natsTest } from "../harness/fixture.ts";
import type { Jwks } from "../../subjects/identity.ts";

const ISSUER = "https://login.example.test";

/** The external issuer's JWKS, served on loopback from the file's start (its keys are made before the first test). */
let jwks: Jwks = { keys: [] };
const jwksServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json(jwks) });
const issuerSettings = {
  DERRICK_AUTH_ISSUER: ISSUER,
  DERRICK_AUTH_JWKS_URL: `http://127.0.0.1:${jwksServer.port}/jwks`,
  DERRICK_AUTH_AUDIENCE: "derrick-api",
};

const external = derrickTest({ env: issuerSettings });
// Derricks the tests start while the issuer is down.
const unreachable = natsTest();

describe("external identity service", () => {
  const it = external;
  let key: CryptoKey;
  const sign = (claims: Record<string, unknown>, kid = "k1", signer = () => key) =>
    new SignJWT({ client_id: "alpha", groups: ["g"], ...claims })
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(ISSUER)
      .setAudience("derrick-api")
      .setSubject("alpha")
      .setExpirationTime("5m")
      .sign(signer());

  it.beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    key = pair.privateKey;
    jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] };
  });

  const whoami = (derrick: TestDerrick, token: string) =>
    fetch(`${derrick.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" },
    });

  it("external issuer - its tokens are verified against its JWKS", async ({ derrick }) => {
    const res = await whoami(derrick, await sign({}));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ principal: { clientId: "alpha", groups: ["g"] } });
  });

  it("external issuer - the appkey belongs to the client the token names in client_id, else azp; a token naming neither gets 401 on appkey routes", async ({
    derrick,
  }) => {
    const viaAzp = await whoami(derrick, await sign({ client_id: undefined, azp: "alpha" }));
    expect(viaAzp.status).toBe(200);
    expect(await viaAzp.json()).toMatchObject({ principal: { clientId: "alpha" } });
    // Only `sub` ("alpha", as a user of the issuer may be called): no client claim, so alpha's appkey is not the caller's.
    const subOnly = await whoami(derrick, await sign({ client_id: undefined }));
    expect(subOnly.status).toBe(401);
    expect(subOnly.headers.get("content-type")).toContain("application/problem+json");
    expect(subOnly.headers.get("www-authenticate")).toContain("Bearer");
  });

  it("external issuer - a token without an expiry is refused, however well signed", async ({ derrick }) => {
    const forever = await new SignJWT({ client_id: "alpha", groups: ["g"] })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(ISSUER)
      .setAudience("derrick-api")
      .setSubject("alpha")
      .sign(key);
    const res = await whoami(derrick, forever);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("invalid_token");
  });

  it("external issuer - a token signed by a key it does not publish is refused", async ({ derrick }) => {
    const stranger = (await generateKeyPair("RS256")).privateKey;
    expect((await whoami(derrick, await sign({}, "k1", () => stranger))).status).toBe(401);
    expect((await whoami(derrick, await sign({}, "unknown-kid", () => stranger))).status).toBe(401);
  });

  it("external issuer - the embedded token endpoint is closed", async ({ derrick }) => {
    const res = await fetch(`${derrick.url}/v2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials&client_id=alpha&client_secret=x",
    });
    expect(res.status).toBe(404);
  });
});

describe("external identity service unreachable", () => {
  const it = unreachable;
  let key: CryptoKey;
  let unreachableJwks: Jwks;
  /** Whether the issuer's JWKS endpoint answers; when not, it fails as a down issuer does (503), or never answers (`hang`). */
  let up = true;
  let hang = false;
  let flakyServer: ReturnType<typeof Bun.serve>;
  const started: TestDerrick[] = [];
  const sign = () =>
    new SignJWT({ client_id: "alpha", groups: ["g"], jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(ISSUER)
      .setAudience("derrick-api")
      .setSubject("alpha")
      .setExpirationTime("5m")
      .sign(key);
  const whoami = (derrick: TestDerrick, token: string) =>
    fetch(`${derrick.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" },
    });
  const start = async (nats: TestNats) => {
    const derrick = await startDerrick(nats, {
      env: { ...issuerSettings, DERRICK_AUTH_JWKS_URL: `http://127.0.0.1:${flakyServer.port}/jwks`, DERRICK_AUTH_JWKS_MAX_AGE: "1s" },
    });
    started.push(derrick);
    return derrick;
  };

  it.beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    key = pair.privateKey;
    unreachableJwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] };
    flakyServer = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () =>
        hang ? new Promise<Response>(() => undefined) : up ? Response.json(unreachableJwks) : new Response("down", { status: 503 }),
    });
  });
  afterAll(async () => {
    for (const d of started) await d.cleanup();
    flakyServer?.stop(true);
    jwksServer.stop(true);
  });

  it("external issuer - while its JWKS cannot be fetched, the keys held stay in use past their max age (no 401 for valid tokens)", async ({
    nats,
  }) => {
    up = true;
    const derrick = await start(nats);
    expect((await whoami(derrick, await sign())).status).toBe(200);
    up = false;
    // Past DERRICK_AUTH_JWKS_MAX_AGE (1 s): the refetch fails, and a new, valid token is still accepted.
    await new Promise((r) => setTimeout(r, 1_300));
    const during = await whoami(derrick, await sign());
    expect(during.status, await during.text()).toBe(200);
    up = true;
  });

  it("external issuer - once a fetch of its keys has failed, requests do not wait for the next tries (they run in the background)", async ({
    nats,
  }) => {
    up = true;
    hang = false;
    const derrick = await start(nats);
    expect((await whoami(derrick, await sign())).status).toBe(200);
    hang = true;
    try {
      await new Promise((r) => setTimeout(r, 1_300));
      // The first request after the max age waits for the refetch (jose gives up after 5 s) …
      expect((await whoami(derrick, await sign())).status).toBe(200);
      // … and once the next try is due (5 s later), a request goes on with the keys held at once.
      await new Promise((r) => setTimeout(r, 5_200));
      const started = Date.now();
      expect((await whoami(derrick, await sign())).status).toBe(200);
      expect(Date.now() - started, "a request waited for a fetch from an issuer known to be down").toBeLessThan(2_500);
    } finally {
      hang = false;
    }
  }, 30_000);

  it("external issuer - before any keys were fetched its tokens get 503 with Retry-After, not 401", async ({ nats }) => {
    up = false;
    const derrick = await start(nats);
    const res = await whoami(derrick, await sign());
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    up = true;
    expect((await whoami(derrick, await sign())).status).toBe(200);
  });
});
