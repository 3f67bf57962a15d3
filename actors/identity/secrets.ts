/**
 * Hashing of client secrets and app keys. Secrets may be chosen by people, so they get a salted,
 * slow scrypt hash. App keys are checked on every request and are looked up by their hash, so they
 * get SHA-256 (they are long random strings when derrick generates them).
 */
import { createHash, randomBytes, scrypt, timingSafeEqual } from "node:crypto";

const N = 16384;
const R = 8;
const P = 1;
const KEYLEN = 32;

function scryptAsync(secret: string, salt: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(secret, salt, KEYLEN, { N, r: R, p: P }, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(secret, salt);
  return `scrypt$${N}$${R}$${P}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

export async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const [scheme, , , , salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const key = await scryptAsync(secret, Buffer.from(salt, "base64url"));
  const expected = Buffer.from(hash, "base64url");
  return expected.length === key.length && timingSafeEqual(expected, key);
}

export function appkeyDigest(appkey: string): string {
  return createHash("sha256").update(appkey).digest("hex");
}

/** A fresh random credential, URL-safe, 256 bits. */
export function newCredential(prefix: string): string {
  return `${prefix}${randomBytes(32).toString("base64url")}`;
}
