/**
 * Request bodies: a size limit answered as 413 problem+json whatever the framing, and JSON parsing
 * for every JSON media type (`application/json`, `text/json`, `application/*+json`), a body that is
 * not JSON answered 400 whether or not the route's body is optional.
 *
 * A declared `Content-Length` over the limit is refused before anything is read. A body without one
 * (chunked) is read here, at most `limit` bytes, and refused the moment it goes over; Bun's own cap
 * (`maxRequestBodySize`) is set out of reach so that it never answers first with its bare, body-less
 * 413.
 */
import { Elysia } from "elysia";
import { badRequest, contentTooLarge } from "../../subjects/index.ts";

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
  contentTooLarge(size === undefined ? `the request body is over the limit of ${limitBytes} bytes` : `the request body is ${size} bytes; the limit is ${limitBytes}`);

/** Reads a body of unknown length, refusing it once it passes `limitBytes`. */
export async function readCapped(body: ReadableStream<Uint8Array>, limitBytes: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limitBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limitBytes);
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
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw badRequest("the request body is not valid JSON");
  }
}

/** A form as Elysia gives it: one string per name, an array when a name repeats. */
function parseForm(text: string): Record<string, string | string[]> {
  const form: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    const held = form[name];
    form[name] = held === undefined ? value : Array.isArray(held) ? [...held, value] : [held, value];
  }
  return form;
}

export const bodyPlugin = (limitBytes: number) =>
  new Elysia({ name: "derrick-body" })
    .onRequest(({ request }) => {
      const length = Number(request.headers.get("content-length"));
      if (Number.isFinite(length) && length > limitBytes) throw tooLarge(limitBytes, length);
    })
    .onParse({ as: "global" }, async ({ request, contentType }) => {
      if (request.headers.has("content-length")) {
        // Length checked above. JSON is parsed here, not by Elysia: on a route whose body is optional
        // Elysia drops a parse error and runs the handler without a body, so `{"ids": [` would be
        // taken as "no body" (every item) instead of a 400. Other types go to Elysia's parsers.
        if (!contentType || !JSON_LIKE.test(contentType)) return;
        return parseJson(await request.text());
      }
      if (!request.body) return;
      const text = decoder.decode(await readCapped(request.body, limitBytes));
      if (contentType && JSON_LIKE.test(contentType)) return parseJson(text);
      if (contentType && FORM.test(contentType)) return parseForm(text);
      return text;
    });
