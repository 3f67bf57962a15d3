/**
 * A client-credentials token from `/v2/token` asked for with one
 * scope, the service's client identifier. derrick echoes the scope (response and `scope` claim) and
 * does not restrict on it: the token then works with the client's appkey like any other.
 */
import { decodeJwt } from "jose";
import { describe, expect } from "vitest";
import { TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { TokenResponse } from "../../subjects/identity.ts";

const it = derrickTest({ actors: ["system", "identity", "notifications"] });

describe("token scope", () => {
  const token = async (derrick: TestDerrick, scope?: string) => {
    const { client_id, client_secret } = TEST_CLIENTS.alpha;
    const res = await fetch(`${derrick.url}/v2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "client_credentials", client_id, client_secret, ...(scope !== undefined ? { scope } : {}) }),
    });
    return json<TokenResponse>(res, 200);
  };

  it("auth - a token asked for with the service's client id as its one scope is issued with that scope and works with the appkey", async ({
    derrick,
  }) => {
    const scoped = await token(derrick, "derrick");
    expect(scoped).toMatchObject({ token_type: "Bearer", scope: "derrick" });
    expect(decodeJwt(scoped.access_token)).toMatchObject({ scope: "derrick", client_id: "alpha" });
    const list = await derrick.call("/v1/notifications/subscriptions", { headers: { authorization: `Bearer ${scoped.access_token}` } });
    expect(list.status).toBe(200);
    const plain = await token(derrick);
    expect(plain.scope).toBeUndefined();
    expect(decodeJwt(plain.access_token).scope).toBeUndefined();
  });
});
