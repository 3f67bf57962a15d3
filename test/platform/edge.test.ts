import { describe, expect } from "vitest";
import { SignJWT, UnsecuredJWT } from "jose";
import { connect as connectTcp } from "node:net";
import { TEST_CLIENTS } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem, json } from "../harness/json.ts";
import { openApiDocument, type Operation } from "../harness/openapi.ts";
import type { Jwks, OAuthError, TokenResponse } from "../../subjects/identity.ts";
import { loadOrCreateSigningKey } from "../../actors/identity/keys.ts";
import { EMBEDDED_ISSUER, identityAppkeyVerify } from "../../subjects/identity.ts";
import { Validator } from "@seriousme/openapi-schema-validator";

const form = (fields: Record<string, string>) => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded" },
  body: new URLSearchParams(fields).toString(),
});

const edge = derrickTest({ env: { DERRICK_BODY_LIMIT: "4096" } });
// An external nats-server with its default max_payload (1 MB).
const smallPayloads = derrickTest({ nats: { extraConfig: "max_payload: 1MB" }, env: { DERRICK_BODY_LIMIT: String(1024 * 1024) } });

/** What the edge answers without an actor (unknown routes, bodies refused before parsing, request ids): test/edge/app.test.ts. */
describe("edge", () => {
  const it = edge;

  describe("token endpoint", () => {
    it("auth - client credentials in the form return a bearer token with the documented claims", async ({ derrick }) => {
      const c = TEST_CLIENTS.alpha;
      const res = await fetch(
        `${derrick.url}/v2/token`,
        form({ grant_type: "client_credentials", client_id: c.client_id, client_secret: c.client_secret }),
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("cache-control")).toBe("no-store");
      const body = await json<TokenResponse>(res);
      expect(body.token_type).toBe("Bearer");
      expect(body.expires_in).toBe(3600);
      const claims = JSON.parse(Buffer.from(body.access_token.split(".")[1]!, "base64url").toString());
      expect(claims).toMatchObject({
        sub: "alpha",
        client_id: "alpha",
        azp: "alpha",
        iss: EMBEDDED_ISSUER,
        aud: "derrick",
        groups: c.groups,
      });
      expect(claims.exp - claims.iat).toBe(3600);
      // RFC 6749 §3.2, not derrick's strict bodies (docs/contract.md): unknown parameters are ignored.
      const extra = await fetch(
        `${derrick.url}/v2/token`,
        form({ grant_type: "client_credentials", client_id: c.client_id, client_secret: c.client_secret, audience: "x", resource: "y" }),
      );
      expect(extra.status).toBe(200);
    });

    it("auth - HTTP Basic client authentication works too", async ({ derrick }) => {
      const c = TEST_CLIENTS.beta;
      const res = await fetch(`${derrick.url}/v2/token`, {
        ...form({ grant_type: "client_credentials" }),
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${btoa(`${c.client_id}:${c.client_secret}`)}`,
        },
      });
      expect(res.status).toBe(200);
    });

    it("auth - a wrong secret or unknown client is 401 invalid_client (RFC 6749)", async ({ derrick }) => {
      for (const fields of [
        { grant_type: "client_credentials", client_id: "alpha", client_secret: "wrong-secret" },
        { grant_type: "client_credentials", client_id: "nobody", client_secret: "whatever1" },
        // Ids no client can have (registry keys are subject tokens) are unknown clients, not errors.
        ...["a b", "*", "x>", "a.b"].map((client_id) => ({ grant_type: "client_credentials", client_id, client_secret: "whatever1" })),
      ]) {
        const res = await fetch(`${derrick.url}/v2/token`, form(fields));
        expect(res.status, fields.client_id).toBe(401);
        expect(await res.json()).toEqual({ error: "invalid_client", error_description: "client authentication failed" });
      }
      // Basic credentials that are not form-urlencoded (RFC 6749 §2.3.1) fail client authentication.
      const res = await fetch(`${derrick.url}/v2/token`, {
        ...form({ grant_type: "client_credentials" }),
        headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${btoa("alpha:%zz")}` },
      });
      expect(res.status).toBe(401);
      expect((await json<OAuthError>(res)).error).toBe("invalid_client");
    });

    it("auth - another grant type is unsupported_grant_type, a missing one invalid_request", async ({ derrick }) => {
      let res = await fetch(`${derrick.url}/v2/token`, form({ grant_type: "password", client_id: "alpha", client_secret: "x" }));
      expect(res.status).toBe(400);
      expect((await json<OAuthError>(res)).error).toBe("unsupported_grant_type");
      res = await fetch(`${derrick.url}/v2/token`, form({ client_id: "alpha", client_secret: "x" }));
      expect((await json<OAuthError>(res)).error).toBe("invalid_request");
    });

    it("auth - the JWKS publishes the embedded issuer's public key only", async ({ derrick }) => {
      const res = await fetch(`${derrick.url}/.well-known/jwks.json`);
      const jwks = await json<Jwks>(res);
      expect(jwks.keys.length).toBeGreaterThan(0);
      expect(jwks.keys[0]).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
      expect(jwks.keys[0]!.d).toBeUndefined();
    });
  });

  describe("bearer tokens", () => {
    it("auth - a missing token is 401 problem+json with WWW-Authenticate", async ({ derrick }) => {
      const res = await derrick.call("/v1/system/whoami", { as: null });
      await expectProblem(res, 401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
    });

    it("auth - tampered, unsigned, expired, wrong-audience and wrong-issuer tokens are refused", async ({ derrick }) => {
      const good = await derrick.token("alpha");
      const [h, p, s] = good.split(".");
      const claims = JSON.parse(Buffer.from(p!, "base64url").toString());
      const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims, groups: ["users.data.root"] })).toString("base64url")}.${s}`;
      const unsigned = new UnsecuredJWT({ ...claims }).encode();
      const key = await loadOrCreateSigningKey(derrick.dataDir);
      const sign = (mutate: (j: SignJWT) => SignJWT) =>
        mutate(new SignJWT({ client_id: "alpha", groups: [] }).setProtectedHeader({ alg: "ES256", kid: key.kid }).setSubject("alpha")).sign(
          key.privateKey,
        );
      const expired = await sign((j) =>
        j.setIssuer(EMBEDDED_ISSUER).setAudience("derrick").setIssuedAt(1_700_000_000).setExpirationTime(1_700_000_600),
      );
      const wrongAudience = await sign((j) => j.setIssuer(EMBEDDED_ISSUER).setAudience("someone-else").setExpirationTime("5m"));
      const wrongIssuer = await sign((j) => j.setIssuer("https://evil.example").setAudience("derrick").setExpirationTime("5m"));
      const cases: Array<[string, string, RegExp]> = [
        ["tampered", tampered, /signature/],
        ["alg none", unsigned, /./],
        ["expired", expired, /expired/],
        ["wrong audience", wrongAudience, /aud/],
        ["wrong issuer", wrongIssuer, /iss/],
        ["garbage", "not-a-jwt", /malformed|not valid/],
      ];
      for (const [, token, detail] of cases) {
        const res = await derrick.call("/v1/system/whoami", { headers: { authorization: `Bearer ${token}` } });
        const body = await expectProblem(res, 401);
        expect(String(body.detail)).toMatch(detail);
      }
    });

    it("auth - a user token minted by the embedded issuer names the user and the client", async ({ derrick }) => {
      const key = await loadOrCreateSigningKey(derrick.dataDir);
      const { mintToken } = await import("../../actors/identity/keys.ts");
      const token = await mintToken(key, { sub: "alice@example.com", client_id: "alpha", groups: ["g1"] }, "derrick", 300);
      const res = await derrick.call("/v1/system/whoami", { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        principal: { clientId: "alpha", subject: "alice@example.com", groups: ["g1"], kind: "user" },
      });
    });
  });

  describe("appkey and partition", () => {
    it("appkey - missing, unknown and another client's appkey are 401", async ({ derrick }) => {
      for (const appkey of [undefined, "no-such-appkey", TEST_CLIENTS.beta.appkey]) {
        const headers: Record<string, string> = { authorization: `Bearer ${await derrick.token("alpha")}` };
        if (appkey) headers.appkey = appkey;
        else headers.appkey = "";
        const res = await fetch(`${derrick.url}/v1/system/whoami`, { headers: { ...headers, "slb-partition-id": "opendes" } });
        await expectProblem(res, 401);
      }
    });

    it("appkey - a client's requests at once with one appkey share one check with the identity actor, its refusal included", async ({
      derrick,
      nc,
    }) => {
      const checks: string[] = [];
      const spy = nc.subscribe(identityAppkeyVerify.subject, { callback: (_e, msg) => void checks.push(msg.string()) });
      await nc.flush();
      try {
        // An appkey never checked before: a refusal is not remembered, so no earlier test can have answered it.
        const appkey = `unknown-${Date.now()}`;
        const headers = { authorization: `Bearer ${await derrick.token("alpha")}`, appkey, "slb-partition-id": "opendes" };
        // The token verified once before (then remembered), so the requests reach the appkey check together.
        expect((await derrick.call("/v1/system/whoami", { as: "alpha" })).status).toBe(200);
        const answers = await Promise.all(Array.from({ length: 16 }, () => fetch(`${derrick.url}/v1/system/whoami`, { headers })));
        for (const res of answers) await expectProblem(res, 401);
        await nc.flush();
        // One check for all when they arrive together; a busy machine may spread them over a few. Unshared: 16.
        const sent = checks.filter((body) => body.includes(appkey)).length;
        expect(sent).toBeGreaterThanOrEqual(1);
        expect(sent).toBeLessThan(answers.length / 2);
      } finally {
        spy.unsubscribe();
      }
    });

    it("partition - missing is 400, unknown is 403, two different headers are 400", async ({ derrick }) => {
      let body = await expectProblem(await derrick.call("/v1/system/whoami", { partition: null }), 400);
      expect(body.errors).toEqual([{ pointer: "/headers/slb-partition-id", message: "is required" }]);
      await expectProblem(await derrick.call("/v1/system/whoami", { partition: "nobodys" }), 403);
      body = await expectProblem(
        await derrick.call("/v1/system/whoami", { headers: { "slb-partition-id": "opendes", "data-partition-id": "other" } }),
        400,
      );
      body = await expectProblem(await derrick.call("/v1/system/whoami", { partition: "bad.partition" }), 400);
      expect(body.errors).toEqual([{ pointer: "/headers/slb-partition-id", message: "is not a valid partition id" }]);
      // The header at fault is the one named, OSDU's as well as derrick's own.
      body = await expectProblem(
        await derrick.call("/v1/system/whoami", { partition: null, headers: { "data-partition-id": "bad.partition" } }),
        400,
      );
      expect(body.errors).toEqual([{ pointer: "/headers/data-partition-id", message: "is not a valid partition id" }]);
    });

    it("partition - data-partition-id alone, or both agreeing, is accepted", async ({ derrick }) => {
      let res = await derrick.call("/v1/system/whoami", { partition: null, headers: { "data-partition-id": "other" } });
      expect((await json(res)).partition).toBe("other");
      res = await derrick.call("/v1/system/whoami", { headers: { "slb-partition-id": "opendes", "data-partition-id": "opendes" } });
      expect(res.status).toBe(200);
    });
  });

  describe("errors and bodies", () => {
    it("bodies - text/json and application/*+json are parsed as JSON", async ({ derrick }) => {
      for (const type of ["text/json", "application/vnd.derrick+json", "application/json; charset=utf-8"]) {
        const res = await fetch(`${derrick.url}/v1/system/echo`, {
          method: "POST",
          headers: { "content-type": type },
          body: JSON.stringify({ hello: type }),
        });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ hello: type });
      }
    });

    it("bodies - the limit holds for chunked bodies and for any declared length, always as problem+json", async ({ derrick }) => {
      const chunked = (text: string, pieces = 4) =>
        new ReadableStream<Uint8Array>({
          start(controller) {
            const bytes = new TextEncoder().encode(text);
            const step = Math.ceil(bytes.length / pieces);
            for (let i = 0; i < bytes.length; i += step) controller.enqueue(bytes.subarray(i, i + step));
            controller.close();
          },
        });
      const post = (path: string, type: string, body: ReadableStream<Uint8Array>) =>
        fetch(`${derrick.url}${path}`, { method: "POST", headers: { "content-type": type }, body });
      // Under the limit: parsed like any body.
      let res = await post("/v1/system/echo", "application/json", chunked(JSON.stringify({ small: "y".repeat(1000) })));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ small: "y".repeat(1000) });
      res = await post(
        "/v2/token",
        "application/x-www-form-urlencoded",
        chunked(
          new URLSearchParams({
            grant_type: "client_credentials",
            client_id: "alpha",
            client_secret: TEST_CLIENTS.alpha.client_secret,
          }).toString(),
        ),
      );
      expect(res.status).toBe(200);
      // Over it: refused once the limit is passed, with a problem body.
      res = await post("/v1/system/echo", "application/json", chunked(JSON.stringify({ big: "x".repeat(20_000) }), 20));
      expect(res.status, await res.clone().text()).toBe(413);
      await expectProblem(res, 413);
      // A declared length far beyond the limit (and beyond Bun's own cap) is still a problem+json 413.
      const raw = await new Promise<string>((resolve, reject) => {
        let answer = "";
        const socket = connectTcp({ host: "127.0.0.1", port: derrick.edge!.port }, () =>
          socket.write("POST /v1/system/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000000\r\n\r\n{"),
        );
        socket.on("data", (d) => {
          answer += d.toString();
          if (answer.includes("\r\n\r\n{")) socket.destroy();
        });
        socket.on("close", () => resolve(answer));
        socket.on("error", reject);
        setTimeout(() => socket.destroy(), 3_000);
      });
      expect(raw).toMatch(/^HTTP\/1\.1 413/);
      expect(raw.toLowerCase()).toContain("content-type: application/problem+json");
    });
  });

  describe("operations", () => {
    it("ops - healthz and readyz are 200 while NATS and every actor answer", async ({ derrick }) => {
      expect((await fetch(`${derrick.url}/healthz`)).status).toBe(200);
      const res = await fetch(`${derrick.url}/readyz`);
      expect(res.status).toBe(200);
      const body = await json<{ actors: Record<string, boolean> }>(res);
      for (const actor of derrick.cfg.actors) expect(body.actors[actor]).toBe(true);
    });

    it("ops - /openapi.json is OpenAPI 3.1 and documents the routes; /docs renders without a CDN", async ({ derrick }) => {
      const doc = await openApiDocument(derrick.url);
      expect(doc.openapi).toMatch(/^3\.1\./);
      const validator = new Validator();
      const verdict = await validator.validate(doc as Parameters<Validator["validate"]>[0]);
      expect(verdict.errors ?? []).toEqual([]);
      expect(verdict.valid).toBe(true);
      expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v2/token", "/.well-known/jwks.json", "/readyz", "/v1/system/echo"]));
      // The token endpoint takes a form, and says so (and what its errors look like).
      const tokenOp = doc.paths["/v2/token"]!.post!;
      expect(tokenOp.requestBody?.content["application/x-www-form-urlencoded"]?.schema?.required).toEqual(["grant_type"]);
      expect(Object.keys(tokenOp.responses)).toEqual(expect.arrayContaining(["200", "400", "401"]));
      // Every route that needs the partition header documents it, path or query parameters or not, and
      // every problem answer has the media type it is sent with.
      const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.entries(ops).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })),
      );
      const partitioned = operations.filter(
        ({ name, op }) => op.security?.some((s) => "appkey" in s) || / \/api\/(search\/v2\/query|storage\/v2\/records)/.test(name),
      );
      const headerNames = (op: Operation) => (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name);
      expect(partitioned.length).toBeGreaterThan(40);
      for (const { name, op } of partitioned)
        expect(headerNames(op), name).toEqual(expect.arrayContaining(["slb-partition-id", "data-partition-id"]));
      expect(partitioned.map(({ name }) => name)).toEqual(
        expect.arrayContaining([
          "DELETE /api/search/v2/query_with_cursor/{cursor}",
          "GET /api/storage/v2/records/{id}",
          "DELETE /v1/notifications/subscriptions/{subscriptionId}",
        ]),
      );
      expect(headerNames(doc.paths["/api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties"]!.put!)).not.toContain(
        "slb-partition-id",
      );
      for (const { name, op } of operations) {
        for (const [status, response] of Object.entries(op.responses ?? {})) {
          if (Number(status) < 400 || !response.content || (name === "POST /v2/token" && ["400", "401", "404"].includes(status))) continue;
          expect(Object.keys(response.content), `${name} ${status}`).toEqual(["application/problem+json"]);
        }
      }
      expect(JSON.stringify(doc)).not.toContain("x-derrick");
      const page = await (await fetch(`${derrick.url}/docs`)).text();
      const script = /<script src="([^"]+)"/.exec(page)?.[1];
      expect(script).toBe("/docs/assets/scalar-standalone.js");
      const asset = await fetch(`${derrick.url}${script}`);
      expect(asset.status).toBe(200);
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    });

    it("ops - the docs page finds the OpenAPI document from /docs and from /docs/ alike", async ({ derrick }) => {
      for (const page of ["/docs", "/docs/"]) {
        const html = await (await fetch(`${derrick.url}${page}`)).text();
        const configured = /data-configuration='([^']*)'/.exec(html)?.[1];
        expect(configured, page).toBeDefined();
        const spec = new URL(JSON.parse(configured!).url, `${derrick.url}${page}`);
        const res = await fetch(spec);
        expect(res.status, `${page} → ${spec.pathname}`).toBe(200);
        expect((await json(res)).openapi).toMatch(/^3\.1\./);
      }
    });

    it("ops - /metrics counts requests by route and status and times NATS requests", async ({ derrick }) => {
      const echo = await fetch(`${derrick.url}/v1/system/echo`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-request-id": "echo-1" },
        body: "{}",
      });
      expect(echo.headers.get("x-request-id")).toBe("echo-1");
      // An actor's non-200 answer (a created entity, a refusal) keeps its status in the reply, the request id and the metrics.
      const segment = { name: "metrics", riskFactors: [{ name: "trap", probability: 0.5 }], volumes: { oil: { unit: "MMbbl", mean: 10 } } };
      const created = await derrick.call("/assessments/v1/segmentanalyses/metrics-seg", {
        as: "admin",
        method: "PUT",
        body: JSON.stringify(segment),
        headers: { "x-request-id": "created-1" },
      });
      expect(created.status).toBe(201);
      expect(created.headers.get("x-request-id")).toBe("created-1");
      const missing = await derrick.call("/assessments/v1/licenses/no-such-license", {
        as: "admin",
        headers: { "x-request-id": "missing-1" },
      });
      expect(missing.status).toBe(404);
      expect(missing.headers.get("x-request-id")).toBe("missing-1");
      // No route at all: counted as unmatched with the status it got.
      expect((await fetch(`${derrick.url}/no/such/route`)).status).toBe(404);
      const text = await (await fetch(`${derrick.url}/metrics`)).text();
      expect(text).toMatch(/derrick_http_requests_total\{route="unmatched",method="GET",status="404"\} \d+\n/);
      expect(text).not.toMatch(/route="unmatched",method="GET",status="200"/);
      expect(text).toMatch(/derrick_http_requests_total\{route="\/v1\/system\/echo",method="POST",status="200"\} \d+/);
      expect(text).toMatch(/derrick_http_requests_total\{route="\/assessments\/v1\/segmentanalyses\/:id",method="PUT",status="201"\} 1\n/);
      expect(text).toMatch(/derrick_http_requests_total\{route="\/assessments\/v1\/licenses\/:id",method="GET",status="404"\} 1\n/);
      expect(text).toMatch(/derrick_http_request_duration_seconds_bucket\{/);
      expect(text).toMatch(/derrick_nats_request_duration_seconds_count\{subject="derrick.system.echo",outcome="ok"\} \d+/);
    });
  });
});

describe("edge on a NATS server with the default max_payload (1 MB)", () => {
  const it = smallPayloads;

  it("bodies - a body the bus cannot carry is 413 (no retry helps), not 503 with Retry-After; smaller ones pass", async ({ derrick }) => {
    const echo = (size: number) =>
      fetch(`${derrick.url}/v1/system/echo`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ pad: "x".repeat(size) }),
      });
    const refused = await echo(1_048_500 - 11);
    await expectProblem(refused, 413);
    expect(refused.headers.get("retry-after")).toBeNull();
    // A body within the limit crosses the bus: 14 twin values of 60 KB in one PUT (~840 KB).
    const twins = Array.from({ length: 14 }, (_, i) => ({ name: `p${i}`, value: "v".repeat(60_000) }));
    const put = await derrick.call("/api/twin-properties/v1/acme/prod/dev-1mb/twin-properties", {
      as: "admin",
      partition: null,
      method: "PUT",
      body: JSON.stringify({ group: "big", twins }),
    });
    expect(put.status, await put.clone().text()).toBe(200);
  });

  it("bodies - the echo needs no credentials, so it refuses more than 4 KiB before any NATS work", async ({ derrick }) => {
    const echo = (body: string) =>
      fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const small = JSON.stringify({ pad: "x".repeat(4000) });
    expect((await echo(small)).status).toBe(200);
    const problem = await expectProblem(await echo(JSON.stringify({ pad: "x".repeat(5000) })), 413);
    expect(problem.detail).toMatch(/at most 4096 bytes/);
  });
});
