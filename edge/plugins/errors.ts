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
import type { TSchema } from "@sinclair/typebox";
import { Value, type ValueError } from "@sinclair/typebox/value";
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

/** What an answer may quote of the request: a quoted value's (or a field name's) first characters, a short text in all. */
const QUOTED_MAX = 40;
const TEXT_MAX = 300;

const cut = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

/** A message for a problem body, with long quoted values (and the whole text) cut short. */
export function clip(text: string): string {
  return cut(
    text.replace(/(['"`])([^'"`]{41,})\1/g, (_, quote: string, inner: string) => `${quote}${cut(inner, QUOTED_MAX)}${quote}`),
    TEXT_MAX,
  );
}

/** A JSON pointer built from the request's field names: each name, and the pointer, cut short. */
export function clipPointer(pointer: string): string {
  return cut(
    pointer
      .split("/")
      .map((name) => cut(name, QUOTED_MAX))
      .join("/"),
    TEXT_MAX,
  );
}

/** Elysia's ValidationError as far as it is read here: its own getters are not used (see fromValidation). */
type ElysiaValidation = {
  type?: string;
  value?: unknown;
  valueError?: ValueError;
  validator?: { Errors?: (value: unknown) => Iterable<ValueError>; schema?: TSchema };
};

/**
 * TypeBox ValueErrors mapped as actors map them, walked lazily (fieldErrors stops at 20) from the validator:
 * Elysia's `.all` can interpolate the whole value per summary, `.message`/`toResponse` pretty-print it. Messages
 * come from the schema and pointers (the request's field names) are cut short: no answer carries the body back.
 */
function fromValidation(error: ElysiaValidation): DerrickError {
  const part = error.type ?? "body";
  const fields = fieldErrors(validationErrorsOf(error), `/${part}`).map(({ pointer, message }) => ({
    pointer: clipPointer(pointer),
    message: cut(message, TEXT_MAX),
  }));
  return validationError(fields, part);
}

function validationErrorsOf(error: ElysiaValidation): Iterable<ValueError> {
  const validator = error.validator;
  try {
    if (typeof validator?.Errors === "function") return validator.Errors(error.value);
    if (validator?.schema) return Value.Errors(validator.schema, error.value);
  } catch {
    // fall back to the first error Elysia found
  }
  return error.valueError ? [error.valueError] : [];
}

export function toEdgeError(code: string | number, error: unknown): DerrickError {
  if (error instanceof DerrickError) return error;
  switch (code) {
    case "VALIDATION":
      return fromValidation(error as ElysiaValidation);
    case "PARSE":
      // Elysia wraps what a parse hook throws (the body limit's 413, our JSON 400) in its ParseError.
      if ((error as { cause?: unknown } | undefined)?.cause instanceof DerrickError) return (error as { cause: DerrickError }).cause;
      return badRequest("the request body could not be parsed; send JSON with a JSON content type");
    case "NOT_FOUND":
      return notFound("no such route");
    case "INVALID_COOKIE_SIGNATURE":
    case "INVALID_FILE_TYPE":
      return badRequest(clip(String((error as Error).message)));
    default: {
      const status = (error as { status?: number })?.status;
      if (status === 413) return contentTooLarge("the request body is too large");
      if (typeof status === "number" && status >= 400 && status < 500)
        return new DerrickError(status, clip(String((error as Error).message ?? "bad request")));
      return internalError(undefined, error);
    }
  }
}

export const errorsPlugin = (log: Logger) =>
  new Elysia({ name: "derrick-errors" }).onError({ as: "global" }, ({ code, error, request, set }) => {
    const problem = toEdgeError(code, error);
    if (problem.status >= 500 && problem.status !== 503 && problem.status !== 504) {
      log.error({ err: error, requestId: requestIdOf(request), path: new URL(request.url).pathname }, "request failed");
    }
    // What the metrics hook reads when Elysia hands it the error instead of this Response (a request
    // no route matched was counted as a 200).
    set.status = problem.status;
    return problemResponse(problem, request);
  });
