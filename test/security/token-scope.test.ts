/**
 * Seed document 1 §5, alternative B: a client-credentials token from `/v2/token` asked for with one
 * scope, the service's client identifier. derrick echoes the scope (response and `scope` claim) and
 * does not restrict on it: the token then works with the client's appkey like any other.
 */
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, TEST_CLIENTS, type TestDerrick, type TestNats } from "../harness/index.ts";

describe("token scope", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["system", "identity", "notifications"] });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  const token = async (scope?: string) => {
    const { client_id, client_secret } = TEST_CLIENTS.alpha;
    const res = await fetch(`${derrick.url}/v2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "client_credentials", client_id, client_secret, ...(scope !== undefined ? { scope } : {}) }),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { access_token: string; token_type: string; expires_in: number; scope?: string };
  };

  it("auth - a token asked for with the service's client id as its one scope is issued with that scope and works with the appkey", async () => {
    const scoped = await token("derrick");
    expect(scoped).toMatchObject({ token_type: "Bearer", scope: "derrick" });
    expect(decodeJwt(scoped.access_token)).toMatchObject({ scope: "derrick", client_id: "alpha" });
    const list = await derrick.call("/v1/notifications/subscriptions", { headers: { authorization: `Bearer ${scoped.access_token}` } });
    expect(list.status).toBe(200);
    const plain = await token();
    expect(plain.scope).toBeUndefined();
    expect(decodeJwt(plain.access_token).scope).toBeUndefined();
  });
});
