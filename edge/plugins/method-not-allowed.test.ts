import { describe, expect, it } from "vitest";
import { allowedMethods, methodTable, pathPattern } from "./method-not-allowed.ts";

describe("method-not-allowed", () => {
  it("405 - an Elysia path pattern matches its paths only: parameters one segment each, literal dots, optional parameters, wildcards", () => {
    expect(pathPattern("/v1/projects/:projectId/members/:memberId").test("/v1/projects/p1/members/m%2F1")).toBe(true);
    expect(pathPattern("/v1/projects/:projectId/members/:memberId").test("/v1/projects/p1/members/m/1")).toBe(false);
    expect(pathPattern("/.well-known/jwks.json").test("/.well-known/jwksXjson")).toBe(false);
    expect(pathPattern("/.well-known/jwks.json").test("/.well-known/jwks.json")).toBe(true);
    expect(pathPattern("/a/:b?").test("/a/")).toBe(true);
    expect(pathPattern("/files/*").test("/files/x/y")).toBe(true);
    expect(pathPattern("/healthz").test("/healthz/")).toBe(false);
  });

  it("405 - the methods of every route whose pattern matches the path, HEAD beside GET, sorted; none for an unknown path", () => {
    const table = methodTable([
      { method: "GET", path: "/v1/display-items" },
      { method: "PUT", path: "/v1/display-items/:itemId" },
      { method: "GET", path: "/api/storage/v2/records/:id" },
      { method: "DELETE", path: "/api/storage/v2/records/:id" },
      { method: "POST", path: "/api/storage/v2/records/:action" },
    ]);
    expect(allowedMethods(table, "/v1/display-items")).toEqual(["GET", "HEAD"]);
    expect(allowedMethods(table, "/v1/display-items/x")).toEqual(["PUT"]);
    expect(allowedMethods(table, "/api/storage/v2/records/a:b:c")).toEqual(["DELETE", "GET", "HEAD", "POST"]);
    expect(allowedMethods(table, "/v1/nothing")).toEqual([]);
  });
});
