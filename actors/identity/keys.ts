/**
 * The embedded issuer's signing key: an ES256 key pair created on first start and kept in the data
 * dir (mode 0600), so tokens stay valid across restarts. Its public half is published in the app
 * registry so every edge can verify tokens from every identity process.
 */
import { mkdirSync, readFileSync, writeFileSync, existsSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, SignJWT, type JWK, type CryptoKey } from "jose";

export const SIGNING_ALG = "ES256";
import { EMBEDDED_ISSUER } from "../../subjects/identity.ts";
export { EMBEDDED_ISSUER };

export type SigningKey = { kid: string; privateKey: CryptoKey; publicJwk: JWK };

export async function loadOrCreateSigningKey(dataDir: string): Promise<SigningKey> {
  const file = keyFile(dataDir);
  return toSigningKey(existsSync(file) ? readKey(file) : await writeNewKey(file, () => existsSync(file)));
}

/** The signing key in the data dir, if an issuer has made one there (`derrick token` must not make a key nobody publishes). */
export async function loadSigningKey(dataDir: string): Promise<SigningKey | undefined> {
  const file = keyFile(dataDir);
  return existsSync(file) ? toSigningKey(readKey(file)) : undefined;
}

/**
 * After `revokedKid` was revoked: a new key in the data dir, unless another process sharing the
 * dir already replaced it (then that one).
 */
export async function replaceSigningKey(dataDir: string, revokedKid: string): Promise<SigningKey> {
  const file = keyFile(dataDir);
  const stillRevoked = () => !existsSync(file) || readKey(file).kid === revokedKid;
  return toSigningKey(stillRevoked() ? await writeNewKey(file, () => !stillRevoked()) : readKey(file));
}

const keyFile = (dataDir: string) => join(dataDir, "issuer", "signing-key.jwk.json");
const readKey = (file: string) => JSON.parse(readFileSync(file, "utf8")) as JWK;

/** Write-then-rename, so a process starting alongside never reads a half-written key; `taken()` → another process won, use its key. */
async function writeNewKey(file: string, taken: () => boolean): Promise<JWK> {
  const { privateKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  const privateJwk = await exportJWK(privateKey);
  privateJwk.kid = await calculateJwkThumbprint(privateJwk);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(privateJwk), { mode: 0o600 });
  if (taken()) {
    rmSync(tmp, { force: true });
    return readKey(file);
  }
  renameSync(tmp, file);
  return privateJwk;
}

async function toSigningKey(privateJwk: JWK): Promise<SigningKey> {
  const { d: _private, ...publicJwk } = privateJwk;
  const kid = privateJwk.kid ?? (await calculateJwkThumbprint(publicJwk));
  return {
    kid,
    privateKey: (await importJWK({ ...privateJwk, alg: SIGNING_ALG }, SIGNING_ALG)) as CryptoKey,
    publicJwk: { ...publicJwk, kid, alg: SIGNING_ALG, use: "sig" },
  };
}

export type TokenClaims = { sub: string; client_id: string; groups: string[]; scope?: string };

export async function mintToken(key: SigningKey, claims: TokenClaims, audience: string, ttlSeconds: number): Promise<string> {
  return new SignJWT({
    client_id: claims.client_id,
    azp: claims.client_id,
    groups: claims.groups,
    ...(claims.scope ? { scope: claims.scope } : {}),
  })
    .setProtectedHeader({ alg: SIGNING_ALG, kid: key.kid, typ: "JWT" })
    .setSubject(claims.sub)
    .setIssuer(EMBEDDED_ISSUER)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`)
    .sign(key.privateKey);
}
