/**
 * The token endpoint's defences against floods and online guessing: failed authentications per
 * client id (429, no secret check), the bounded secret checks of the identity actor (503 instead of a
 * queue that makes every token request time out), and the per-address limit of the edge (429).
 * Every refusal is problem+json with Retry-After and RFC 6749's `error` member.
 */
import http from "node:http";
import { describe, expect } from "vitest";
import { eventually, TEST_CLIENTS, type TestDerrick } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";

const requestToken = (derrick: TestDerrick, client_id: string, client_secret: string) =>
  fetch(`${derrick.url}/v2/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id, client_secret }),
  });

/** The same request from another loopback source address (the edge counts failures per address). */
function requestTokenFrom(derrick: TestDerrick, localAddress: string, client_id: string, client_secret: string): Promise<number> {
  const url = new URL(`${derrick.url}/v2/token`);
  const body = new URLSearchParams({ grant_type: "client_credentials", client_id, client_secret }).toString();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: "POST",
        localAddress,
        headers: { "content-type": "application/x-www-form-urlencoded" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A refusal to try later: problem+json, Retry-After in whole seconds, and the OAuth error code. */
async function expectRetryLater(res: Response, status: number, error: string): Promise<number> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/problem+json");
  const retryAfter = Number(res.headers.get("retry-after"));
  expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
  const body = (await res.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ status, code: status, error });
  expect(typeof body.error_description).toBe("string");
  return retryAfter;
}

/** The token series of the edge's /metrics (the identity actor's, in the same process): issued, and failures by reason. */
async function tokenCounts(derrick: TestDerrick): Promise<{ issued: number; failures: Record<string, number> }> {
  const text = await (await fetch(`${derrick.url}/metrics`)).text();
  const issued = Number(/^derrick_tokens_issued_total (\S+)$/m.exec(text)?.[1]);
  const failures: Record<string, number> = {};
  for (const [, reason, value] of text.matchAll(/^derrick_token_failures_total\{reason="([a-z_]+)"\} (\S+)$/gm))
    failures[reason!] = Number(value);
  return { issued, failures };
}

const abuse = derrickTest({
  actors: ["system", "identity"],
  env: {
    DERRICK_TOKEN_MAX_FAILURES: "3",
    DERRICK_TOKEN_FAILURE_WINDOW: "3s",
    DERRICK_TOKEN_CONCURRENCY: "1",
    DERRICK_TOKEN_QUEUE: "2",
    DERRICK_TOKEN_IP_RATE: "0",
  },
});
const perAddress = derrickTest({
  actors: ["system", "identity"],
  env: { DERRICK_TOKEN_IP_RATE: "1/m", DERRICK_TOKEN_IP_BURST: "3" },
});

describe("token endpoint under abuse", () => {
  const it = abuse;

  it("auth - after too many failed authentications a client id is refused with 429 and Retry-After to that address, even with its right secret, known and unknown ids alike; other addresses are not", async ({
    derrick,
  }) => {
    const before = await tokenCounts(derrick);
    const alpha = TEST_CLIENTS.alpha;
    for (let i = 0; i < 3; i++) {
      expect((await requestToken(derrick, alpha.client_id, "wrong-secret")).status).toBe(401);
      expect((await requestToken(derrick, "nobody-here", "wrong-secret")).status).toBe(401);
    }
    // The right secret is not even checked now: the id is locked until its window ends.
    const retryAfter = await expectRetryLater(await requestToken(derrick, alpha.client_id, alpha.client_secret), 429, "slow_down");
    expect(retryAfter).toBeLessThanOrEqual(3);
    // An unknown id is refused the same way: the answer does not tell which ids exist.
    await expectRetryLater(await requestToken(derrick, "nobody-here", "wrong-secret"), 429, "slow_down");
    // Counted per address: the failures above cannot lock alpha's owner out from elsewhere.
    expect(await requestTokenFrom(derrick, "127.0.0.2", alpha.client_id, alpha.client_secret)).toBe(200);
    expect(await requestTokenFrom(derrick, "127.0.0.2", alpha.client_id, "wrong-secret")).toBe(401);
    // Other clients are not affected.
    expect((await requestToken(derrick, TEST_CLIENTS.beta.client_id, TEST_CLIENTS.beta.client_secret)).status).toBe(200);
    // Once the window has passed the right secret works again, and a success clears the count.
    await eventually(async () => (await requestToken(derrick, alpha.client_id, alpha.client_secret)).status === 200, {
      timeoutMs: 6_000,
      intervalMs: 250,
      what: "the lock of alpha to end",
    });
    for (let i = 0; i < 2; i++) expect((await requestToken(derrick, alpha.client_id, "wrong-secret")).status).toBe(401);
    expect((await requestToken(derrick, alpha.client_id, alpha.client_secret)).status).toBe(200);
    // derrick_tokens_issued_total and derrick_token_failures_total{reason} counted each answer above.
    const after = await tokenCounts(derrick);
    expect(after.issued - before.issued).toBe(4);
    expect(after.failures.invalid_client! - before.failures.invalid_client!).toBe(9);
    expect(after.failures.throttled! - before.failures.throttled!).toBeGreaterThanOrEqual(2);
    expect(after.failures.overloaded).toBe(before.failures.overloaded);
  });

  it("auth - token requests beyond the secret checks running and waiting are refused at once with 503 and Retry-After, and the endpoint recovers", async ({
    derrick,
  }) => {
    const before = await tokenCounts(derrick);
    const admin = TEST_CLIENTS.admin;
    const answers = await Promise.all(Array.from({ length: 24 }, () => requestToken(derrick, admin.client_id, admin.client_secret)));
    const statuses = answers.map((res) => res.status);
    expect(
      statuses.every((status) => status === 200 || status === 503),
      statuses.join(","),
    ).toBe(true);
    // One check at a time and two waiting: most of a burst of 24 cannot be taken.
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((status) => status === 503).length).toBeGreaterThanOrEqual(12);
    for (const res of answers) {
      if (res.status === 503) await expectRetryLater(res, 503, "temporarily_unavailable");
      else await res.body?.cancel();
    }
    expect((await requestToken(derrick, admin.client_id, admin.client_secret)).status).toBe(200);
    const after = await tokenCounts(derrick);
    expect(after.failures.overloaded! - before.failures.overloaded!).toBe(statuses.filter((status) => status === 503).length);
    expect(after.issued - before.issued).toBe(statuses.filter((status) => status === 200).length + 1);
  });
});

describe("token endpoint per remote address", () => {
  const it = perAddress;

  it("auth - one remote address gets DERRICK_TOKEN_IP_BURST token requests, then 429 slow_down with Retry-After before any reaches the identity actor", async ({
    derrick,
  }) => {
    const beta = TEST_CLIENTS.beta;
    expect((await requestToken(derrick, beta.client_id, beta.client_secret)).status).toBe(200);
    expect((await requestToken(derrick, beta.client_id, "wrong-secret")).status).toBe(401);
    expect((await requestToken(derrick, "nobody-here", "wrong-secret")).status).toBe(401);
    const retryAfter = await expectRetryLater(await requestToken(derrick, beta.client_id, beta.client_secret), 429, "slow_down");
    expect(retryAfter).toBeGreaterThan(1); // one request a minute: the next is tens of seconds away
    // Requests the edge refuses by itself (a malformed form) cost no secret check and are not counted.
    const malformed = await fetch(`${derrick.url}/v2/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=password",
    });
    expect(malformed.status).toBe(400);
  });
});
