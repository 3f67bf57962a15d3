/**
 * One error shape for every failure the edge answers: RFC 9457 problem+json with OSDU aliases.
 * Elysia's own failures are mapped here: validation (422 by default) → 400 naming each field by JSON
 * pointer, unparseable bodies → 400, unknown routes → 404.
 */
import { Elysia } from "elysia";
import {
  DerrickError,
  PROBLEM_CONTENT_TYPE,
  badRequest,
  contentTooLarge,
  internalError,
  notFound,
  validationError,
  type FieldError,
} from "../../subjects/index.ts";
import type { Logger } from "../../platform/logger.ts";
import { requestIdOf } from "../request-state.ts";

export function problemResponse(error: DerrickError, request: Request): Response {
  const requestId = requestIdOf(request);
  const body = error.toProblem(new URL(request.url).pathname);
  return new Response(JSON.stringify(body), {
    status: error.status,
    headers: { "content-type": PROBLEM_CONTENT_TYPE, "x-request-id": requestId, ...error.headers },
  });
}

type ElysiaValidationIssue = { path?: string; message?: string; summary?: string; schema?: { format?: string } };

function fromValidation(error: { type?: string; all?: ElysiaValidationIssue[] }): DerrickError {
  const part = error.type ?? "body";
  const seen = new Set<string>();
  const errors: FieldError[] = [];
  for (const issue of error.all ?? []) {
    const pointer = `/${part}${issue.path ?? ""}`;
    if (seen.has(pointer)) continue;
    seen.add(pointer);
    const message = issue.message?.startsWith("Unexpected property")
      ? "is not a known field"
      : issue.schema?.format
        ? `must be a valid ${issue.schema.format}`
        : (issue.message ?? "is not valid").replace(/^Expected/, "expected");
    errors.push({ pointer, message });
    if (errors.length >= 20) break;
  }
  return validationError(errors, part);
}

export function toEdgeError(code: string | number, error: unknown): DerrickError {
  if (error instanceof DerrickError) return error;
  switch (code) {
    case "VALIDATION":
      return fromValidation(error as { type?: string; all?: ElysiaValidationIssue[] });
    case "PARSE":
      return badRequest("the request body could not be parsed; send JSON with a JSON content type");
    case "NOT_FOUND":
      return notFound("no such route");
    case "INVALID_COOKIE_SIGNATURE":
    case "INVALID_FILE_TYPE":
      return badRequest(String((error as Error).message));
    default: {
      const status = (error as { status?: number })?.status;
      if (status === 413) return contentTooLarge("the request body is too large");
      if (typeof status === "number" && status >= 400 && status < 500) return new DerrickError(status, String((error as Error).message ?? "bad request"));
      return internalError(undefined, error);
    }
  }
}

export const errorsPlugin = (log: Logger) =>
  new Elysia({ name: "derrick-errors" }).onError({ as: "global" }, ({ code, error, request }) => {
    const problem = toEdgeError(code, error);
    if (problem.status >= 500 && problem.status !== 503 && problem.status !== 504) {
      log.error({ err: error, requestId: requestIdOf(request), path: new URL(request.url).pathname }, "request failed");
    }
    return problemResponse(problem, request);
  });
