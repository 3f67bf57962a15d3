/**
 * Deeply nested bodies. Elysia builds a validation error by pretty-printing the whole invalid body,
 * O(depth²): `[`×30,000 `]`×30,000 (60 KB, no credentials) held the process for 21 s and answered 500,
 * and every other request (`/healthz` included) waited behind it. The edge now measures nesting in one
 * pass over the text before parsing (MAX_BODY_DEPTH) and answers 400 naming the limit; a route with its
 * own smaller size limit (the anonymous echo) refuses a larger body before reading it.
 *
 * No wall-clock assertion (performance is measured in bench/ and docs/edge.md): the old code fails
 * these on status and message (500, or a validation 400 without the depth, or a 200), not on time.
 */
import { describe, expect } from "vitest";
import { TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { openApiDocument } from "../harness/openapi.ts";
import type { Problem } from "../../subjects/errors.ts";
import { MAX_BODY_DEPTH } from "../../edge/plugins/body.ts";
import { routeBodyLimits } from "../../edge/app.ts";

const DEPTH_MESSAGE = `nests deeper than ${MAX_BODY_DEPTH} levels`;
const arrays = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;
const objects = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
/** 1 MB of nesting, under the default 1 MiB body limit. */
const MEGABYTE = { arrays: arrays(500_000), objects: objects(174_000) };

const it = derrickTest();

/** The file's derrick, for the helpers below; set once it runs. */
let derrick: TestDerrick;
let headers: Record<string, string>;

async function problemOf(res: Response): Promise<Problem> {
  expect(res.headers.get("content-type")).toContain("application/problem+json");
  return json<Problem>(res);
}

/** The 400 that names the depth limit: in the detail, or (routes framing their 400s: OSDU search) in `errors`. */
async function expectTooDeep(res: Response, what: string): Promise<Problem> {
  const text = await res.clone().text();
  expect(res.status, `${what}: ${text.slice(0, 300)}`).toBe(400);
  const problem = await problemOf(res);
  const named = [problem.detail, ...(problem.errors ?? []).map((e) => e.message)];
  expect(
    named.some((m) => m.includes(DEPTH_MESSAGE)),
    `${what}: ${text.slice(0, 300)}`,
  ).toBe(true);
  return problem;
}

/** Sends a request and, while it is in flight, a liveness probe; both answers, and the time each took. */
async function withProbe(send: () => Promise<Response>): Promise<{ res: Response; health: Response; ms: number; healthMs: number }> {
  const t0 = performance.now();
  const request = send().then((res) => ({ res, ms: performance.now() - t0 }));
  const health = fetch(`${derrick.url}/healthz`).then((res) => ({ res, ms: performance.now() - t0 }));
  const [sent, probed] = await Promise.all([request, health]);
  return { res: sent.res, health: probed.res, ms: sent.ms, healthMs: probed.ms };
}

it.beforeAll(async ({ derrick: booted }) => {
  derrick = booted;
  headers = {
    authorization: `Bearer ${await derrick.token("admin")}`,
    appkey: TEST_CLIENTS.admin.appkey,
    "slb-partition-id": "opendes",
    "data-partition-id": "opendes",
  };
});

describe("nested request bodies", () => {
  it("nesting - 1 MB of nesting is refused without credentials and with them, and /healthz answers meanwhile", async () => {
    const json = { "content-type": "application/json" };
    for (const [shape, body] of Object.entries(MEGABYTE)) {
      // The anonymous echo takes 4 KiB: the declared length is refused before anything is read...
      let sent = await withProbe(() => fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers: json, body }));
      expect(sent.res.status, shape).toBe(413);
      expect((await problemOf(sent.res)).detail).toMatch(/at most 4096 bytes/);
      expect(sent.health.status).toBe(200);
      console.log(
        `nested ${shape}, ${body.length} bytes, echo: ${sent.res.status} in ${sent.ms.toFixed(1)} ms; /healthz sent alongside: ${sent.healthMs.toFixed(1)} ms`,
      );
      // ...and a chunked one once 4 KiB have arrived.
      const chunked = new ReadableStream<Uint8Array>({
        start(controller) {
          const bytes = new TextEncoder().encode(body);
          for (let i = 0; i < bytes.length; i += 64 * 1024) controller.enqueue(bytes.subarray(i, i + 64 * 1024));
          controller.close();
        },
      });
      const res = await fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers: json, body: chunked });
      expect(res.status, shape).toBe(413);
      await problemOf(res);

      // JSON routes behind a valid token: 400 naming the limit, before parsing or validating.
      for (const [method, path] of [
        ["POST", "/v1/notifications/subscriptions/types/PlanShared"],
        ["POST", "/api/search/v2/query"],
        ["PUT", "/api/storage/v2/records"],
      ] as const) {
        sent = await withProbe(() => fetch(`${derrick.url}${path}`, { method, headers: { ...headers, ...json }, body }));
        const problem = await expectTooDeep(sent.res, `${shape} ${method} ${path}`);
        expect(problem.errors?.[0]?.pointer).toMatch(new RegExp(`^/body(/(0|a)){${MAX_BODY_DEPTH}}$`));
        expect(sent.health.status).toBe(200);
        console.log(
          `nested ${shape}, ${body.length} bytes, ${method} ${path}: ${sent.res.status} in ${sent.ms.toFixed(1)} ms; /healthz sent alongside: ${sent.healthMs.toFixed(1)} ms`,
        );
      }
    }
  });

  it("nesting - the echo takes a body at the limit and refuses one level more, brackets inside strings not counted", async () => {
    const echo = (body: string) =>
      fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers: { "content-type": "application/json" }, body });
    let res = await echo(objects(MAX_BODY_DEPTH));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(JSON.stringify(await res.json())).toBe(objects(MAX_BODY_DEPTH));
    await expectTooDeep(await echo(objects(MAX_BODY_DEPTH + 1)), "one level more");
    await expectTooDeep(await echo(`{"a":${arrays(MAX_BODY_DEPTH)}}`), "arrays under an object");
    // Deep under 4 KiB, the 60 KB body of the report scaled to the echo's limit: 400, not a slow 400 or 500.
    await expectTooDeep(await echo(arrays(2_000)), "2,000 levels of arrays");
    await expectTooDeep(await echo(objects(680)), "680 levels of objects");
    const brackets = { s: `"[{\\${"[".repeat(1_000)}`, [`k${"{".repeat(500)}`]: "]" };
    res = await echo(JSON.stringify(brackets));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toEqual(brackets);
  });

  it("nesting - a multipart body, which Elysia would nest by its fields (JSON-looking values, dotted names), is refused as the wrong media type before it is parsed", async () => {
    const post = (form: FormData) => fetch(`${derrick.url}/api/search/v2/query`, { method: "POST", headers, body: form });
    let form = new FormData();
    form.set("kind", arrays(30_000));
    const expectRefused = async (res: Response, what: string) => {
      expect(res.status, what).toBe(415);
      expect(res.headers.get("accept"), what).toContain("application/json");
      expect((await problemOf(res)).detail, what).toMatch(/multipart\/form-data/);
    };
    await expectRefused(await post(form), "a JSON-looking field 30,000 levels deep");
    form = new FormData();
    form.set(Array.from({ length: 30_000 }, () => "a").join("."), "1");
    await expectRefused(await post(form), "a field name of 30,000 dotted parts");
  });

  it("nesting - every operation with a request body refuses deep nesting with 400 naming the limit (fuzz over /openapi.json)", async () => {
    const doc = await openApiDocument(derrick.url);
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([method, op]) => ["post", "put", "patch", "delete"].includes(method) && op.requestBody)
        .map(([method, op]) => ({ method: method.toUpperCase(), path, types: Object.keys(op.requestBody!.content ?? {}) })),
    );
    expect(operations.length).toBeGreaterThan(15);
    const jsonTypes = (types: string[]) => [
      ...new Set(["application/json", ...types.filter((t) => /json/i.test(t)).map((t) => t.replace("*", "vnd.fuzz"))]),
    ];
    const bodies = {
      "10,000 levels of arrays": arrays(10_000),
      "10,000 levels of objects": objects(10_000),
      "10,000 levels, arrays and objects": `${'[{"a":'.repeat(5_000)}1${"}]".repeat(5_000)}`,
      "2,000 levels under a string with brackets": `{"s":"[[[\\"[[","t":${arrays(2_000)}}`,
    };
    let sent = 0;
    for (const op of operations) {
      const path = op.path.replace(/\{[^}]+\}/g, "fuzz-1");
      const own = routeBodyLimits[op.path.replace(/\{([^}]+)\}/g, ":$1")];
      for (const type of jsonTypes(op.types)) {
        for (const [name, body] of Object.entries(bodies)) {
          const what = `${op.method} ${op.path} (${type}, ${name})`;
          const res = await fetch(`${derrick.url}${path}`, {
            method: op.method,
            headers: { ...headers, "content-type": type },
            body,
            signal: AbortSignal.timeout(10_000),
          });
          sent++;
          if (own && body.length > own.bytes) {
            // A route with a smaller size limit refuses the body on its length first.
            expect(res.status, what).toBe(413);
            await problemOf(res);
            // Deep again within that limit.
            await expectTooDeep(
              await fetch(`${derrick.url}${path}`, {
                method: op.method,
                headers: { ...headers, "content-type": type },
                body: arrays(Math.floor(own.bytes / 2)),
              }),
              `${what}, within the route's limit`,
            );
          } else {
            await expectTooDeep(res, what);
          }
        }
      }
      const form = new FormData();
      form.set("fuzz", arrays(1_000));
      // Not a JSON body: refused by its media type, never parsed (the token endpoint in RFC 6749's terms).
      expect(
        (await fetch(`${derrick.url}${path}`, { method: op.method, headers, body: form })).status,
        `${op.method} ${op.path} (multipart)`,
      ).toBe(op.path === "/v2/token" ? 400 : 415);
      sent++;
    }
    console.log(`nesting fuzz: ${sent} deep bodies over ${operations.length} operations with a request body`);
    expect((await fetch(`${derrick.url}/healthz`)).status).toBe(200);
  });
});
