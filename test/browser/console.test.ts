/**
 * /console in a real browser (Debian's chromium, driven by playwright-core), against a derrick with
 * every actor: sign in with client credentials, watch the fleet, create a subscription whose
 * receiver fails its first delivery and see the failed attempt appear and be replayed, edit a twin
 * and meet a conflict, run a search and see it plotted, open the seeded prospect and find its curve
 * drawn, follow a content task. Every request goes to the derrick origin (anything else is recorded
 * and blocked) and the page logs no error. Screenshots of each view at 1280 and 390 pixels wide go
 * to docs/console/ (linked from docs/console.md).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import {
  clientToken,
  eventually,
  startDerrick,
  startTestNats,
  TEST_CLIENTS,
  testClient,
  type TestDerrick,
  type TestNats,
} from "../harness/index.ts";
import { ALL_GROUPS, GROUPS } from "../../subjects/groups.ts";
import { twinBucket, type TwinGetReply } from "../../subjects/twins.ts";
import { openBucket } from "../harness/kv.ts";
import { browserMissing, launchFencedBrowser, type FencedBrowser } from "../harness/browser.ts";
import { seedDemo } from "../../actors/reporting/seed.ts";
import { prospectAnalysis, put, segment } from "../reporting/helpers.ts";

const SHOTS = fileURLToPath(new URL("../../docs/console/", import.meta.url));
const WIDE = { width: 1280, height: 860 };
const NARROW = { width: 390, height: 844 };

/** The console's user: every group. A second client lacks derrick.operators, to meet the fleet's 403. */
const OPERATOR = testClient("console", [...ALL_GROUPS]);
const USER = testClient("viewer", [GROUPS.datalakeViewers]);

/** A webhook receiver on loopback that refuses its first two deliveries and takes the rest. */
function startReceiver() {
  let received = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => new Response(null, { status: ++received <= 2 ? 503 : 204 }),
  });
  return { url: `http://127.0.0.1:${server.port}/hook`, received: () => received, stop: () => server.stop(true) };
}

let receiver: ReturnType<typeof startReceiver>;
let nats: TestNats;
let derrick: TestDerrick;
let browser: FencedBrowser;
let page: Page;
let origin: string;
const consoleErrors: string[] = [];

/** Polls a value of the page until the assertion holds, as patient as the page's own steps (vitest's default is 1 s). */
const eventuallyOnPage = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 15_000 });

const openView = async (name: string) => {
  await page.getByRole("navigation", { name: "Views" }).getByRole("link", { name, exact: true }).click();
  await page.getByRole("main", { name }).waitFor();
};

/** The page at both widths, written to docs/console/<name>-1280.png and -390.png. */
async function screenshots(name: string) {
  for (const size of [WIDE, NARROW]) {
    await page.setViewportSize(size);
    // Two frames: the layout and the charts' resize observers have run at the new width.
    await page.evaluate(() => {
      const frame = (globalThis as unknown as { requestAnimationFrame(callback: () => void): void }).requestAnimationFrame;
      return new Promise<void>((done) => frame(() => frame(done)));
    });
    await page.screenshot({ path: join(SHOTS, `${name}-${size.width}.png`), fullPage: true });
  }
  await page.setViewportSize(WIDE);
}

async function signIn(client: { client_id: string; client_secret: string; appkey: string }, shoot = false) {
  await page.goto(`${origin}/console`);
  await page.getByLabel("Client ID").fill(client.client_id);
  await page.getByLabel("Client secret").fill(client.client_secret);
  await page.getByLabel("Appkey").fill(client.appkey);
  await page.getByLabel("Partition").selectOption("opendes");
  if (shoot) await screenshots("sign-in");
  await page.getByRole("button", { name: "Sign in" }).click();
}

describe.skipIf(browserMissing)("the console in a real browser", () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    receiver = startReceiver();
    nats = await startTestNats();
    derrick = await startDerrick(nats, {
      env: {
        DERRICK_CLIENTS: JSON.stringify([...Object.values(TEST_CLIENTS), OPERATOR, USER]),
        DERRICK_CALLBACK_ALLOW_HTTP: "true",
        DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.0/8",
        // Two attempts: the receiver refuses both, so the event is a failed attempt, then a dead letter to replay.
        DERRICK_DELIVERY_SCHEDULE: "0,100ms",
      },
    });
    origin = new URL(derrick.url).origin;
    browser = await launchFencedBrowser(origin, WIDE);
    page = browser.context.pages()[0] ?? (await browser.context.newPage());
    // A step that does not happen fails naming its locator, well inside the test's own timeout.
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (error) => consoleErrors.push(`pageerror: ${error.message}`));
    page.on("console", (message) => {
      // The browser logs each refused response (the 403, the 412 the test provokes) as an error; those are answers, not faults.
      if (message.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(message.text()))
        consoleErrors.push(message.text());
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await derrick?.cleanup();
    await nats?.cleanup();
    await receiver?.stop();
  });

  it("console - signed in with a pasted bearer token, a client without derrick.operators is told which group the fleet needs", async () => {
    await page.goto(`${origin}/console`);
    await page.getByLabel("a bearer token").check();
    await page.getByLabel("Bearer token", { exact: true }).fill(await clientToken(derrick.url, USER));
    await page.getByLabel("Appkey").fill(USER.appkey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    expect(await page.getByText(USER.client_id, { exact: true }).count()).toBe(1);
    await page.getByRole("alert").filter({ hasText: GROUPS.operators }).waitFor();
    await page.getByRole("button", { name: "Sign out" }).click();
  });

  it("console - sign in with client credentials and see the fleet refreshed live", async () => {
    await signIn(OPERATOR, true);
    await page.getByRole("main", { name: "Fleet" }).waitFor();
    const actors = page.getByRole("table", { name: "Actor processes and their load" });
    await actors.getByRole("rowheader", { name: "notifications" }).first().waitFor();
    await page.getByRole("table", { name: "Streams with their durable consumers" }).getByRole("rowheader", { name: "EVENTS" }).waitFor();
    const gathered = page.getByRole("region", { name: "Summary" }).locator("dd").first();
    const first = await gathered.textContent();
    await eventuallyOnPage(() => gathered.textContent()).not.toBe(first);
    // From the second look on, the load chart draws the actors' requests per second (the console's own polls at least).
    await page
      .getByRole("img", { name: /^Requests per second of .*system/ })
      .locator("canvas")
      .waitFor();
    await screenshots("fleet");
  });

  it("console - create a subscription, see its failed attempts and dead letter, replay it and see it delivered; reveal and rotate the secret", async () => {
    await openView("Notifications");
    await page.getByLabel("Type", { exact: true }).selectOption("PublishData");
    await page.getByLabel("Subscriber").fill("console-test");
    await page.getByLabel("Callback URI").fill(receiver.url);
    await page.getByRole("button", { name: "Subscribe" }).click();
    const detail = page.getByRole("region", { name: "Subscription console-test" });
    await detail.waitFor();
    await page.getByLabel("Event type").selectOption("PublishData");
    await page.getByRole("button", { name: "Publish", exact: true }).click();
    const eventId = (await page.getByRole("status").filter({ hasText: "Published event" }).locator("code").textContent())!;
    const attempts = detail.getByRole("table", { name: "Delivery attempts, newest first" });
    await attempts.getByRole("row").filter({ hasText: eventId }).filter({ hasText: "failed" }).waitFor();
    await attempts.getByRole("row").filter({ hasText: eventId }).filter({ hasText: "dead" }).waitFor();
    const letters = detail.getByRole("table", { name: /exhausted their attempts/ });
    await letters.getByRole("row").filter({ hasText: eventId }).waitFor();
    await screenshots("notifications");
    await letters.getByRole("button", { name: `Replay ${eventId}` }).click();
    await attempts.getByRole("row").filter({ hasText: eventId }).filter({ hasText: "succeeded" }).waitFor();
    await letters.waitFor({ state: "detached" });
    expect(receiver.received()).toBe(3);

    await detail.getByRole("button", { name: "Reveal secret" }).click();
    const secret = detail.getByLabel("Signing secret");
    await eventuallyOnPage(() => secret.textContent()).toMatch(/^whsec_/);
    const before = await secret.textContent();
    await detail.getByRole("button", { name: "Rotate secret" }).click();
    await eventuallyOnPage(() => secret.textContent()).not.toBe(before);
    await screenshots("notifications-replayed");
  });

  it("console - open a twin, edit its desired values, meet a conflict with another writer, reload and save", async () => {
    const twin = { organization: "acme", environment: "prod", twinId: "rig-7" };
    const path = `/api/twin-properties/v1/acme/prod/rig-7/twin-properties`;
    const put = (value: string) =>
      derrick.call(path, {
        as: "admin",
        partition: null,
        method: "PUT",
        body: JSON.stringify({ group: "setpoints", twins: [{ name: "rate", value }] }),
      });
    expect((await put("42")).status).toBe(200);
    // What the device reports, as it writes it: a key in the twin's bucket.
    await (await openBucket(derrick.nc, twinBucket(twin))).put("twin_properties/setpoints/reported/rate", "41");

    await openView("Twins");
    await page.getByLabel("Twin id").fill("rig-7");
    await page.getByRole("button", { name: "Open", exact: true }).click();
    const values = page.getByRole("table", { name: "Desired and reported values of setpoints" });
    await values.getByRole("row", { name: /rate/ }).filter({ hasText: "42" }).filter({ hasText: "41" }).waitFor();
    await screenshots("twins");

    await page.getByRole("button", { name: "Edit desired values of setpoints" }).click();
    const value = page.getByLabel("Value of rate");
    await eventuallyOnPage(() => value.inputValue()).toBe("42");
    await value.fill("43");
    // Someone else writes the group meanwhile: the console's If-Match no longer holds.
    expect((await put("50")).status).toBe(200);
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("alert").filter({ hasText: "Conflict (412)" }).waitFor();
    expect(await value.inputValue()).toBe("43");
    await screenshots("twins-conflict");
    await page.getByRole("button", { name: "Reload current values" }).click();
    await eventuallyOnPage(() => value.inputValue()).toBe("50");
    await value.fill("44");
    await page.getByRole("button", { name: "Save" }).click();
    await values.getByRole("row", { name: /rate/ }).filter({ hasText: "44" }).waitFor();
    const stored = (await (await derrick.call(`${path}?group=setpoints`, { as: "admin", partition: null })).json()) as TwinGetReply;
    expect(stored.desired.setpoints?.rate?.value).toBe("44");
  });

  it("console - run a search: results in a table, their points and shapes on the lon/lat plot; a bounding box narrows them", async () => {
    const token = await clientToken(derrick.url, OPERATOR);
    const headers = { authorization: `Bearer ${token}`, "slb-partition-id": "opendes", "content-type": "application/json" };
    const record = (kind: string, data: Record<string, unknown>) => ({
      kind,
      acl: { viewers: ["data.default.viewers@opendes.example.com"], owners: ["data.default.owners@opendes.example.com"] },
      legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
      data,
    });
    const point = (lon: number, lat: number) => ({
      type: "FeatureCollection",
      features: [{ type: "Feature", geometry: { type: "Point", coordinates: [lon, lat] } }],
    });
    const wells = [
      ["Volve F-11", 1.887, 58.441],
      ["Volve F-12", 1.889, 58.442],
      ["Volve F-14", 1.9, 58.45],
    ] as const;
    const records = [
      ...wells.map(([name, lon, lat]) =>
        record("osdu:wks:master-data--Well:1.0.0", { FacilityName: name, SpatialLocation: { Wgs84Coordinates: point(lon, lat) } }),
      ),
      record("osdu:wks:master-data--Field:1.0.0", {
        FacilityName: "Volve field",
        SpatialLocation: {
          Wgs84Coordinates: {
            type: "Polygon",
            coordinates: [
              [
                [1.85, 58.42],
                [1.95, 58.42],
                [1.95, 58.47],
                [1.85, 58.47],
                [1.85, 58.42],
              ],
            ],
          },
        },
      }),
    ];
    const stored = await fetch(`${derrick.url}/api/storage/v2/records`, { method: "PUT", headers, body: JSON.stringify(records) });
    expect(stored.status, await stored.clone().text()).toBe(201);
    await eventually(
      async () => {
        const found = await fetch(`${derrick.url}/api/search/v2/query`, {
          method: "POST",
          headers,
          body: JSON.stringify({ kind: "*:*:*:*", query: "volve" }),
        });
        return ((await found.json()) as { totalCount: number }).totalCount === 4;
      },
      { what: "the four records searchable" },
    );

    await openView("Search");
    await page.getByRole("textbox", { name: "Query", exact: true }).fill("volve");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("status").filter({ hasText: "4 found" }).waitFor();
    const results = page.getByRole("table", { name: "Search results" });
    for (const [name] of wells) await results.getByRole("row").filter({ hasText: name }).waitFor();
    const plot = page.getByRole("img", { name: /Shapes of 4 results/ });
    expect(await plot.locator("circle").count()).toBe(3);
    expect(await plot.locator("path").count()).toBe(1);
    await screenshots("search");

    await page.getByLabel("Spatial filter").selectOption("bounding box");
    await page.getByLabel("West").fill("1.88");
    await page.getByLabel("South").fill("58.44");
    await page.getByLabel("East").fill("1.89");
    await page.getByLabel("North").fill("58.445");
    await page.getByRole("button", { name: "Search" }).click();
    await page.getByRole("status").filter({ hasText: "2 found" }).waitFor();
    expect(
      await page
        .getByRole("img", { name: /Shapes of 2 results/ })
        .locator("circle")
        .count(),
    ).toBe(2);
  });

  it("console - open the seeded prospect and find its expectation curve drawn; its full-cycle cash flow and the scenarios' outcome tree", async () => {
    await seedDemo(derrick.bus, "opendes");
    await openView("Reporting");
    await page.getByRole("button", { name: "Open", exact: true }).click();
    await page.getByRole("region", { name: "Prospect Alpha" }).waitFor();
    const curve = page.getByRole("img", { name: /^Expectation curve of oilEquivalent/ }).locator("canvas");
    await curve.waitFor();
    // Drawn: pixels in each curve's colour (the console's palette: risked #0b5cad, success case #c2410c).
    const painted = (rgb: readonly [number, number, number]) =>
      curve.evaluate((canvas: any, [r, g, b]) => {
        const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data as Uint8ClampedArray;
        let count = 0;
        for (let i = 0; i < pixels.length; i += 4)
          if (
            pixels[i + 3]! > 200 &&
            Math.abs(pixels[i]! - r) < 30 &&
            Math.abs(pixels[i + 1]! - g) < 30 &&
            Math.abs(pixels[i + 2]! - b) < 30
          )
            count++;
        return count;
      }, rgb);
    await eventuallyOnPage(() => painted([11, 92, 173])).toBeGreaterThan(200);
    await eventuallyOnPage(() => painted([194, 65, 12])).toBeGreaterThan(200);
    const volumes = page.getByRole("table", { name: /Volumes of oilEquivalent/ });
    await volumes.getByRole("row", { name: /success case/ }).waitFor();
    const segments = page.getByRole("table", { name: "Each segment's chance of success" });
    expect(await segments.getByRole("row").count()).toBe(4);
    await segments.getByRole("rowheader", { name: /Rogn/ }).waitFor();
    await screenshots("reporting-prospect");

    await page.getByLabel("Analysis", { exact: true }).selectOption("full-cycle analyses");
    await page.getByRole("button", { name: "Open", exact: true }).click();
    const indicators = page.getByRole("table", { name: /Indicators per level/ });
    await indicators.getByRole("rowheader", { name: "npv" }).waitFor();
    await page
      .getByRole("img", { name: /^Net cash flow per year/ })
      .locator("canvas")
      .waitFor();
    await screenshots("reporting-full-cycle");

    await page.getByLabel("Analysis", { exact: true }).selectOption("scenario analysis");
    await page.getByRole("button", { name: "Open", exact: true }).click();
    const tree = page.getByRole("table", { name: /Terminal outcomes of the tree/ });
    await tree
      .getByRole("rowheader", { name: /Oil case/ })
      .first()
      .waitFor();
    await tree
      .getByRole("rowheader", { name: /Gas case/ })
      .first()
      .waitFor();
    await screenshots("reporting-scenarios");
  });

  it("console - a large prospect, answered 202 with a task, is followed to its result and drawn", async () => {
    // 16 one-product segments × 1,000,000 trials: past the work that reporting computes at once.
    const ids = Array.from({ length: 16 }, (_, i) => `big-s${i}`);
    for (const [i, id] of ids.entries())
      expect((await put(derrick, "segmentanalyses", id, segment(`Big ${i}`, 0.3 + i / 40, 5 + i, 50 + i))).status).toBe(201);
    const analysis = prospectAnalysis("p-big", "Big", ids, { simulation: { trials: 1_000_000, seed: 7 } });
    expect((await put(derrick, "prospectanalyses", "pa-big", analysis)).status).toBe(201);

    await page.getByLabel("Analysis", { exact: true }).selectOption("prospect analysis");
    await page.getByLabel("Prospect analysis id").fill("pa-big");
    const result = page.waitForResponse((r) => /\/aggregationtasks\/[^/]+\/result$/.test(r.url()), { timeout: 60_000 });
    await page.getByRole("button", { name: "Open", exact: true }).click();
    await page.getByRole("status").filter({ hasText: "computed by task" }).waitFor();
    expect((await result).status()).toBe(200);
    await page.getByRole("region", { name: "Prospect Big" }).waitFor();
    await page
      .getByRole("img", { name: /^Expectation curve of oil/ })
      .locator("canvas")
      .waitFor();
  }, 90_000);

  it("console - request a project's content and follow its task to success and its expiry", async () => {
    const project = await derrick.call("/v1/projects/plan-a", {
      as: "admin",
      method: "PUT",
      body: JSON.stringify({
        name: "F-21 A plan",
        members: [OPERATOR.client_id, "alpha"],
        values: { displayItems: { "well-name": "NO 15/9-F-21 A", "water-depth": 91 } },
      }),
    });
    expect(project.status, await project.clone().text()).toBe(201);
    await openView("Content tasks");
    await page.getByLabel("Project id").fill("plan-a");
    await page.getByRole("button", { name: "Open project" }).click();
    await page.getByText("F-21 A plan").waitFor();
    await page.getByLabel("Item ids (optional)").fill("well-name, water-depth");
    await page.getByRole("button", { name: "Request content" }).click();
    const tasks = page.getByRole("table", { name: "Content tasks of the project, newest first" });
    const row = tasks.getByRole("row").filter({ hasText: "plan-a" });
    await row.filter({ hasText: "succeeded" }).waitFor();
    await row.filter({ hasText: /in \d+ s/ }).waitFor();
    // A task requested elsewhere (here through the API) appears from the project's task list, without a lookup.
    const elsewhere = await derrick.call("/v1/projects/plan-a/key-parameters/content/requests", {
      as: "alpha",
      method: "POST",
      body: JSON.stringify({ ids: ["total-depth-md"] }),
    });
    expect(elsewhere.status, await elsewhere.clone().text()).toBe(202);
    const { taskId } = (await elsewhere.json()) as { taskId: string };
    await tasks.getByRole("row").filter({ hasText: taskId }).filter({ hasText: "key-parameters" }).waitFor();
    await screenshots("content");
  });

  it("console - no request left the derrick origin and the page logged no error", () => {
    expect(browser.foreign).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
