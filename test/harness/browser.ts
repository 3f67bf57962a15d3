/**
 * Debian's chromium for the browser tests, driven by playwright-core: a fresh profile, no background
 * networking, and a host resolver that resolves no name, so only derrick's loopback origin can be
 * reached; every request to another origin is recorded and aborted.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Browser tests are skipped where chromium is missing, except in CI (which installs it: .ci/run). */
export const browserMissing = !existsSync(CHROMIUM) && !process.env.CI;
if (browserMissing) console.warn(`browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)`);

export type FencedBrowser = {
  context: BrowserContext;
  /** Requests to anything but `origin` (and data: URLs), each aborted. */
  foreign: string[];
  close(): Promise<void>;
};

export async function launchFencedBrowser(origin: string, viewport: { width: number; height: number }): Promise<FencedBrowser> {
  const profile = mkdtempSync(join(tmpdir(), "derrick-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // No name resolves: nothing but the loopback address derrick listens on can be reached.
      "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ],
  });
  const foreign: string[] = [];
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.origin === origin || url.protocol === "data:") return route.continue();
    foreign.push(url.href);
    return route.abort("blockedbyclient");
  });
  return {
    context,
    foreign,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
