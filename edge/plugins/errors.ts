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
  fieldErrors,
} from "../../subjects/index.ts";
import type { ValueError } from "@sinclair/typebox/value";
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

/** Elysia's validation errors are TypeBox ValueErrors: the same mapping as actors use. */
function fromValidation(error: { type?: string; all?: ValueError[] }): DerrickError {
  const part = error.type ?? "body";
  return validationError(fieldErrors(error.all ?? [], `/${part}`), part);
}

export function toEdgeError(code: string | number, error: unknown): DerrickError {
  if (error instanceof DerrickError) return error;
  switch (code) {
    case "VALIDATION":
      return fromValidation(error as { type?: string; all?: ValueError[] });
    case "PARSE":
      // Elysia wraps what a parse hook throws (the body limit's 413, our JSON 400) in its ParseError.
      if ((error as { cause?: unknown } | undefined)?.cause instanceof DerrickError) return (error as { cause: DerrickError }).cause;
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

/**
 * How a route frames the 400s the edge answers before its handler runs (its schema's failures and a
 * body that is not JSON), by route pattern: OSDU's search routes answer them with OSDU's message.
 */
export type BadRequestFraming = Readonly<Record<string, (problem: DerrickError) => DerrickError>>;

export const errorsPlugin = (log: Logger, framing: BadRequestFraming = {}) =>
  new Elysia({ name: "derrick-errors" }).onError({ as: "global" }, ({ code, error, request, route, set }) => {
    let problem = toEdgeError(code, error);
    const frame = route && Object.hasOwn(framing, route) ? framing[route] : undefined;
    if (frame && problem.status === 400 && (code === "VALIDATION" || code === "PARSE")) problem = frame(problem);
    if (problem.status >= 500 && problem.status !== 503 && problem.status !== 504) {
      log.error({ err: error, requestId: requestIdOf(request), path: new URL(request.url).pathname }, "request failed");
    }
    // What the metrics hook reads when Elysia hands it the error instead of this Response (a request
    // no route matched was counted as a 200).
    set.status = problem.status;
    return problemResponse(problem, request);
  });
