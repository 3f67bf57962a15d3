/**
 * Request bodies: a size limit answered as 413 problem+json before anything is read, and JSON parsing
 * for the JSON media types Elysia leaves unparsed (`text/json`, `application/*+json`).
 */
import { Elysia } from "elysia";
import { badRequest, contentTooLarge } from "../../subjects/index.ts";

const JSON_LIKE = /^(text\/json|application\/[a-z0-9.+-]+\+json)\s*(;|$)/i;

export const bodyPlugin = (limitBytes: number) =>
  new Elysia({ name: "derrick-body" })
    .onRequest(({ request }) => {
      const length = Number(request.headers.get("content-length"));
      if (Number.isFinite(length) && length > limitBytes) {
        throw contentTooLarge(`the request body is ${length} bytes; the limit is ${limitBytes}`);
      }
    })
    .onParse({ as: "global" }, async ({ request, contentType }) => {
      if (!contentType || !JSON_LIKE.test(contentType)) return;
      const text = await request.text();
      if (text.length === 0) return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw badRequest("the request body is not valid JSON");
      }
    });
