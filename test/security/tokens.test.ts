/**
 * Tokens beyond edge.test.ts and external-issuer.test.ts: keys rotating in an external JWKS (served by a
 * loopback server whose keys change), algorithm confusion against that JWKS, and a valid token used
 * for another partition's data. Tampered, unsigned, expired and wrong issuer/audience tokens are
 * covered in test/platform/edge.test.ts.
 */
import { afterAll, describe, expect } from "vitest";
import { decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT, UnsecuredJWT, type CryptoKey, type JWK } from "jose";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { clientToken, endKvWatches, eventually, startDerrick, TEST_CLIENTS, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest, natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { Jwks } from "../../subjects/identity.ts";
import { REGISTRY_BUCKET } from "../../actors/identity/registry.ts";

const ISSUER = "https://login.rotation.test";
const AUDIENCE = "derrick-api";

/** The external issuer's JWKS, served on loopback from the file's start: its keys change under the tests. */
let published: JWK[] = [];
const jwksServer = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ keys: published }) });

const rotating = derrickTest({
  actors: ["system", "identity"],
  env: {
    DERRICK_AUTH_ISSUER: ISSUER,
    DERRICK_AUTH_JWKS_URL: `http://127.0.0.1:${jwksServer.port}/jwks`,
    DERRICK_AUTH_AUDIENCE: AUDIENCE,
    DERRICK_AUTH_JWKS_MAX_AGE: "1s",
  },
});
const partitions = derrickTest({ actors: ["system", "identity", "storage"] });
// The issuer restarts within a test: its derrick is the test's own.
const signingKeys = natsTest();

describe("tokens against a rotating external JWKS", () => {
  const it = rotating;
  const keys: Record<string, { privateKey: CryptoKey; jwk: JWK }> = {};
  const sign = (kid: string, claims: Record<string, unknown> = {}) =>
    new SignJWT({ client_id: "alpha", groups: ["users.datalake.viewers"], ...claims })
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject("alpha")
      .setIssuedAt()
      .setJti(crypto.randomUUID())
      .setExpirationTime("5m")
      .sign(keys[kid]!.privateKey);
  const whoami = (derrick: TestDerrick, token: string, partition = "opendes") =>
    fetch(`${derrick.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": partition },
    });

  it.beforeAll(async () => {
    for (const kid of ["k1", "k2"]) {
      const pair = await generateKeyPair("RS256", { extractable: true });
      keys[kid] = { privateKey: pair.privateKey, jwk: { ...(await exportJWK(pair.publicKey)), kid, alg: "RS256", use: "sig" } };
    }
    published = [keys.k1!.jwk];
  });
  afterAll(() => {
    jwksServer.stop(true);
  });

  it("tokens - after a rotation the new key is accepted and the removed key (even a cached token) is refused", async ({ derrick }) => {
    const before = await sign("k1");
    expect((await whoami(derrick, before)).status).toBe(200);
    // The issuer rotates: k2 published, k1 withdrawn.
    published = [keys.k2!.jwk];
    await eventually(async () => (await whoami(derrick, await sign("k2"))).status === 200, {
      timeoutMs: 5_000,
      what: "the new key to be accepted",
    });
    await eventually(async () => (await whoami(derrick, await sign("k1"))).status === 401, {
      timeoutMs: 5_000,
      what: "a fresh token of the removed key to be refused",
    });
    // A token verified before the rotation is trusted no longer than the JWKS it was checked against.
    await eventually(async () => (await whoami(derrick, before)).status === 401, {
      timeoutMs: 5_000,
      what: "the cached token of the removed key to be refused",
    });
  });

  it("tokens - alg none, HS256 keyed with the public key, and a kid the JWKS never had are refused", async ({ derrick }) => {
    published = [keys.k1!.jwk, keys.k2!.jwk];
    const claims = { client_id: "alpha", groups: [], iss: ISSUER, aud: AUDIENCE, sub: "alpha" };
    const none = new UnsecuredJWT(claims).setExpirationTime("5m").encode();
    const publicBytes = new TextEncoder().encode(JSON.stringify(keys.k1!.jwk));
    const confused = await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: "k1" }).setExpirationTime("5m").sign(publicBytes);
    const stranger = (await generateKeyPair("RS256")).privateKey;
    const unknownKid = await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: "k9" }).setExpirationTime("5m").sign(stranger);
    for (const token of [none, confused, unknownKid]) {
      const res = await whoami(derrick, token);
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
    }
  });
});

describe("tokens and partitions", () => {
  const it = partitions;

  it("tokens - a valid token does not open a partition that is not served, nor another partition's records", async ({ derrick }) => {
    const record = {
      id: "opendes:doc:rel-1",
      kind: "osdu:wks:doc:1.0.0",
      acl: { viewers: ["users.datalake.admins"], owners: ["users.datalake.admins"] },
      data: { x: 1 },
    };
    const put = await derrick.call("/api/storage/v2/records", { as: "admin", method: "PUT", body: JSON.stringify([record]) });
    expect(put.status).toBe(201);
    expect((await derrick.call(`/api/storage/v2/records/${record.id}`, { as: "admin" })).status).toBe(200);
    // The same token with another served partition: the record is not there (or its id is refused), never returned.
    const other = await derrick.call(`/api/storage/v2/records/${record.id}`, { as: "admin", partition: "other" });
    expect([400, 403, 404]).toContain(other.status);
    expect(other.headers.get("content-type")).toContain("application/problem+json");
    // A partition this deployment does not serve: 403, and a write there is refused too.
    expect((await derrick.call("/v1/system/whoami", { partition: "elsewhere" })).status).toBe(403);
    const foreign = await derrick.call("/api/storage/v2/records", {
      as: "admin",
      partition: "elsewhere",
      method: "PUT",
      body: JSON.stringify([{ ...record, id: "elsewhere:doc:rel-1" }]),
    });
    expect(foreign.status).toBe(403);
    // Writing into one partition with an id naming another is refused.
    const crossed = await derrick.call("/api/storage/v2/records", {
      as: "admin",
      partition: "other",
      method: "PUT",
      body: JSON.stringify([record]),
    });
    expect(crossed.status).toBe(400);
  });
});

describe("embedded issuer signing keys", () => {
  const it = signingKeys;
  let derrick: TestDerrick;
  const env = { DERRICK_AUTH_JWKS_MAX_AGE: "1s" };
  const whoami = (token: string) =>
    fetch(`${derrick.url}/v1/system/whoami`, {
      headers: { authorization: `Bearer ${token}`, appkey: TEST_CLIENTS.alpha.appkey, "slb-partition-id": "opendes" },
    });
  const fresh = () => clientToken(derrick.url, TEST_CLIENTS.alpha);
  // Asynchronous: the actors answering the CLI run in this process.
  const cli = ({ nats, dataDir }: { nats: { url: string }; dataDir: string }, ...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [fileURLToPath(new URL("../../bin/derrick.ts", import.meta.url)), ...args], {
        env: { ...process.env, NATS_URL: nats.url, DERRICK_DATA_DIR: dataDir, DERRICK_LOG_LEVEL: "silent" },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.once("exit", (status) => resolve({ status, stdout, stderr }));
    });
  const jwksKids = async () => (await json<Jwks>(await fetch(`${derrick.url}/.well-known/jwks.json`), 200)).keys.map((k) => k.kid);

  it.beforeAll(async ({ nats, dataDir }) => {
    derrick = await startDerrick(nats, { actors: ["system", "identity"], env, dataDir });
  });
  afterAll(async () => {
    await derrick?.cleanup();
  });

  it("tokens - `derrick keys revoke` withdraws the key at once: its tokens (cached ones too) are refused, the issuer signs with a new key, and a restart with the old key file does not bring it back", async ({
    nats,
    dataDir,
  }) => {
    const before = await fresh();
    const revoked = decodeProtectedHeader(before).kid!;
    expect((await whoami(before)).status).toBe(200);
    const keyFile = join(dataDir, "issuer", "signing-key.jwk.json");
    const oldKeyFile = readFileSync(keyFile, "utf8");

    const out = await cli({ nats, dataDir }, "keys", "revoke", revoked);
    expect(out.status, out.stderr).toBe(0);
    await eventually(async () => (await whoami(before)).status === 401, {
      timeoutMs: 5_000,
      what: "the revoked key's token to be refused",
    });
    const after = await eventually(
      async () => {
        const token = await fresh();
        return decodeProtectedHeader(token).kid !== revoked ? token : undefined;
      },
      { what: "a token signed with a new key" },
    );
    expect((await whoami(after)).status).toBe(200);
    expect(await jwksKids()).not.toContain(revoked);
    const listed = JSON.parse((await cli({ nats, dataDir }, "keys", "list", "--json")).stdout) as Jwks;
    expect(listed.keys.map((k) => k.kid)).toEqual([decodeProtectedHeader(after).kid]);
    expect((await cli({ nats, dataDir }, "keys", "revoke", revoked)).status).not.toBe(0); // already revoked: 404
    // A key id is base64url: one in 32 begins with "-", and such a key must be revocable too (it was
    // refused as "Unknown option" before, which made this test fail whenever the issuer drew one).
    const dashed = await cli({ nats, dataDir }, "keys", "revoke", "-8aXunknownKid");
    expect(dashed.stderr).not.toContain("Unknown option");
    expect(dashed.status).not.toBe(2); // not the usage error: the issuer was asked (404, no such key)

    // The old key file comes back (a restored backup): the issuer still refuses to use it.
    await derrick.stop();
    writeFileSync(keyFile, oldKeyFile);
    derrick = await startDerrick(nats, { actors: ["system", "identity"], env, dataDir });
    const restarted = await fresh();
    expect(decodeProtectedHeader(restarted).kid).not.toBe(revoked);
    expect((await whoami(restarted)).status).toBe(200);
    expect(await jwksKids()).not.toContain(revoked);
  });

  it("tokens - a key revoked after the revocation watch ended by itself is still replaced at once, not at the next heartbeat 10 min later", async ({
    nats,
    dataDir,
  }) => {
    const current = decodeProtectedHeader(await fresh()).kid!;
    // nats.js gives an updates-only watch up after about two minutes without JetStream: here at once.
    expect(endKvWatches(derrick.nc)).toBeGreaterThanOrEqual(1);
    const out = await cli({ nats, dataDir }, "keys", "revoke", current);
    expect(out.status, out.stderr).toBe(0);
    await eventually(async () => decodeProtectedHeader(await fresh()).kid !== current, {
      timeoutMs: 5_000,
      what: "a token signed with a new key",
    });
  });

  it("tokens - a key no issuer has republished for a token lifetime plus two heartbeats leaves the JWKS", async ({ nc }) => {
    const kv = await openBucket(nc, REGISTRY_BUCKET);
    const { publicKey } = await generateKeyPair("ES256");
    const jwk = await exportJWK(publicKey);
    const day = 86_400_000;
    await kv.put("jwks.gone-issuer", JSON.stringify({ ...jwk, kid: "gone-issuer", seen_at: new Date(Date.now() - 2 * day).toISOString() }));
    await kv.put("jwks.live-issuer", JSON.stringify({ ...jwk, kid: "live-issuer", seen_at: new Date(Date.now() - 60_000).toISOString() }));
    const kids = await jwksKids();
    expect(kids).toContain("live-issuer");
    expect(kids).not.toContain("gone-issuer");
  });
});
