/**
 * A path the edge serves, asked with a method it does not have: 405 problem+json with `Allow` (RFC
 * 9110 §15.5.5), not Elysia's 404, so a client learns that the path is right and which methods it
 * takes. Built from the app's own route table, so every route added is covered; only requests no
 * route matched pay for the lookup. Must be used before the errors plugin: the first error hook
 * that answers wins.
 */
import { Elysia } from "elysia";
import { DerrickError } from "../../subjects/index.ts";
import { problemResponse } from "./errors.ts";

/** What the table needs of a route: Elysia's method and path pattern (`:param`, `*`). */
export type RouteLike = { method: string; path: string };

type PathMethods = { pattern: RegExp; methods: Set<string> };

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** An Elysia path pattern as a RegExp over the request's (still percent-encoded) path. */
export function pathPattern(path: string): RegExp {
  const source = path
    .split("/")
    .map((segment) => {
      if (segment === "*") return ".*";
      if (segment.startsWith(":")) return segment.endsWith("?") ? "[^/]*" : "[^/]+";
      return escapeRegExp(segment);
    })
    .join("/");
  return new RegExp(`^${source}$`);
}

/** Methods by path pattern; HEAD wherever GET is (Elysia answers HEAD from the GET handler). */
export function methodTable(routes: readonly RouteLike[]): PathMethods[] {
  const byPath = new Map<string, Set<string>>();
  for (const { method, path } of routes) {
    const methods = byPath.get(path) ?? new Set<string>();
    methods.add(method.toUpperCase());
    if (method.toUpperCase() === "GET") methods.add("HEAD");
    byPath.set(path, methods);
  }
  return [...byPath].map(([path, methods]) => ({ pattern: pathPattern(path), methods }));
}

/** The methods the routes give `pathname`, in a stable order; empty when no route has that path. */
export function allowedMethods(table: readonly PathMethods[], pathname: string): string[] {
  const allowed = new Set<string>();
  for (const { pattern, methods } of table) if (pattern.test(pathname)) for (const method of methods) allowed.add(method);
  return [...allowed].sort();
}

export const methodNotAllowedPlugin = (routes: () => readonly RouteLike[]) => {
  let built: { count: number; table: PathMethods[] } | undefined;
  const table = () => {
    const current = routes();
    if (built?.count !== current.length) built = { count: current.length, table: methodTable(current) };
    return built.table;
  };
  return new Elysia({ name: "derrick-method-not-allowed" }).onError({ as: "global" }, ({ code, request, set }) => {
    if (code !== "NOT_FOUND") return;
    const allow = allowedMethods(table(), new URL(request.url).pathname);
    if (allow.length === 0 || allow.includes(request.method)) return;
    set.status = 405;
    const problem = new DerrickError(405, `this path does not take ${request.method.slice(0, 16)}; it takes ${allow.join(", ")}`, {
      headers: { allow: allow.join(", ") },
    });
    return problemResponse(problem, request);
  });
};
