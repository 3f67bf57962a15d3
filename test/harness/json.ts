/** Typed reads of JSON answers: the type says what a test expects, its assertions check it. */
import { expect } from "vitest";
import { PROBLEM_CONTENT_TYPE, type Problem } from "../../subjects/errors.ts";
import type { CallInit, EdgeClient } from "./derrick.ts";

/** The JSON body of an answer as the type the test expects; with `status`, the answer must have it (else fails with the body). */
export async function json<T = Record<string, any>>(res: Response, status?: number): Promise<T> {
  const text = await res.text();
  if (status !== undefined) expect(res.status, text).toBe(status);
  return JSON.parse(text) as T;
}

/** Calls the edge as a test client; the JSON body of an answer with `status` (200 unless given), else fails with the body. */
export async function getJson<T = Record<string, any>>(
  client: Pick<EdgeClient, "call">,
  path: string,
  init: CallInit & { status?: number } = {},
): Promise<T> {
  const { status = 200, ...rest } = init;
  return json<T>(await client.call(path, rest), status);
}

/** An RFC 9457 problem answer with `status`: its media type, and OSDU's aliases agreeing with the RFC's fields. */
export async function expectProblem(res: Response, status: number): Promise<Problem> {
  const body = await json<Problem>(res, status);
  expect(res.headers.get("content-type")).toContain(PROBLEM_CONTENT_TYPE);
  expect(body).toMatchObject({ status, code: status });
  expect(typeof body.title).toBe("string");
  expect(body.reason).toBe(body.title);
  expect(body.message).toBe(body.detail);
  return body;
}
