/**
 * What the edge answers on its own, before any actor is asked: credentials, partition, body limits,
 * media types, routes and methods, and how a missing actor is reported. The app is driven with
 * `app.handle(new Request(…))` on a real nats-server with no actor serving.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../test/harness/index.ts";
import { loadConfig } from "../config/index.ts";
import { createLogger } from "../platform/logger.ts";
import { Bus } from "../platform/transport/index.ts";
import { TWIN_REQUEST_MAX_BYTES } from "../subjects/twins.ts";
import { createEdgeApp, type EdgeApp } from "./app.ts";
import { createMetrics } from "./metrics.ts";

const ISSUER = "https://issuer.test";
const AUDIENCE = "derrick-edge-test";
const TWIN = "http://edge.test/api/twin-properties/v1/org/env/twin-1/twin-properties";
const QUERY = "http://edge.test/api/search/v2/query";

let nats: TestNats;
let nc: NatsConnection;
let bus: Bus;
let app: EdgeApp;
let jwks: ReturnType<typeof Bun.serve>;
let key: CryptoKey;

const token = (audience = AUDIENCE) =>
  new SignJWT({ client_id: "alpha", groups: ["twins.readers", "twins.writers", "users.datalake.viewers"] })
    .setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(ISSUER)
    .setAudience(audience)
    .setSubject("alpha")
    .setExpirationTime("5m")
    .sign(key);

type Problem = { status: number; detail: string; errors?: Array<{ pointer: string; message: string }> };

async function problemOf(res: Response, status: number): Promise<Problem> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/problem+json");
  return (await res.json()) as Problem;
}

beforeAll(async () => {
  const pair = await generateKeyPair("RS256", { extractable: true });
  key = pair.privateKey;
  const keys = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" }] };
  jwks = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json(keys) });
  nats = await startTestNats();
  nc = await connect({ servers: nats.url });
  bus = new Bus(nc, { timeoutMs: 2_000 });
  const cfg = loadConfig({
    NATS_URL: nats.url,
    DERRICK_PARTITIONS: "opendes,other",
    DERRICK_AUTH_ISSUER: ISSUER,
    DERRICK_AUTH_JWKS_URL: `http://127.0.0.1:${jwks.port}/jwks`,
    DERRICK_AUTH_AUDIENCE: AUDIENCE,
    DERRICK_LOG_LEVEL: "silent",
  });
  app = createEdgeApp({ cfg, bus, log: createLogger("silent"), metrics: createMetrics(false) });
});

afterAll(async () => {
  bus?.close();
  await nc?.close();
  await nats?.cleanup();
  jwks?.stop(true);
});

describe("edge without actors", () => {
  it("no route makes Elysia parse cookies or copy every header: each handler and hook takes only what it uses from the context", () => {
    // Handed the context whole (`relay(c, …)`), Elysia infers that a route reads everything (docs/edge.md#handlers-take-what-they-use).
    const inferring = app.routes
      .map((route) => ({ route: `${route.method} ${route.path}`, code: String((route as unknown as { compile(): unknown }).compile()) }))
      .filter(({ code }) => /cookie|headers\.toJSON|c\.headers\s*=/i.test(code))
      .map(({ route }) => route);
    expect(app.routes.length).toBeGreaterThan(50);
    expect(inferring).toEqual([]);
  });

  it("edge - a route without credentials is 401 with a Bearer challenge; a malformed header and a foreign token too", async () => {
    const none = await app.handle(new Request(TWIN));
    expect((await problemOf(none, 401)).detail).toContain("Bearer token is required");
    expect(none.headers.get("www-authenticate")).toContain("Bearer");
    const malformed = await app.handle(new Request(TWIN, { headers: { authorization: "Basic abc" } }));
    expect(malformed.headers.get("www-authenticate")).toContain('error="invalid_request"');
    await problemOf(malformed, 401);
    const foreign = await app.handle(new Request(TWIN, { headers: { authorization: `Bearer ${await token("someone-else")}` } }));
    expect(foreign.headers.get("www-authenticate")).toContain('error="invalid_token"');
    await problemOf(foreign, 401);
  });

  it("edge - the partition header is required, must be served here, and its two names must agree", async () => {
    const auth = `Bearer ${await token()}`;
    const query = (headers: Record<string, string>) =>
      app.handle(
        new Request(QUERY, {
          method: "POST",
          headers: { authorization: auth, "content-type": "application/json", ...headers },
          body: "{}",
        }),
      );
    const missing = await problemOf(await query({}), 400);
    expect(missing.errors).toEqual([{ pointer: "/headers/slb-partition-id", message: "is required" }]);
    expect((await problemOf(await query({ "data-partition-id": "elsewhere" }), 403)).detail).toContain("elsewhere");
    const differ = await problemOf(await query({ "slb-partition-id": "opendes", "data-partition-id": "other" }), 400);
    expect(differ.errors?.[0]?.pointer).toBe("/headers/data-partition-id");
  });

  it("edge - a twin PUT over 1 MiB is 413 before its credentials or body are looked at", async () => {
    const body = JSON.stringify({ group: "config", twins: [{ name: "big", value: "x".repeat(TWIN_REQUEST_MAX_BYTES) }] });
    const res = await app.handle(new Request(TWIN, { method: "PUT", headers: { "content-type": "application/json" }, body }));
    expect((await problemOf(res, 413)).detail).toContain(String(TWIN_REQUEST_MAX_BYTES));
  });

  it("edge - a body that is not JSON is 415; one the schema refuses is 400 naming the field", async () => {
    const auth = `Bearer ${await token()}`;
    const text = await app.handle(
      new Request(TWIN, { method: "PUT", headers: { authorization: auth, "content-type": "text/plain" }, body: "x" }),
    );
    await problemOf(text, 415);
    const bad = await app.handle(
      new Request(TWIN, {
        method: "PUT",
        headers: { authorization: auth, "content-type": "application/json" },
        body: JSON.stringify({ group: "no spaces", twins: [{ name: "a", value: "1" }] }),
      }),
    );
    expect((await problemOf(bad, 400)).errors?.[0]?.pointer).toBe("/body/group");
  });

  it("edge - an unknown route is 404, a known path with another method 405 with Allow", async () => {
    await problemOf(await app.handle(new Request("http://edge.test/no/such/route")), 404);
    const wrong = await app.handle(new Request(TWIN, { method: "PATCH" }));
    await problemOf(wrong, 405);
    expect(wrong.headers.get("allow")?.split(/,\s*/).sort()).toEqual(["GET", "HEAD", "PUT"]);
  });

  it("edge - an authenticated request no actor serves is 503 with Retry-After, naming the subject", async () => {
    const res = await app.handle(new Request(TWIN, { headers: { authorization: `Bearer ${await token()}` } }));
    expect((await problemOf(res, 503)).detail).toContain("derrick.twins.get");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
