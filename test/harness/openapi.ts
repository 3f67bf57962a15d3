/** The OpenAPI document as the tests read it from `/openapi.json`: the parts they look at, typed. */
import { expect } from "vitest";

export type Schema = Record<string, unknown>;
export type MediaType = { schema?: Schema; example?: unknown };
export type Parameter = { name: string; in: string; required?: boolean; description?: string; schema?: Schema; example?: unknown };
export type Operation = {
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { description?: string; required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, { description?: string; headers?: Record<string, unknown>; content?: Record<string, MediaType> }>;
  security?: Array<Record<string, string[]>>;
};
export type OpenApiDocument = {
  openapi: string;
  info: { title: string; description?: string };
  servers?: Array<{ url: string }>;
  tags?: Array<{ name: string; description?: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas?: Record<string, Schema>; securitySchemes?: Record<string, Record<string, unknown>> };
};

/** The document an edge serves at `/openapi.json` (200). */
export async function openApiDocument(edgeUrl: string): Promise<OpenApiDocument> {
  const res = await fetch(`${edgeUrl}/openapi.json`);
  expect(res.status).toBe(200);
  return (await res.json()) as OpenApiDocument;
}
