import { describe, expect } from "vitest";
import { request as httpRequest } from "node:http";
import { gunzipSync } from "node:zlib";
import { derrickTest } from "../harness/fixture.ts";
import { TEST_CLIENTS } from "../harness/derrick.ts";
import { seedDemo } from "../../actors/reporting/seed.ts";
import { codedBody, LARGE_REPLY_BYTES, MIN_COMPRESSED_BYTES } from "../../actors/runtime/compressed-replies.ts";
import { EncodedJson } from "../../subjects/index.ts";
import { reportingProspectAggregation } from "../../subjects/reporting.ts";
import { SEED_PRINCIPAL } from "../../actors/reporting/seed.ts";

const it = derrickTest({ actors: ["identity", "projects", "reporting"] });

/** A GET as an HTTP client that decodes nothing itself: the bytes and headers as sent. */
function rawGet(url: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body: Buffer.concat(chunks) }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

const CATALOG = "/v1/display-items?limit=20";
const AGGREGATION = "/assessments/v1/prospectanalysisaggregation/pa-alpha-oil";

describe("compressed replies", () => {
  it("edge - a held reply goes gzip to the Accept-Encoding of Python's requests, browsers and curl --compressed; plain to a client that says nothing or refuses gzip", async ({
    derrick,
  }) => {
    await seedDemo(derrick.bus, "opendes");
    const as = {
      authorization: `Bearer ${await derrick.token("admin")}`,
      appkey: TEST_CLIENTS.admin.appkey,
      "data-partition-id": "opendes",
    };
    for (const path of [CATALOG, AGGREGATION]) {
      // Held bytes go plain on their first answer (a cache's miss is not held yet): the reads before gzip is asked.
      await rawGet(`${derrick.url}${path}`, as);
      const plain = await rawGet(`${derrick.url}${path}`, as);
      expect(plain.status, path).toBe(200);
      expect(plain.headers["content-encoding"], path).toBeUndefined();
      expect(plain.headers.vary?.toLowerCase(), path).toBe("accept-encoding");
      expect(plain.body.length, path).toBeGreaterThanOrEqual(MIN_COMPRESSED_BYTES);
      for (const accept of ["gzip, deflate", "gzip, deflate, br, zstd", "deflate, gzip, br, zstd"]) {
        const packed = await rawGet(`${derrick.url}${path}`, { ...as, "accept-encoding": accept });
        expect(packed.status, `${path} ${accept}`).toBe(200);
        expect(packed.headers["content-encoding"], `${path} ${accept}`).toBe("gzip");
        expect(packed.headers.vary?.toLowerCase()).toBe("accept-encoding");
        expect(packed.body.length).toBeLessThan(plain.body.length / 2);
        expect(gunzipSync(packed.body).equals(plain.body), `${path} ${accept}`).toBe(true);
      }
      for (const refused of ["identity", "gzip;q=0", "br"]) {
        const answer = await rawGet(`${derrick.url}${path}`, { ...as, "accept-encoding": refused });
        expect(answer.headers["content-encoding"], `${path} ${refused}`).toBeUndefined();
        expect(answer.body.equals(plain.body), `${path} ${refused}`).toBe(true);
      }
      // fetch (Bun's, as browsers) asks for gzip and decodes it: the JSON arrives whole.
      const fetched = await derrick.call(path, { as: "admin" });
      expect(await fetched.json()).toEqual(JSON.parse(plain.body.toString()));
    }
    // Each form was asked four times or more: its later reads came named, not sent (docs/edge.md#bodies-not-sent-twice).
    const metrics = await (await fetch(`${derrick.url}/metrics`)).text();
    const named = Number(/derrick_nats_reply_body_bytes_total\{outcome="named"\} (\d+)/.exec(metrics)?.[1]);
    expect(named).toBeGreaterThan(4 * MIN_COMPRESSED_BYTES);
  });

  it("edge - a reply nothing holds, or a small one, goes plain whatever the client takes, without Vary", async ({ derrick }) => {
    const created = await derrick.call("/v1/projects/gz-small", {
      as: "admin",
      method: "PUT",
      body: JSON.stringify({ name: "small", members: ["admin"] }),
    });
    expect(created.status).toBeLessThan(300);
    const as = {
      authorization: `Bearer ${await derrick.token("admin")}`,
      appkey: TEST_CLIENTS.admin.appkey,
      "data-partition-id": "opendes",
    };
    const answer = await rawGet(`${derrick.url}/v1/projects/gz-small`, { ...as, "accept-encoding": "gzip" });
    expect(answer.status).toBe(200);
    expect(answer.headers["content-encoding"]).toBeUndefined();
    expect(answer.headers.vary).toBeUndefined();
    expect(JSON.parse(answer.body.toString()).projectId).toBe("gz-small");
  });

  it("bus - a NATS caller that takes gzip gets the held reply's gzip bytes, and the Bus still reads its body", async ({ derrick }) => {
    await seedDemo(derrick.bus, "opendes");
    const meta = { principal: SEED_PRINCIPAL, partition: "opendes" };
    await derrick.bus.request(reportingProspectAggregation, { id: "pa-alpha-oil" }, meta);
    const plain = await derrick.bus.request(reportingProspectAggregation, { id: "pa-alpha-oil" }, meta);
    const packed = await derrick.bus.request(reportingProspectAggregation, { id: "pa-alpha-oil" }, { ...meta, acceptEncoding: "gzip" });
    expect(plain.headers["Content-Encoding"]).toBeUndefined();
    expect(packed.headers["Content-Encoding"]).toBe("gzip");
    expect(gunzipSync(packed.raw).equals(Buffer.from(plain.raw))).toBe(true);
    expect(packed.body).toEqual(plain.body);
  });
});

describe("compressed replies (pure)", () => {
  const big = new TextEncoder().encode(JSON.stringify({ rows: "x".repeat(4 * MIN_COMPRESSED_BYTES) }));

  it("runtime - only a held body of at least the minimum without an ETag is compressed, from its second answer, once per held value", () => {
    const held = new EncodedJson(big, true);
    // The first answer goes plain: it may be the only one (a search reply kept but never asked again).
    expect(codedBody(held, { "x-derrick-cache": "hit" }, "gzip")).toEqual({
      bytes: big,
      headers: { "x-derrick-cache": "hit", Vary: "Accept-Encoding" },
    });
    const first = codedBody(held, { "x-derrick-cache": "hit" }, "gzip");
    expect(first.headers).toEqual({ "x-derrick-cache": "hit", Vary: "Accept-Encoding", "Content-Encoding": "gzip" });
    expect(gunzipSync(first.bytes).equals(Buffer.from(big))).toBe(true);
    expect(codedBody(new EncodedJson(big, true), undefined, "gzip").bytes).toBe(first.bytes);
    expect(codedBody(held, undefined, undefined)).toEqual({ bytes: big, headers: { Vary: "Accept-Encoding" } });
    expect(codedBody(new EncodedJson(big), undefined, "gzip")).toEqual({ bytes: big, headers: undefined });
    expect(codedBody(held, { ETag: '"3"' }, "gzip")).toEqual({ bytes: big, headers: { ETag: '"3"' } });
    const small = new EncodedJson(big.subarray(0, MIN_COMPRESSED_BYTES - 1), true);
    expect(codedBody(small, undefined, "gzip").bytes).toBe(small.bytes);
  });

  it("runtime - bytes no cache keeps go plain even to gzip, saying Vary as their held siblings do", () => {
    // A search reply the reply cache refused, a reporting hit read from KV: compressing them would cost a gzip per request.
    const passing = new EncodedJson(big, false, true);
    expect(codedBody(passing, { "x-derrick-cache": "miss" }, "gzip")).toEqual({
      bytes: big,
      headers: { "x-derrick-cache": "miss", Vary: "Accept-Encoding" },
    });
    expect(codedBody(passing, undefined, undefined)).toEqual({ bytes: big, headers: { Vary: "Accept-Encoding" } });
  });

  it("runtime - a large body goes gzip from its first answer, held or not, to a caller that takes it; plain to others; never with an ETag", () => {
    // A limit-100 search page: past a socket's 64 KiB read, plain bytes cost each hop a second read.
    const page = new TextEncoder().encode(
      JSON.stringify({ results: Array.from({ length: 1500 }, (_, i) => ({ id: `well-${i}`, depth: i * 3.5, basin: "North Sea" })) }),
    );
    expect(page.length).toBeGreaterThanOrEqual(LARGE_REPLY_BYTES);
    for (const body of [new EncodedJson(page), new EncodedJson(page, false, true), new EncodedJson(page, true)]) {
      const first = codedBody(body, { "x-derrick-cache": "miss" }, "gzip");
      expect(first.headers).toEqual({ "x-derrick-cache": "miss", Vary: "Accept-Encoding", "Content-Encoding": "gzip" });
      expect(first.bytes.length).toBeLessThan(page.length / 2);
      expect(gunzipSync(first.bytes).equals(Buffer.from(page))).toBe(true);
      expect(codedBody(body, undefined, undefined)).toEqual({ bytes: page, headers: { Vary: "Accept-Encoding" } });
      expect(codedBody(body, { ETag: '"7"' }, "gzip")).toEqual({ bytes: page, headers: { ETag: '"7"' } });
    }
    // A held one is compressed once and its form kept, as smaller held bodies are.
    const held = new EncodedJson(page, true);
    expect(codedBody(held, undefined, "gzip").bytes).toBe(codedBody(held, undefined, "gzip").bytes);
    // Just under the size, bytes no cache keeps go plain as before.
    const under = new EncodedJson(page.subarray(0, LARGE_REPLY_BYTES - 1));
    expect(codedBody(under, undefined, "gzip")).toEqual({ bytes: under.bytes, headers: undefined });
  });

  it("runtime - Accept-Encoding joins the Vary a handler set, in whatever case it named it, once", () => {
    const held = new EncodedJson(big, true);
    codedBody(held, undefined, undefined);
    expect(codedBody(held, { vary: "Origin" }, "gzip").headers).toEqual({ vary: "Origin, Accept-Encoding", "Content-Encoding": "gzip" });
    expect(codedBody(held, { Vary: "origin, accept-encoding" }, undefined).headers).toEqual({ Vary: "origin, accept-encoding" });
    expect(codedBody(held, { Vary: "*" }, undefined).headers).toEqual({ Vary: "*" });
  });
});
