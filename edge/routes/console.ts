/**
 * /console: the web console for operators and API users (docs/console.md). Its files are bundled
 * from console/ by Bun's bundler on the first request and served from memory: exactly those files,
 * nothing else from the disk. The page reaches only this origin, and its Content-Security-Policy
 * holds the browser to that.
 */
import { Elysia } from "elysia";
import type { Config } from "../../config/index.ts";
import type { Logger } from "../../platform/logger.ts";
import { notFound, unavailable } from "../../subjects/index.ts";
import { buildConsole, type ConsoleFile } from "../../console/build.ts";
import { encode, send, type Encoded } from "../plugins/openapi.ts";

export const CONSOLE_PATH = "/console";

/** Scripts, styles and connections from this origin only; uPlot draws on canvases, Preact sets styles through the CSSOM. */
export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

type Served = Encoded & { etag: string; cache: string };
const PAGE_CACHE = "no-cache";
/** Asset names carry their content's hash: a new build has new names, so a browser may keep these for good. */
const ASSET_CACHE = "public, max-age=31536000, immutable";

const serve = (file: ConsoleFile): Served => ({
  ...encode(file.bytes, file.type),
  etag: `"${file.hash}"`,
  cache: file.name === "index.html" ? PAGE_CACHE : ASSET_CACHE,
});

export const consoleRoutes = (cfg: Config, log: Logger) => {
  let files: Promise<Map<string, Served>> | undefined;
  const built = () =>
    (files ??= buildConsole().then(
      (list) => new Map(list.map((file) => [file.name, serve(file)])),
      (error: Error) => {
        files = undefined;
        log.error({ err: error }, "the console does not build");
        throw unavailable("the console could not be built; the edge's log says why", 5);
      },
    ));
  const answer = async (request: Request, name: string) => {
    const file = (await built()).get(name);
    if (!file) throw notFound(`no console file ${name}`);
    const headers = {
      etag: file.etag,
      "cache-control": file.cache,
      "content-security-policy": CONSOLE_CONTENT_SECURITY_POLICY,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
    };
    if (request.headers.get("if-none-match") === file.etag) return new Response(null, { status: 304, headers });
    return send(request, file, headers);
  };
  const page = ({ request }: { request: Request }) => answer(request, "index.html");
  const settings = encode(new TextEncoder().encode(JSON.stringify({ partitions: cfg.partitions })), "application/json; charset=utf-8");
  return new Elysia({ name: "derrick-console-routes" })
    .get(CONSOLE_PATH, page, { detail: { hide: true } })
    .get(`${CONSOLE_PATH}/`, page, { detail: { hide: true } })
    .get(`${CONSOLE_PATH}/assets/:file`, ({ request, params }) => answer(request, `assets/${params.file}`), { detail: { hide: true } })
    .get(`${CONSOLE_PATH}/settings.json`, ({ request }) => send(request, settings, { "cache-control": "no-cache" }), {
      detail: { hide: true },
    });
};
