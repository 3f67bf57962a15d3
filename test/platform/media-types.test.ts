/**
 * The media type of a request body: a route takes what it documents, and says what that is. What the
 * edge refuses by itself (415, a flooding form) is tested without actors in test/edge/app.test.ts.
 */
import { describe, expect } from "vitest";
import { derrickTest } from "../harness/fixture.ts";

const it = derrickTest({ actors: ["system"] });

describe("request media types", () => {
  it("media types - JSON under each JSON type, or without a type, is taken", async ({ derrick }) => {
    const echo = (body: string | Blob, headers: Record<string, string> = {}) =>
      fetch(`${derrick.url}/v1/system/echo`, { method: "POST", headers, body });
    for (const type of ["application/json", "application/json; charset=utf-8", "text/json", "application/cloudevents+json"]) {
      const res = await echo('{"a":1}', { "content-type": type });
      expect(res.status, type).toBe(200);
    }
    // Bun's fetch sets text/plain for a string body; a Blob without a type sends none.
    const untyped = await echo(new Blob(['{"a":1}']));
    expect(untyped.status).toBe(200);
  });
});
