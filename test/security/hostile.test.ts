/**
 * Hostile input, generated: every operation of the edge's own OpenAPI document receives malformed and
 * oversized bodies, path parameters, query strings and headers (fast-check). Whatever arrives, the
 * edge answers in bounded time, never with a 5xx, always with problem+json for a refusal (the RFC 6749
 * token endpoint answers its own JSON errors), and nothing is written: every JetStream stream (KV
 * buckets included) keeps its last sequence.
 */
import { afterAll, describe, expect } from "vitest";
import fc from "fast-check";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually, TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { openApiDocument } from "../harness/openapi.ts";

type Operation = { method: string; path: string; params: string[] };

/** Scales every property's run count (HOSTILE_RUNS=5 for a longer hunt); the default keeps `npm test` short. */
const SCALE = Number(process.env.HOSTILE_RUNS ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));
const BODY_LIMIT = 64 * 1024;
/** A field no strict body accepts: generated objects carry it so that no generated body can be a valid write. */
const POISON = "__hostile__";

/** The file's derrick, for the helpers below; set once it runs. */
let derrick: TestDerrick;
let operations: Operation[];
let adminToken: string;
let tried = 0;
const outcomes = new Map<number, number>();

async function streamSequences(): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(derrick.nc);
  const seqs: Record<string, number> = {};
  for await (const info of jsm.streams.list()) seqs[info.config.name] = info.state.last_seq;
  return seqs;
}

function fill(op: Operation, values: Record<string, string>): string {
  return op.path.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? "x");
}

/** Sends one request and checks the invariants; returns a description when one is broken. */
async function send(op: Operation, path: string, init: RequestInit): Promise<void> {
  tried++;
  let res: Response;
  try {
    res = await fetch(`${derrick.url}${path}`, { ...init, method: op.method.toUpperCase(), signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    throw new Error(`${op.method} ${path}: no answer (${(error as Error).name}: ${(error as Error).message})`);
  }
  outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
  const type = res.headers.get("content-type") ?? "";
  const text = await res.text();
  if (res.status >= 500) throw new Error(`${op.method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  // 431: Bun's HTTP parser refuses oversized header sections before the app sees the request (no body).
  if (res.status >= 400 && res.status !== 431) {
    // The token endpoint answers RFC 6749 JSON errors; a body the edge cannot even parse is refused earlier, as problem+json.
    const expected = op.path === "/v2/token" ? /application\/(problem\+)?json/ : /application\/problem\+json/;
    if (!expected.test(type))
      throw new Error(`${op.method} ${path}: ${res.status} answered as ${type || "no content type"}: ${text.slice(0, 200)}`);
    JSON.parse(text);
  }
}

/** fast-check's run with a short report: generated values can be megabytes, so the counterexample is clipped. */
async function holds<T extends unknown[]>(property: fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
  const result = await fc.check(property, { numRuns, endOnFailure: true });
  if (result.failed) {
    const example = JSON.stringify(result.counterexample, (_, v) =>
      typeof v === "string" && v.length > 120 ? `${v.slice(0, 60)}…(${v.length} chars)` : v,
    );
    throw new Error(
      `${String((result.errorInstance as Error)?.message ?? result.errorInstance)}\ncounterexample: ${example.slice(0, 1500)} (seed ${result.seed})`,
    );
  }
}

const headersFor = (extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${adminToken}`,
  appkey: TEST_CLIENTS.admin.appkey,
  "slb-partition-id": "opendes",
  ...extra,
});

/** Text that stresses parsers: control characters, unicode, traversal, encodings, long runs. */
const nastyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.constantFrom(
    "..",
    "../..",
    "%00",
    "%2e%2e%2f",
    "\u0000",
    "a.b",
    "*",
    ">",
    "$SYS",
    "' OR 1=1 --",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a hostile value, not a template
    "${jndi:x}",
    "__proto__",
    "constructor",
    " ",
    "a b",
  ),
  fc.integer({ min: 129, max: 20_000 }).map((n) => "x".repeat(n)),
);

/** JSON bodies no route accepts: wrong types, poisoned objects, deep nesting. */
const malformedJson = fc.oneof(
  fc
    .jsonValue({ maxDepth: 3 })
    .filter((v) => v === null || typeof v !== "object" || Array.isArray(v))
    .map((v) => JSON.stringify(v)),
  fc
    .dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 6 })
    .map((o) => JSON.stringify({ ...o, [POISON]: true })),
  fc.integer({ min: 100, max: 5_000 }).map((depth) => `${"[".repeat(depth)}${"]".repeat(depth)}`),
  fc.integer({ min: 100, max: 2_000 }).map((depth) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`),
);
const brokenText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.constantFrom("{", '{"a":', "[1,2", "nul", "\u0000\u0001", '{"a":1}{"b":2}', "\ufeff{}", "{'a':1}"),
  fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
);
const contentTypes = fc.constantFrom(
  "application/json",
  "application/json; charset=utf-16",
  "text/json",
  "application/cloudevents+json",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "text/plain",
  "application/octet-stream",
  "application/xml",
  "",
);

const it = derrickTest({ env: { DERRICK_BODY_LIMIT: String(BODY_LIMIT) } });

describe("hostile input over every OpenAPI route", () => {
  let before: Record<string, number>;

  it.beforeAll(async ({ derrick: booted }) => {
    derrick = booted;
    const doc = await openApiDocument(derrick.url);
    operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops)
        .filter((m) => ["get", "put", "post", "delete", "patch"].includes(m))
        .map((method) => ({ method, path, params: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!) })),
    );
    adminToken = await derrick.token("admin");
    // Warm every bucket and stream into existence before the snapshot, so lazily created ones do not count as writes.
    await eventually(async () => (await fetch(`${derrick.url}/readyz`)).status === 200);
    before = await streamSequences();
  });
  afterAll(async () => {
    console.log(
      `hostile input: ${tried} requests over ${operations?.length ?? 0} operations; statuses ${JSON.stringify(Object.fromEntries([...outcomes].sort(([a], [b]) => a - b)))}`,
    );
  });

  it("hostile - the OpenAPI document lists the operations of every capability", () => {
    const paths = new Set(operations.map((o) => o.path.split("/").slice(0, 3).join("/")));
    expect(operations.length).toBeGreaterThan(30);
    for (const prefix of [
      "/v1/notifications",
      "/api/twin-properties",
      "/v1/projects",
      "/api/search",
      "/api/storage",
      "/assessments/v1",
      "/v2/token",
    ]) {
      expect([...paths].some((p) => prefix.startsWith(p) || p.startsWith(prefix))).toBe(true);
    }
  });

  it("hostile - malformed, oversized and mistyped bodies are refused with problem+json", async () => {
    const body = fc.oneof(
      { weight: 4, arbitrary: malformedJson },
      { weight: 2, arbitrary: brokenText },
      { weight: 1, arbitrary: fc.constant("x".repeat(BODY_LIMIT + 1)) },
      { weight: 1, arbitrary: fc.constant(JSON.stringify({ [POISON]: "y".repeat(BODY_LIMIT) })) },
    );
    await holds(
      fc.asyncProperty(fc.constantFrom(...operations), body, contentTypes, async (op, text, contentType) => {
        const path = fill(op, Object.fromEntries(op.params.map((p) => [p, "hostile-1"])));
        await send(op, path, {
          headers: headersFor(contentType ? { "content-type": contentType } : {}),
          body: op.method === "get" ? undefined : text,
        });
      }),
      runs(400),
    );
  });

  it("hostile - path parameters of any shape are refused or not found, never a server error", async () => {
    await holds(
      fc.asyncProperty(
        fc.constantFrom(...operations.filter((o) => o.params.length > 0)),
        fc.array(nastyText, { minLength: 3, maxLength: 3 }),
        fc.boolean(),
        async (op, values, encode) => {
          const filled = Object.fromEntries(
            op.params.map((p, i) => [p, encode ? encodeURIComponent(values[i % 3]!) : values[i % 3]!.replace(/[?#]/g, "")]),
          );
          const path = fill(op, filled);
          const body = op.method === "get" || op.method === "delete" ? undefined : JSON.stringify({ [POISON]: 1 });
          await send(op, path, { headers: headersFor({ "content-type": "application/json" }), body });
        },
      ),
      runs(400),
    );
  });

  it("hostile - query strings of any shape never break a route", async () => {
    const pair = fc.tuple(
      fc.oneof(
        fc.constantFrom("limit", "offset", "group", "category", "version", "cursor", "type", "__proto__", "constructor"),
        fc.string({ maxLength: 12 }),
      ),
      fc.oneof(fc.constantFrom("-1", "1e309", "NaN", "99999999999999999999", "[]", "{}", "0x10", "", "true"), nastyText),
    );
    await holds(
      fc.asyncProperty(fc.constantFrom(...operations), fc.array(pair, { maxLength: 6 }), async (op, pairs) => {
        const query = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
        const path = `${fill(op, Object.fromEntries(op.params.map((p) => [p, "hostile-2"])))}?${query}`;
        const body = op.method === "get" || op.method === "delete" ? undefined : JSON.stringify({ [POISON]: 1 });
        await send(op, path, { headers: headersFor({ "content-type": "application/json" }), body });
      }),
      runs(300),
    );
  });

  it("hostile - forged credentials, partitions and odd headers are refused with problem+json", async () => {
    const headerValue = fc.oneof(
      fc.stringMatching(/^[\x21-\x7e][\x20-\x7e]{0,200}$/),
      fc.integer({ min: 1_000, max: 12_000 }).map((n) => "A".repeat(n)),
    );
    const jwtish = fc
      .tuple(fc.base64String({ maxLength: 80 }), fc.base64String({ maxLength: 200 }), fc.base64String({ maxLength: 120 }))
      .map((parts) => parts.join("."));
    const headers = fc.record(
      {
        authorization: fc.oneof(
          headerValue,
          jwtish.map((t) => `Bearer ${t}`),
          fc.constant(`Bearer ${"x".repeat(5000)}`),
          fc.constantFrom("Basic YTpi", "Bearer", "bearer  ", "Bearer a.b.c"),
        ),
        appkey: fc.oneof(headerValue, fc.constantFrom(TEST_CLIENTS.alpha.appkey, "")),
        "slb-partition-id": fc.oneof(headerValue, fc.constantFrom("other", "opendes ", "unknown", "OPENDES", "a".repeat(129))),
        "data-partition-id": headerValue,
        "if-match": headerValue,
        "x-request-id": headerValue,
        traceparent: headerValue,
      },
      { requiredKeys: ["authorization"] },
    );
    await holds(
      fc.asyncProperty(fc.constantFrom(...operations), headers, async (op, extra) => {
        const path = fill(op, Object.fromEntries(op.params.map((p) => [p, "hostile-3"])));
        const body = op.method === "get" || op.method === "delete" ? undefined : JSON.stringify({ [POISON]: 1 });
        await send(op, path, { headers: { "content-type": "application/json", ...extra }, body });
      }),
      runs(300),
    );
  });

  it("hostile - nothing was written: every stream and bucket kept its last sequence", async () => {
    expect(await streamSequences()).toEqual(before);
  });
});
