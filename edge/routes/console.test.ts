/** /console's files as the edge serves them, without a browser: types, policy, caching, gzip, and nothing outside the build. */
import { describe, expect, it } from "vitest";
import { Elysia } from "elysia";
import { loadConfig } from "../../config/index.ts";
import { createLogger } from "../../platform/logger.ts";
import { errorsPlugin } from "../plugins/errors.ts";
import { CONSOLE_CONTENT_SECURITY_POLICY, consoleRoutes } from "./console.ts";

const log = createLogger("silent");
const app = new Elysia().use(errorsPlugin(log)).use(consoleRoutes(loadConfig({ DERRICK_PARTITIONS: "opendes,other" }), log));
const get = (path: string, headers: Record<string, string> = {}) => app.handle(new Request(`http://edge${path}`, { headers }));

describe("console files", () => {
  it("console - the page: HTML revalidated on each load, under a policy that allows this origin only", async () => {
    for (const path of ["/console", "/console/"]) {
      const page = await get(path);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(page.headers.get("cache-control")).toBe("no-cache");
      expect(page.headers.get("content-security-policy")).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
      expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    }
    for (const directive of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"])
      expect(CONSOLE_CONTENT_SECURITY_POLICY).toContain(directive);
    expect(CONSOLE_CONTENT_SECURITY_POLICY).not.toContain("unsafe");
  });

  it("console - assets named by their hash: immutable, gzipped when taken, 304 on their ETag", async () => {
    const html = await (await get("/console")).text();
    const script = html.match(/src="(\/console\/assets\/[^"]+\.js)"/)?.[1];
    const style = html.match(/href="(\/console\/assets\/[^"]+\.css)"/)?.[1];
    expect(script).toBeDefined();
    expect(style).toBeDefined();
    const js = await get(script!, { "accept-encoding": "gzip" });
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(js.headers.get("content-encoding")).toBe("gzip");
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect((await get(style!)).headers.get("content-type")).toMatch(/^text\/css/);
    const again = await get(script!, { "if-none-match": js.headers.get("etag")! });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");
  });

  it("console - a name outside the build is 404, however it is spelled", async () => {
    for (const path of [
      "/console/assets/nothing.js",
      "/console/assets/..%2F..%2Fpackage.json",
      "/console/assets/%2E%2E%2Fbuild.ts",
      "/console/index.html",
    ])
      expect((await get(path)).status, path).toBe(404);
  });

  it("console - the partitions served, for the sign-in form", async () => {
    expect(await (await get("/console/settings.json")).json()).toEqual({ partitions: ["opendes", "other"] });
  });
});
