/**
 * The /docs page: Scalar's API reference over /openapi.json, served whole from this origin. Its
 * script comes from the installed package, and it is configured to reach no other host (no fonts,
 * proxy, telemetry, agent, share or client buttons); a Content-Security-Policy holds the browser to
 * that, so a Scalar upgrade that starts calling out is blocked (and test/browser/docs.test.ts fails).
 */
import { fileURLToPath } from "node:url";

/** Where the page loads Scalar's standalone bundle from (this origin). */
export const SCALAR_ASSET_PATH = "/docs/assets/scalar-standalone.js";
export const scalarAssetFile = () => fileURLToPath(import.meta.resolve("@scalar/api-reference/browser/standalone.js"));

/**
 * Scalar's options (@scalar/types `ApiReferenceConfiguration`). Absolute `url`: the page is served at
 * /docs and /docs/, where a relative one would resolve differently. No `proxyUrl`: "Test Request"
 * calls derrick directly, from the same origin.
 */
export const SCALAR_CONFIGURATION = {
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  documentDownloadType: "json",
  persistAuth: false,
  // Most operations need the token and the appkey: both are asked for at once.
  authentication: { preferredSecurityScheme: [["oauth2", "appkey"]] },
} as const;

/**
 * Only this origin, for everything: Scalar injects its styles (hence `'unsafe-inline'` for styles
 * only) and draws icons as data: URIs.
 */
export const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** For a single-quoted attribute: its JSON stays readable as is (it holds none of these characters). */
const escapeAttribute = (text: string) => text.replace(/[&<>']/g, (c) => `&#${c.charCodeAt(0)};`);

export function docsPage(title: string): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${escapeHtml(title)}</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <script id="api-reference" data-configuration='${escapeAttribute(JSON.stringify(SCALAR_CONFIGURATION))}'></script>
    <script src="${SCALAR_ASSET_PATH}"></script>
  </body>
</html>
`;
}

export const docsResponse = (title: string) =>
  new Response(docsPage(title), {
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": DOCS_CONTENT_SECURITY_POLICY,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
    },
  });
