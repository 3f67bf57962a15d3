/** The media type of a request body: a route takes what it documents, and says what that is. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDerrick, startTestNats, type TestDerrick, type TestNats } from "../harness/index.ts";

describe("request media types", () => {
  let nats: TestNats;
  let derrick: TestDerrick;
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats, { actors: ["system"] });
  });
  afterAll(async () => {
    await derrick?.cleanup();
    await nats?.cleanup();
  });
  const echo = (body: string | Blob, headers: Record<string, string> = {}) =>
    fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers, body });

  it("media types - a form body on a JSON route (what `curl -d` sends by default) is 415 naming the JSON types, not read as JSON", async () => {
    const res = await echo('{"a":1}', { "content-type": "application/x-www-form-urlencoded" });
    expect(res.status).toBe(415);
    expect(res.headers.get("content-type")).toMatch(/application\/problem\+json/);
    expect(res.headers.get("accept")).toContain("application/json");
    const problem = (await res.json()) as { detail: string };
    expect(problem.detail).toMatch(/application\/json/);
    expect(problem.detail).toMatch(/application\/x-www-form-urlencoded/);
    expect((await echo("plain", { "content-type": "text/plain" })).status).toBe(415);
  });

  it("media types - JSON under each JSON type, or without a type, is taken", async () => {
    for (const type of ["application/json", "application/json; charset=utf-8", "text/json", "application/cloudevents+json"]) {
      const res = await echo('{"a":1}', { "content-type": type });
      expect(res.status, type).toBe(200);
    }
    // Bun's fetch sets text/plain for a string body; a Blob without a type sends none.
    const untyped = await echo(new Blob(['{"a":1}']));
    expect(untyped.status).toBe(200);
  });

  it("media types - a chunked form with a flood of parameters is refused once it passes the cap (no work per repeat)", async () => {
    const flood = "a&".repeat(20_000);
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(flood));
        controller.close();
      },
    });
    // Chunked: read and parsed here. With a length, Elysia's own form parser reads it (linear) and the token endpoint refuses it.
    const res = await fetch(`${derrick.url}/v2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: chunked,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/more than 256 parameters/);
    expect(
      (
        await fetch(`${derrick.url}/v2/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: flood,
        })
      ).status,
    ).toBe(400);
  });
});
