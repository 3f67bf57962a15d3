/**
 * The one error model. Actors throw DerrickError; it crosses NATS as a service error (status in
 * `Nats-Service-Error-Code`, RFC 9457 problem JSON as the body) and the edge answers it as
 * `application/problem+json`, so a status never changes on the way to the client.
 */
import { Type, type Static } from "@sinclair/typebox";

export const FieldError = Type.Object({
  /** JSON pointer (RFC 6901) into the request part at fault, e.g. `/body/callback_uri`. */
  pointer: Type.String(),
  message: Type.String(),
});
export type FieldError = Static<typeof FieldError>;

/** RFC 9457 problem details plus OSDU's `code`/`reason`/`message` aliases. */
export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    instance: Type.Optional(Type.String()),
    errors: Type.Optional(Type.Array(FieldError)),
    code: Type.Integer({ description: "OSDU alias of status" }),
    reason: Type.String({ description: "OSDU alias of title" }),
    message: Type.String({ description: "OSDU alias of detail" }),
  },
  { additionalProperties: true, description: "RFC 9457 problem details" },
);
export type Problem = Static<typeof Problem>;

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  410: "Gone",
  412: "Precondition Failed",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  507: "Insufficient Storage",
};

export type DerrickErrorOptions = {
  /** Short problem slug; becomes `urn:derrick:problem:<slug>`. Defaults from the status. */
  type?: string;
  title?: string;
  errors?: FieldError[];
  /** Whether trying again later may succeed (503, 504, 429). */
  retryable?: boolean;
  /** Extra response headers (e.g. Retry-After, WWW-Authenticate). */
  headers?: Record<string, string>;
  /** Extension members merged into the problem body (e.g. a task's state on 409). */
  extensions?: Record<string, unknown>;
  cause?: unknown;
};

export class DerrickError extends Error {
  override name = "DerrickError";
  readonly title: string;
  readonly type: string;
  readonly errors?: FieldError[];
  readonly retryable: boolean;
  readonly headers: Record<string, string>;
  readonly extensions: Record<string, unknown>;

  constructor(
    readonly status: number,
    readonly detail: string,
    options: DerrickErrorOptions = {},
  ) {
    super(detail, { cause: options.cause });
    this.title = options.title ?? TITLES[status] ?? "Error";
    this.type = options.type?.includes(":") ? options.type : `urn:derrick:problem:${options.type ?? slug(this.title)}`;
    this.errors = options.errors;
    this.retryable = options.retryable ?? [429, 503, 504].includes(status);
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  toProblem(instance?: string): Problem {
    return {
      ...this.extensions,
      type: this.type,
      title: this.title,
      status: this.status,
      detail: this.detail,
      ...(instance ? { instance } : {}),
      ...(this.errors?.length ? { errors: this.errors } : {}),
      code: this.status,
      reason: this.title,
      message: this.detail,
    };
  }

  /** Rebuilds an error from a problem body received over NATS. */
  static fromProblem(problem: Partial<Problem>, headers: Record<string, string> = {}): DerrickError {
    const { type, title, status, detail, errors, instance: _i, code: _c, reason: _r, message: _m, ...extensions } = problem;
    return new DerrickError(Number(status ?? 500), String(detail ?? title ?? "error"), {
      type,
      title,
      errors,
      headers,
      extensions,
    });
  }
}

function slug(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");
}

export const badRequest = (detail: string, errors?: FieldError[]) => new DerrickError(400, detail, { errors });
/** A 400 for one field: the pointer names it, the detail repeats it for clients that only read `message`. */
export const invalidField = (pointer: string, message: string) =>
  new DerrickError(400, `${pointer}: ${message}`, { type: "validation", errors: [{ pointer, message }] });
export const unauthorized = (detail: string, challenge = "Bearer") =>
  new DerrickError(401, detail, { headers: { "WWW-Authenticate": challenge } });
export const forbidden = (detail: string) => new DerrickError(403, detail);
export const notFound = (detail: string) => new DerrickError(404, detail);
export const conflict = (detail: string, extensions?: Record<string, unknown>) => new DerrickError(409, detail, { extensions });
export const gone = (detail: string) => new DerrickError(410, detail);
export const preconditionFailed = (detail: string) => new DerrickError(412, detail);
/** A 413; `errors` names the offending field when one field is too large (a twin value). */
export const contentTooLarge = (detail: string, errors?: FieldError[]) => new DerrickError(413, detail, { errors });
/** A 415 naming the media types the route takes (RFC 9110 §15.5.16: `Accept` on a request body's type). */
export const unsupportedMediaType = (detail: string, accepted: readonly string[]) =>
  new DerrickError(415, detail, { headers: { Accept: accepted.join(", ") } });
export const tooManyRequests = (detail: string, retryAfterSeconds: number) =>
  new DerrickError(429, detail, { headers: { "Retry-After": String(retryAfterSeconds) } });
export const unavailable = (detail: string, retryAfterSeconds = 1) =>
  new DerrickError(503, detail, { headers: { "Retry-After": String(retryAfterSeconds) } });
export const gatewayTimeout = (detail: string) => new DerrickError(504, detail);
export const badGateway = (detail: string) => new DerrickError(502, detail);
export const insufficientStorage = (detail: string) => new DerrickError(507, detail);
export const internalError = (detail = "unexpected error; see the server log for the request id", cause?: unknown) =>
  new DerrickError(500, detail, { cause, retryable: false });

/** Any thrown value as a DerrickError; unknown errors become a 500 that hides internals. */
export function toDerrickError(error: unknown): DerrickError {
  return error instanceof DerrickError ? error : internalError(undefined, error);
}
