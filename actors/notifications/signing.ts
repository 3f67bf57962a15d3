/**
 * Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256(secret, id.timestamp.body)>`
 * with a `whsec_<base64>` secret. During a rotation the previous secret signs too (space-separated
 * signatures), so receivers can switch keys at their own pace.
 */
import { createHmac, randomBytes } from "node:crypto";
import { BoundedCache } from "../../platform/bounded-cache.ts";

const PREFIX = "whsec_";

/** A fresh secret: 32 random bytes (the Standard Webhooks reference uses 24–64). */
export function newSecret(): string {
  return PREFIX + randomBytes(32).toString("base64");
}

/**
 * Decoded keys by secret: a deliverer signs with the same few secrets thousands of times a second.
 * Read with peek (a hit costs one Map lookup): the secret decoded longest ago goes first when full.
 */
const keys = new BoundedCache<string, Buffer>({ max: 4096 });

function keyOf(secret: string): Buffer {
  let key = keys.peek(secret);
  if (!key) {
    key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, "base64");
    keys.set(secret, key);
  }
  return key;
}

/** Bun's native HMAC costs about half of node:crypto's createHmac under Bun (docs/notifications.md#signing-and-verifying). */
const hasher = typeof Bun !== "undefined" ? Bun.CryptoHasher : undefined;

export function signature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = keyOf(secret);
  const content = `${id}.${timestampSeconds}.${body}`;
  const mac = hasher
    ? new hasher("sha256", key).update(content).digest("base64")
    : createHmac("sha256", key).update(content).digest("base64");
  return `v1,${mac}`;
}

/** The `webhook-*` headers of one delivery, signed with every secret given (current first). */
export function webhookHeaders(secrets: readonly string[], id: string, body: string, now = Date.now()): Record<string, string> {
  const timestamp = Math.floor(now / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": secrets.map((secret) => signature(secret, id, timestamp, body)).join(" "),
  };
}
