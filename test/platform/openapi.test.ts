/**
 * The API document as a client generator and a person use it: every example validates against its
 * own schema, credentials and partitions are described, every status the edge answers to what a
 * route checks before its handler is listed, a method a path does not have is 405 with Allow, and
 * Redocly's recommended rules find no error. Against a real derrick: the document as served.
 */
import { describe, expect } from "vitest";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { openApiDocument, type OpenApiDocument, type Operation, type Schema } from "../harness/openapi.ts";
import { OPERATION_EXAMPLES } from "../../edge/openapi/examples.ts";

const BODY_LIMIT = 64 * 1024;
const METHODS = ["get", "put", "post", "delete", "patch"];

const it = derrickTest({ env: { DERRICK_BODY_LIMIT: String(BODY_LIMIT) } });

/** The file's derrick and the document it serves, for the checks below; set once it runs. */
let derrick: TestDerrick;
let doc: OpenApiDocument;
let operations: Array<{ key: string; method: string; path: string; op: Operation }>;

/** The document's local `$ref`s replaced by what they point at (ajv then needs no document around a schema). */
function deref(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(deref);
  if (value === null || typeof value !== "object") return value;
  const ref = (value as { $ref?: string }).$ref;
  if (typeof ref === "string" && ref.startsWith("#/")) {
    const target = ref
      .slice(2)
      .split("/")
      .reduce<unknown>((at, part) => (at as Record<string, unknown>)[part.replaceAll("~1", "/").replaceAll("~0", "~")], doc);
    return deref(target);
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, deref(v)]));
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
/** ajv's errors for `value` against `schema`, or [] when it validates. */
function violations(schema: Schema | undefined, value: unknown): string[] {
  const validate = ajv.compile(deref(schema ?? {}) as Schema);
  return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`);
}

const isJson = (type: string) => /json/.test(type);
const fill = (path: string, op: Operation) =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) =>
    encodeURIComponent(String(op.parameters?.find((p) => p.name === name)?.example ?? "x")),
  );

it.beforeAll(async ({ derrick: booted }) => {
  derrick = booted;
  doc = await openApiDocument(derrick.url);
  operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, method, path, op })),
  );
});

describe("the API document", () => {
  it("openapi - every request body and every JSON 2xx answer has an example, and each validates against its own schema", () => {
    const missing: string[] = [];
    const invalid: string[] = [];
    let checked = 0;
    for (const { key, op } of operations) {
      for (const [type, media] of Object.entries(op.requestBody?.content ?? {})) {
        if (media.example === undefined) {
          missing.push(`${key} request ${type}`);
          continue;
        }
        invalid.push(...violations(media.schema, media.example).map((v) => `${key} request ${type}: ${v}`));
        checked++;
      }
      for (const [status, response] of Object.entries(op.responses)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          if (media.example === undefined) {
            if (/^2/.test(status) && isJson(type)) missing.push(`${key} ${status} ${type}`);
            continue;
          }
          invalid.push(...violations(media.schema, media.example).map((v) => `${key} ${status} ${type}: ${v}`));
          checked++;
        }
      }
    }
    for (const [name, schema] of Object.entries(doc.components.schemas ?? {})) {
      if (schema.example === undefined) continue;
      invalid.push(...violations(schema, schema.example).map((v) => `components.schemas.${name}: ${v}`));
      checked++;
    }
    expect(missing).toEqual([]);
    expect(invalid).toEqual([]);
    expect(checked).toBeGreaterThan(90);
  });

  it("openapi - an example that breaks its schema is caught (the check can fail)", () => {
    const upsert = doc.paths["/v1/notifications/subscriptions/types/{subscritpionType}"]!.post!.requestBody!.content["application/json"]!;
    expect(violations(upsert.schema, upsert.example)).toEqual([]);
    expect(violations(upsert.schema, { ...(upsert.example as object), unknown_field: 1 })).not.toEqual([]);
    expect(violations(upsert.schema, { subscriber: "x" })).not.toEqual([]);
  });

  it("openapi - every parameter with an example validates against its schema, and every path parameter has one", () => {
    const invalid: string[] = [];
    for (const { key, op } of operations) {
      for (const parameter of op.parameters ?? []) {
        if (parameter.in === "path") expect(parameter.example, `${key} ${parameter.name}`).toBeDefined();
        if (parameter.example !== undefined)
          invalid.push(...violations(parameter.schema, parameter.example).map((v) => `${key} ${parameter.name}: ${v}`));
      }
    }
    expect(invalid).toEqual([]);
  });

  it("openapi - every operation of the examples table is one of the document", () => {
    const keys = new Set(operations.map((o) => o.key));
    expect(Object.keys(OPERATION_EXAMPLES).filter((key) => !keys.has(key))).toEqual([]);
  });

  it("openapi - public operations have security: [], the others take a token from /v2/token (oauth2) or the issuer (bearer), with the appkey where the route checks it", () => {
    const schemes = doc.components.securitySchemes!;
    expect(schemes.oauth2).toMatchObject({ type: "oauth2", flows: { clientCredentials: { tokenUrl: "/v2/token", scopes: {} } } });
    expect(schemes.appkey).toMatchObject({ type: "apiKey", in: "header", name: "appkey" });
    expect(schemes.bearer).toMatchObject({ type: "http", scheme: "bearer" });
    const publicOps = operations.filter(({ op }) => Array.isArray(op.security) && op.security.length === 0).map((o) => o.key);
    expect(publicOps.sort()).toEqual(
      expect.arrayContaining([
        "GET /healthz",
        "GET /readyz",
        "GET /metrics",
        "GET /v1/system/info",
        "POST /v1/system/echo",
        "POST /v2/token",
        "GET /.well-known/jwks.json",
        "GET /api/search/v2/info",
        "GET /api/search/v2/liveness_check",
        "GET /api/search/v2/readiness_check",
      ]),
    );
    // Nothing else is public: the OSDU health checks of storage, at most, join the list.
    for (const key of publicOps)
      expect(key).toMatch(
        /^(GET \/(healthz|readyz|metrics|v1\/system\/info|\.well-known\/jwks\.json|api\/(search|storage)\/v2\/(info|liveness_check|readiness_check))|POST \/(v1\/system\/echo|v2\/token))$/,
      );
    for (const { key, op } of operations) {
      expect(op.security, key).toBeDefined();
      if (publicOps.includes(key)) continue;
      const names = op.security!.map((requirement) => Object.keys(requirement).sort().join("+"));
      const appkey = names.some((n) => n.includes("appkey"));
      expect(names, key).toEqual(appkey ? ["appkey+oauth2", "appkey+bearer"] : ["oauth2", "bearer"]);
    }
    // The appkey is asked where CONTRACT's capabilities check it, and not on twins or search.
    const byKey = new Map(operations.map((o) => [o.key, o.op]));
    const needsAppkey = (key: string) => byKey.get(key)!.security!.some((r) => "appkey" in r);
    expect(needsAppkey("POST /v1/notifications/events/{type}")).toBe(true);
    expect(needsAppkey("GET /v1/display-items")).toBe(true);
    expect(needsAppkey("PUT /assessments/v1/licenses/{id}")).toBe(true);
    expect(needsAppkey("POST /api/search/v2/query")).toBe(false);
    expect(needsAppkey("PUT /api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties")).toBe(false);
  });

  it("openapi - the two partition headers are documented as alternatives wherever one is needed, with a server and an introduction that says how to get a token", () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: "/" })]);
    expect(doc.info.description).toMatch(/POST \/v2\/token/);
    expect(doc.info.description).toMatch(/grant_type=client_credentials/);
    expect(doc.info.description).toMatch(/slb-partition-id/);
    let partitioned = 0;
    for (const { key, op } of operations) {
      const headers = (op.parameters ?? []).filter((p) => p.in === "header" && /partition-id$/.test(p.name));
      if (headers.length === 0) continue;
      partitioned++;
      expect(headers.map((h) => h.name).sort(), key).toEqual(["data-partition-id", "slb-partition-id"]);
      for (const header of headers) {
        // Neither is required on its own: one of the two is, which the descriptions say.
        expect(header.required, key).toBe(false);
        expect(header.description, key).toMatch(/either one; both only when/);
        expect(header.example, key).toBe("opendes");
      }
    }
    expect(partitioned).toBeGreaterThan(40);
  });

  it("openapi - request bodies list concrete media types, never a pattern", () => {
    for (const { key, op } of operations) {
      for (const type of Object.keys(op.requestBody?.content ?? {})) expect(type, key).toMatch(/^[a-z]+\/[a-z0-9.+-]+$/);
      if (Object.keys(op.requestBody?.content ?? {}).some(isJson)) {
        expect(Object.keys(op.requestBody!.content), key).toEqual(["application/json", "text/json", "application/cloudevents+json"]);
        expect(op.requestBody!.description, key).toMatch(/application\/<subtype>\+json/);
      }
    }
    expect(Object.keys(doc.paths["/v2/token"]!.post!.requestBody!.content)).toEqual(["application/x-www-form-urlencoded"]);
  });

  it("openapi - query parameters that take only whole numbers are integers", async () => {
    const query = (key: string, name: string) =>
      operations.find((o) => o.key === key)!.op.parameters!.find((p) => p.in === "query" && p.name === name)!.schema!;
    for (const kind of ["display-items", "key-parameters"]) {
      expect(query(`GET /v1/${kind}`, "offset")).toMatchObject({ type: "integer", minimum: 0 });
      expect(query(`GET /v1/${kind}`, "limit")).toMatchObject({ type: "integer", minimum: 1, maximum: 500, default: 50 });
    }
    expect(query("GET /assessments/v1/licenses/{id}", "version")).toMatchObject({ type: "integer", minimum: 1 });
    expect(query("GET /v2/projects/{projectId}/tasks", "limit")).toMatchObject({ type: "integer", minimum: 1, maximum: 100, default: 20 });
    // And the edge takes them as such.
    const page = await derrick.call("/v1/display-items?offset=1&limit=2", { as: "admin" });
    expect(page.status).toBe(200);
    expect(await page.json()).toMatchObject({ offset: 1, limit: 2 });
    expect((await derrick.call("/v1/display-items?limit=1.5", { as: "admin" })).status).toBe(400);
  });

  it("openapi - every tag has a description", () => {
    const used = new Set(operations.flatMap(({ op }) => op.tags ?? []));
    const described = new Map((doc.tags ?? []).map((t) => [t.name, t.description ?? ""]));
    for (const tag of used) expect(described.get(tag)?.length ?? 0, tag).toBeGreaterThan(30);
  });

  it("openapi - the document is the same on every request (completed once, not again on a completed copy), gzipped for clients that take it", async () => {
    const gzipped = await fetch(`${derrick.url}/openapi.json`, { headers: { "accept-encoding": "gzip" } });
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    expect(gzipped.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await gzipped.json()).toEqual(doc);
    const plain = await fetch(`${derrick.url}/openapi.json`, { headers: { "accept-encoding": "identity" } });
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(await plain.json()).toEqual(doc);
    const script = await fetch(`${derrick.url}/docs/assets/scalar-standalone.js`, { headers: { "accept-encoding": "gzip" } });
    expect(script.headers.get("content-encoding")).toBe("gzip");
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect((await script.text()).length).toBeGreaterThan(1_000_000);
  });

  it("openapi - every status the edge answers before a handler runs is documented: no credentials, no or an unserved partition, a body too large or not JSON", async () => {
    const admin = { authorization: `Bearer ${await derrick.token("admin")}`, appkey: TEST_CLIENTS.admin.appkey };
    const undocumented: string[] = [];
    const seen = new Map<number, number>();
    const expectDocumented = async (key: string, op: Operation, what: string, res: Response, expected?: number) => {
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
      const body = await res.text();
      if (!(String(res.status) in op.responses)) undocumented.push(`${key} (${what}): ${res.status} ${body.slice(0, 120)}`);
      if (expected !== undefined && res.status !== expected) undocumented.push(`${key} (${what}): ${res.status}, expected ${expected}`);
      if (res.status >= 400 && !key.endsWith(" /v2/token"))
        expect(res.headers.get("content-type"), `${key} (${what})`).toMatch(/^application\/problem\+json/);
    };
    for (const { key, method, path, op } of operations) {
      const url = `${derrick.url}${fill(path, op)}`;
      const send = (headers: Record<string, string>, body?: string) =>
        fetch(url, { method: method.toUpperCase(), headers, body, redirect: "manual" });
      const secured = (op.security ?? []).length > 0;
      const partitioned = (op.parameters ?? []).some((p) => p.name === "slb-partition-id");
      if (secured) await expectDocumented(key, op, "no credentials", await send({ "slb-partition-id": "opendes" }), 401);
      if (partitioned) {
        await expectDocumented(key, op, "no partition", await send(admin), 400);
        await expectDocumented(key, op, "unserved partition", await send({ ...admin, "slb-partition-id": "unserved" }), 403);
      }
      if (op.requestBody) {
        await expectDocumented(
          key,
          op,
          "body over the limit",
          await send({ ...admin, "slb-partition-id": "opendes", "content-type": "application/json" }, "x".repeat(BODY_LIMIT + 1)),
          413,
        );
        if (Object.keys(op.requestBody.content).some(isJson)) {
          await expectDocumented(
            key,
            op,
            "text/plain body",
            await send({ ...admin, "slb-partition-id": "opendes", "content-type": "text/plain" }, "{}"),
            415,
          );
        }
      }
    }
    console.log(`openapi statuses: ${[...seen].map(([s, n]) => `${s}×${n}`).join(", ")} over ${operations.length} operations`);
    expect(undocumented).toEqual([]);
    expect(seen.get(401)).toBeGreaterThan(40);
    expect(seen.get(415)).toBeGreaterThan(15);
  });
});

describe("methods a path does not have", () => {
  it("openapi - DELETE /v1/display-items is 405 problem+json with Allow: GET, HEAD", async () => {
    const res = await derrick.call("/v1/display-items", { method: "DELETE", as: "admin" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({ status: 405, code: 405, title: "Method Not Allowed", instance: "/v1/display-items" });
    // The metrics count it as the 405 it is.
    expect(await (await fetch(`${derrick.url}/metrics`)).text()).toMatch(
      /derrick_http_requests_total\{route="unmatched",method="DELETE",status="405"\} 1\n/,
    );
  });

  it("openapi - every documented path answers a method it lacks with 405 and an Allow naming its documented methods; unknown paths stay 404", async () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      const documented = Object.keys(ops)
        .filter((m) => METHODS.includes(m))
        .map((m) => m.toUpperCase());
      const op = Object.values(ops)[0]!;
      const res = await fetch(`${derrick.url}${fill(path, op)}`, {
        method: "PATCH",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status, path).toBe(405);
      const allow = res.headers.get("allow")?.split(", ") ?? [];
      expect(allow, path).toEqual(expect.arrayContaining(documented));
      if (documented.includes("GET")) expect(allow, path).toContain("HEAD");
      expect(res.headers.get("content-type"), path).toMatch(/^application\/problem\+json/);
    }
    expect((await fetch(`${derrick.url}/v1/no-such-thing`, { method: "DELETE" })).status).toBe(404);
    expect((await fetch(`${derrick.url}/healthz/extra`)).status).toBe(404);
    // A method a path has is not turned into a 405 by anything here.
    expect((await fetch(`${derrick.url}/healthz`, { method: "HEAD" })).status).toBe(200);
  });
});

describe("the docs page", () => {
  it("openapi - GET / leads to /docs, served from this origin under a policy that allows nothing else", async () => {
    const root = await fetch(`${derrick.url}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/docs");
    for (const page of ["/docs", "/docs/"]) {
      const res = await fetch(`${derrick.url}${page}`);
      expect(res.status, page).toBe(200);
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp, page).toMatch(/default-src 'none'/);
      expect(csp, page).toMatch(/connect-src 'self'(;|$)/);
      const html = await res.text();
      expect(html).not.toMatch(/https?:\/\//);
      const configuration = JSON.parse(/data-configuration='([^']*)'/.exec(html)![1]!) as Record<string, unknown>;
      expect(configuration).toMatchObject({
        url: "/openapi.json",
        withDefaultFonts: false,
        hideClientButton: true,
        telemetry: false,
        showDeveloperTools: "never",
        agent: { disabled: true },
      });
      expect(configuration).not.toHaveProperty("proxyUrl");
    }
  });
});

describe("the OpenAPI linter", () => {
  it("openapi - Redocly's recommended rules find no error in /openapi.json (offline, no telemetry)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "derrick-openapi-"));
    try {
      const file = join(dir, "openapi.json");
      writeFileSync(file, JSON.stringify(doc));
      writeFileSync(join(dir, "redocly.yaml"), "extends:\n  - recommended\ntelemetry: off\n");
      const cli = createRequire(import.meta.url).resolve("@redocly/cli/bin/cli.js");
      const env = {
        ...process.env,
        REDOCLY_TELEMETRY: "off",
        REDOCLY_SUPPRESS_UPDATE_NOTICE: "true",
        REDOCLY_SUPPRESS_NOTIFICATIONS: "true",
        NO_COLOR: "1",
      };
      // Exit code 1 when it finds errors: the report on stdout says which.
      const { stdout } = await promisify(execFile)("node", [cli, "lint", file, "--config", join(dir, "redocly.yaml"), "--format=json"], {
        cwd: dir,
        env,
        maxBuffer: 64 * 1024 * 1024,
      }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
      const report = JSON.parse(stdout) as {
        totals: { errors: number; warnings: number };
        problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
      };
      const errors = report.problems
        .filter((p) => p.severity === "error")
        .map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
      const warnings = new Map<string, number>();
      for (const p of report.problems) if (p.severity !== "error") warnings.set(p.ruleId, (warnings.get(p.ruleId) ?? 0) + 1);
      console.log(
        `redocly lint: ${report.totals.errors} errors, ${report.totals.warnings} warnings (${[...warnings].map(([rule, n]) => `${rule} ${n}`).join(", ")})`,
      );
      expect(errors).toEqual([]);
      expect(report.totals.errors).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
