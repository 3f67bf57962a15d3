/**
 * /docs in a real browser (Debian's chromium, driven by playwright-core): it renders the API from
 * /openapi.json, every request it makes goes to the derrick origin (anything else is recorded and
 * blocked, and the browser cannot resolve any other host), and a newcomer's first call works from
 * the page: Authorize fetches a token with client credentials from /v2/token, and "Test Request"
 * sends it with the appkey. Skipped only where /usr/bin/chromium is missing outside CI (CI installs
 * it: .ci/run).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BrowserContext, Page } from "playwright-core";
import { startDerrick, startTestNats, TEST_CLIENTS, type TestDerrick, type TestNats } from "../harness/index.ts";
import { browserMissing, launchFencedBrowser, type FencedBrowser } from "../harness/browser.ts";
import type { TokenResponse } from "../../subjects/identity.ts";

let nats: TestNats;
let derrick: TestDerrick;
let browser: FencedBrowser;
let context: BrowserContext;
let origin: string;
/** Every request the browser made. */
const requests: string[] = [];
const pageErrors: string[] = [];

async function openDocs(path: string): Promise<Page> {
  const page = await context.newPage();
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(`${origin}${path}`);
  await page.getByText("Getting a token").first().waitFor({ timeout: 20_000 });
  return page;
}

/** The page's globals this test reads and sets (the project's TypeScript has no DOM library). */
type PageGlobals = {
  cspViolations?: string[];
  document: {
    addEventListener(type: "securitypolicyviolation", listener: (event: { violatedDirective: string; blockedURI: string }) => void): void;
  };
};

/** What the page's Content-Security-Policy refused, besides zod's probe for eval (it falls back without). */
const violations = (page: Page) =>
  page.evaluate(() => ((globalThis as unknown as PageGlobals).cspViolations ?? []).filter((v) => v !== "script-src eval"));

describe.skipIf(browserMissing)("the /docs page in a real browser", () => {
  beforeAll(async () => {
    nats = await startTestNats();
    derrick = await startDerrick(nats);
    origin = new URL(derrick.url).origin;
    browser = await launchFencedBrowser(origin, { width: 1400, height: 1000 });
    context = browser.context;
    context.on("request", (request) => requests.push(`${request.method()} ${request.url()}`));
    await context.addInitScript(() => {
      const page = globalThis as unknown as PageGlobals;
      page.document.addEventListener("securitypolicyviolation", (event) =>
        (page.cspViolations ??= []).push(`${event.violatedDirective} ${event.blockedURI}`),
      );
    });
  }, 60_000);

  afterAll(async () => {
    console.log(`docs in chromium: ${requests.length} requests\n  ${requests.join("\n  ")}`);
    await browser?.close();
    await derrick?.cleanup();
    await nats?.cleanup();
  });

  it("docs - GET / opens /docs, which renders the API title, its introduction and operations, with every request to the derrick origin", async () => {
    const page = await openDocs("/");
    expect(new URL(page.url()).pathname).toBe("/docs");
    expect(await page.title()).toBe("derrick API");
    await page.getByRole("heading", { name: "derrick API" }).first().waitFor();
    await page.getByText("Liveness: the process is up").first().waitFor();
    await page.getByText("OAuth 2.0 client credentials").first().waitFor();
    // No buttons that would send the document or the caller elsewhere.
    const buttons = await page.getByRole("button").allInnerTexts();
    for (const unwanted of [/ask ai/i, /share/i, /deploy/i, /open api client/i, /generate/i])
      expect(
        buttons.filter((b) => unwanted.test(b)),
        String(unwanted),
      ).toEqual([]);
    expect(await violations(page)).toEqual([]);
    expect(browser.foreign).toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(requests.length).toBeGreaterThanOrEqual(3);
    for (const request of requests) expect(new URL(request.split(" ")[1]!).origin, request).toBe(origin);
    await page.close();
  });

  it("docs - Authorize gets a token with client credentials from /v2/token, and Test Request sends it with the appkey and the partition", async () => {
    const page = await openDocs("/docs");
    const field = async (label: string) => {
      const id = await page
        .locator("label", { hasText: new RegExp(`^\\s*${label}\\s*$`) })
        .first()
        .getAttribute("for");
      const target = page.locator(`[id="${id}"]`);
      return (await target.evaluate((e) => e.tagName)) === "INPUT" ? target : target.locator('[contenteditable="true"]');
    };
    await page.getByText("Client Secret").first().waitFor();
    const admin = TEST_CLIENTS.admin;
    await (await field("Client ID")).fill(admin.client_id);
    await (await field("Client Secret")).fill(admin.client_secret);
    const tokenAnswer = page.waitForResponse((r) => r.url() === `${origin}/v2/token`);
    await page.getByRole("button", { name: "Authorize" }).click();
    const token = await tokenAnswer;
    expect(token.status()).toBe(200);
    expect(token.request().method()).toBe("POST");
    expect(token.request().postData()).toContain("grant_type=client_credentials");
    const { access_token } = (await token.json()) as TokenResponse;
    await (await field("Value")).fill(admin.appkey);

    const operation = page.locator("section", { has: page.getByRole("heading", { name: /The caller as the edge sees/ }) }).last();
    await operation
      .getByRole("button", { name: /Test Request/ })
      .first()
      .click();
    // The partition header is there, filled from the document's example; the caller ticks it.
    const partition = page.locator("tr", { hasText: "slb-partition-id" }).last();
    await partition.locator('input[type="checkbox"]').click();
    // The client applies the change a moment later: its code snippet shows the header once it will send it.
    await page
      .getByRole("button", { name: /Code Snippet/ })
      .first()
      .click();
    await expect.poll(() => page.locator("body").textContent(), { timeout: 10_000 }).toMatch(/slb-partition-id: opendes/);
    const whoamiAnswer = page.waitForResponse((r) => r.url() === `${origin}/v1/system/whoami`);
    await page.getByRole("button", { name: /^Send/ }).first().click();
    const whoami = await whoamiAnswer;
    const headers = whoami.request().headers();
    expect(headers.authorization).toBe(`Bearer ${access_token}`);
    expect(headers.appkey).toBe(admin.appkey);
    expect(whoami.status(), await whoami.text()).toBe(200);
    expect(await whoami.json()).toMatchObject({ principal: { clientId: "admin" }, partition: "opendes" });
    expect(await violations(page)).toEqual([]);
    expect(browser.foreign).toEqual([]);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
