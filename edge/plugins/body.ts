/**
 * Request bodies: a size limit answered as 413 problem+json whatever the framing (and a route's own,
 * smaller limit checked before its body is read), a nesting limit checked before any parse or
 * validation, and JSON parsing for every JSON media type (`application/json`, `text/json`,
 * `application/*+json`), a body that is not JSON answered 400 even where the body is optional.
 * Declared and chunked bodies: docs/edge.md#request-body-limits.
 */
import { Elysia } from "elysia";
import { badRequest, contentTooLarge, unsupportedMediaType, type DerrickError } from "../../subjects/index.ts";
import { tooDeepAt } from "../../subjects/search.ts";
import { clipPointer } from "./errors.ts";

const JSON_LIKE = /^(text\/json|application\/json|application\/[a-z0-9.+-]+\+json)\s*(;|$)/i;
const FORM = /^application\/x-www-form-urlencoded\s*(;|$)/i;
const decoder = new TextDecoder();

/**
 * Bun's own limit, set beyond any declared length so ours always answers (with a problem body): a
 * declared length over the limit is refused before the body is read, and a chunked one is read here
 * at most to the limit, so nothing is ever buffered past it.
 */
export const serverBodyCap = () => 2 ** 40;

/** Room a request needs on NATS beyond its body: the actor envelope and the principal headers. */
export const ENVELOPE_BYTES = 64 * 1024;

/**
 * The body limit the edge can keep: a body the NATS server cannot carry (its `max_payload`, 1 MB by
 * default on a server derrick did not start) would otherwise fail at publish, where no retry helps.
 */
export function effectiveBodyLimit(configured: number, maxPayload: number | undefined): number {
  if (!maxPayload || maxPayload <= ENVELOPE_BYTES) return configured;
  return Math.min(configured, maxPayload - ENVELOPE_BYTES);
}

const tooLarge = (limitBytes: number, size?: number) =>
  contentTooLarge(
    size === undefined
      ? `the request body is over the limit of ${limitBytes} bytes`
      : `the request body is ${size} bytes; the limit is ${limitBytes}`,
  );

/**
 * Twice the deepest body a client may send (a records PUT: the array plus a record at RECORD_MAX_DEPTH,
 * 65); deeper, Elysia's validation error costs O(depth²) (docs/edge.md#nested-request-bodies).
 */
export const MAX_BODY_DEPTH = 128;

/** A 400 naming the limit, and the first array or object past it by JSON pointer. */
const tooDeep = (pointer: string) => {
  const message = `nests deeper than ${MAX_BODY_DEPTH} levels`;
  // Named in `errors` too: routes that frame their 400s (OSDU search) keep the errors, not the detail.
  return badRequest(`the request body ${message}`, [{ pointer: clipPointer(pointer), message }]);
};

/** The index of the quote closing the string opened at `open` (a quote after an odd run of backslashes is escaped), or -1. */
function closingQuote(text: string, open: number): number {
  let from = open;
  for (;;) {
    const quote = text.indexOf('"', from + 1);
    if (quote < 0) return -1;
    let before = quote - 1;
    while (text.charCodeAt(before) === 0x5c) before--;
    if ((quote - 1 - before) % 2 === 0) return quote;
    from = quote;
  }
}

/**
 * Whether JSON text nests `[`/`{` deeper than `limit`, in one pass with nothing allocated. Brackets
 * inside strings do not count: a string is skipped to its closing quote (indexOf, fast on long
 * values). Unbalanced or unterminated text is left to JSON.parse to refuse.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = closingQuote(text, i);
      if (i < 0) return false;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/**
 * The JSON pointer (RFC 6901, below `pointer`) of the first array or object of JSON `text` opened
 * deeper than `limit`, as `tooDeepAt` names it on a parsed value: a second pass over text that
 * nestsDeeperThan refused, holding the index or member name of each open level up to the limit.
 */
export function pointerPastDepth(text: string, limit: number, pointer = ""): string {
  type Level = { array: boolean; index: number; key: string; awaitingKey: boolean };
  const open: Level[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = open[open.length - 1];
    if (c === 0x22) {
      const end = closingQuote(text, i);
      if (end < 0) break;
      if (top && !top.array && top.awaitingKey) {
        const raw = text.slice(i, end + 1);
        try {
          top.key = String(JSON.parse(raw));
        } catch {
          top.key = raw.slice(1, -1);
        }
        top.awaitingKey = false;
      }
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (open.length >= limit)
        return pointer + open.map((l) => `/${(l.array ? String(l.index) : l.key).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
      open.push({ array: c === 0x5b, index: 0, key: "", awaitingKey: c === 0x7b });
    } else if (c === 0x5d || c === 0x7d) {
      open.pop();
    } else if (c === 0x2c && top) {
      if (top.array) top.index++;
      else top.awaitingKey = true;
    }
  }
  return pointer;
}

/** Arrays and objects; buffers (an octet-stream body) hold no nesting. */
const isContainer = (value: unknown): value is object =>
  value !== null && typeof value === "object" && !(value instanceof ArrayBuffer) && !ArrayBuffer.isView(value);

/**
 * A route's own body limit, below the edge's (an anonymous echo takes 4 KiB), by route pattern:
 * checked on the declared length before anything is read, and on a chunked body as it is read.
 */
export type RouteBodyLimits = Readonly<Record<string, { bytes: number; tooLarge: (size?: number) => DerrickError }>>;

/** Reads a body of unknown length, refusing it once it passes `limitBytes`. */
export async function readCapped(
  body: ReadableStream<Uint8Array>,
  limitBytes: number,
  refuse: (limitBytes: number) => DerrickError = tooLarge,
): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limitBytes) {
      await reader.cancel().catch(() => undefined);
      throw refuse(limitBytes);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  // Before JSON.parse, so that nothing downstream (validation, its error) ever sees such a value.
  if (nestsDeeperThan(text, MAX_BODY_DEPTH)) throw tooDeep(pointerPastDepth(text, MAX_BODY_DEPTH, "/body"));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw badRequest("the request body is not valid JSON");
  }
}

/** Parameters a form may hold: the token endpoint takes four; a flood of them is refused, not parsed on. */
const MAX_FORM_PARAMETERS = 256;

/** A form as Elysia gives it: one string per name, an array when a name repeats (appended in place: linear). */
function parseForm(text: string): Record<string, string | string[]> {
  const form: Record<string, string | string[]> = Object.create(null);
  let count = 0;
  for (const [name, value] of new URLSearchParams(text)) {
    if (++count > MAX_FORM_PARAMETERS) throw badRequest(`the form has more than ${MAX_FORM_PARAMETERS} parameters`);
    const held = form[name];
    if (held === undefined) form[name] = value;
    else if (Array.isArray(held)) held.push(value);
    else form[name] = [held, value];
  }
  return form;
}

/** The JSON media types every route with a body takes (the notifications API names the last two). */
export const JSON_MEDIA_TYPES = ["application/json", "text/json", "application/cloudevents+json", "application/<subtype>+json"] as const;
const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);

/**
 * A body of another media type on a JSON route: 415 naming the types it takes; a form (what `curl -d` sends) is
 * not read as JSON, an untyped body is (clients that forget the header mean it). `ownTypes`: routes that read
 * their body themselves (the token endpoint takes forms and answers in RFC 6749's terms).
 */
function checkMediaType(request: Request, contentType: string | undefined, route: string, ownTypes: ReadonlySet<string>): void {
  if (!BODY_METHODS.has(request.method) || ownTypes.has(route) || !contentType || JSON_LIKE.test(contentType)) return;
  const length = request.headers.get("content-length");
  if (length === "0" || (length === null && !request.body)) return;
  const type = contentType.split(";")[0]!.trim().slice(0, 80);
  throw unsupportedMediaType(`this route takes a JSON body (${JSON_MEDIA_TYPES.join(", ")}), not ${type}`, JSON_MEDIA_TYPES);
}

export const bodyPlugin = (limitBytes: number, routeLimits: RouteBodyLimits = {}, ownTypes: ReadonlySet<string> = new Set()) =>
  new Elysia({ name: "derrick-body" })
    .onRequest(({ request }) => {
      const length = Number(request.headers.get("content-length"));
      if (Number.isFinite(length) && length > limitBytes) throw tooLarge(limitBytes, length);
    })
    .onParse({ as: "global" }, async ({ request, contentType, route }) => {
      checkMediaType(request, contentType, route, ownTypes);
      const own = route && Object.hasOwn(routeLimits, route) ? routeLimits[route] : undefined;
      if (own) {
        const length = Number(request.headers.get("content-length"));
        if (Number.isFinite(length) && length > own.bytes) throw own.tooLarge(length);
      }
      if (request.headers.has("content-length")) {
        // JSON is parsed here, not by Elysia: on an optional body Elysia drops a parse error and runs the
        // handler without a body, so `{"ids": [` would mean "every item", not 400. An untyped body is JSON;
        // other types go to Elysia's parsers.
        if (contentType ? !JSON_LIKE.test(contentType) : !BODY_METHODS.has(request.method)) return;
        return parseJson(await request.text());
      }
      if (!request.body) return;
      const text = decoder.decode(
        own && own.bytes < limitBytes
          ? await readCapped(request.body, own.bytes, () => own.tooLarge())
          : await readCapped(request.body, limitBytes),
      );
      if (contentType ? JSON_LIKE.test(contentType) : BODY_METHODS.has(request.method)) return parseJson(text);
      if (contentType && FORM.test(contentType)) return parseForm(text);
      return text;
    })
    // Bodies Elysia's own parsers built: its multipart parser JSON-parses fields that look like JSON
    // and nests dotted field names. JSON bodies were measured as text above.
    .onTransform({ as: "global" }, ({ body, request }) => {
      if (!isContainer(body) || JSON_LIKE.test(request.headers.get("content-type") ?? "")) return;
      const at = tooDeepAt(body, MAX_BODY_DEPTH, "/body");
      if (at !== undefined) throw tooDeep(at);
    });
