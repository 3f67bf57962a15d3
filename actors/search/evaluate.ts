/**
 * Evaluates a query AST against one JSON object. Used for the exact meaning of OSDU's
 * `nested(path, (…))`: one element of the array at `path` must satisfy the whole inner query
 * (an index answers "somewhere in the record"; this check narrows it to "in the same element").
 */
import { parseDate, tokenize } from "./documents.ts";
import type { NestedNode, QueryNode, RangeNode, TermNode } from "./query/ast.ts";

/** Values at a dotted path, arrays flattened at every level. */
export function valuesAt(value: unknown, parts: readonly string[], from = 0): unknown[] {
  if (Array.isArray(value)) return value.flatMap((v) => valuesAt(v, parts, from));
  if (from === parts.length) return [value];
  if (!value || typeof value !== "object") return [];
  const next = (value as Record<string, unknown>)[parts[from]!];
  return next === undefined ? [] : valuesAt(next, parts, from + 1);
}

function leaves(value: unknown, out: unknown[] = []): unknown[] {
  if (Array.isArray(value)) value.forEach((v) => leaves(v, out));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => leaves(v, out));
  else out.push(value);
  return out;
}

function fieldOf(field: string): { path: string; exact: "no" | "case" | "lower" } {
  if (field.endsWith(".keywordLower")) return { path: field.slice(0, -".keywordLower".length), exact: "lower" };
  if (field.endsWith(".keyword")) return { path: field.slice(0, -".keyword".length), exact: "case" };
  return { path: field, exact: "no" };
}

function relative(field: string, base: string): string[] | undefined {
  return field.startsWith(`${base}.`) ? field.slice(base.length + 1).split(".") : undefined;
}

export function globToRegExp(pattern: string, flags = ""): RegExp {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "\\" && i + 1 < pattern.length) out += pattern[++i]!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    else if (c === "*") out += ".*";
    else if (c === "?") out += ".";
    else out += c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${out}$`, flags);
}

function termMatches(node: TermNode, values: unknown[], exact: "no" | "case" | "lower"): boolean {
  const strings = values.filter((v) => v !== null && v !== undefined && typeof v !== "object").map(String);
  if (exact !== "no") {
    if (node.kind === "prefix" || node.kind === "wildcard") {
      const re = globToRegExp(node.kind === "prefix" ? `${node.value.replace(/[\\*?]/g, "\\$&")}*` : node.value, exact === "lower" ? "i" : "");
      return strings.some((s) => re.test(s));
    }
    if (node.value === "null" && node.kind === "word") return values.some((v) => v === null);
    return exact === "lower" ? strings.some((s) => s.toLowerCase() === node.value.toLowerCase()) : strings.includes(node.value);
  }
  if (node.kind === "wildcard") {
    const re = globToRegExp(node.value.toLowerCase());
    return strings.some((s) => tokenize(s).some((t) => re.test(t)));
  }
  const wanted = tokenize(node.value);
  if (wanted.length === 0) return false;
  return strings.some((s) => {
    const tokens = tokenize(s);
    for (let i = 0; i + wanted.length <= tokens.length; i++) {
      let ok = true;
      for (let j = 0; j < wanted.length && ok; j++) {
        const last = j === wanted.length - 1;
        ok = node.kind === "prefix" && last ? tokens[i + j]!.startsWith(wanted[j]!) : tokens[i + j] === wanted[j];
      }
      if (ok) return true;
    }
    return false;
  });
}

function rangeMatches(node: RangeNode, values: unknown[]): boolean {
  const numeric = [node.lower, node.upper].every((b) => b === undefined || /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(b));
  const dated = !numeric && [node.lower, node.upper].every((b) => b === undefined || parseDate(b) !== undefined);
  const bound = (b: string | undefined, up: boolean): number | string | undefined =>
    b === undefined ? undefined : numeric ? Number(b) : dated ? parseDate(b, { roundUp: up }) : b.toLowerCase();
  const lo = bound(node.lower, !node.includeLower);
  const hi = bound(node.upper, node.includeUpper);
  return values.some((v) => {
    let x: number | string | undefined;
    if (numeric) x = typeof v === "number" ? v : undefined;
    else if (dated) x = typeof v === "string" ? parseDate(v) : undefined;
    else x = typeof v === "string" ? v.toLowerCase() : undefined;
    if (x === undefined) return false;
    if (lo !== undefined && (node.includeLower ? x < lo : x <= lo)) return false;
    if (hi !== undefined && (node.includeUpper ? x > hi : x >= hi)) return false;
    return true;
  });
}

/** Whether `element` (the object at `base`) satisfies `node`. Fields in `node` are absolute. */
export function matchesIn(node: QueryNode, element: unknown, base: string): boolean {
  switch (node.type) {
    case "matchAll":
      return true;
    case "bool": {
      if (!node.must.every((n) => matchesIn(n, element, base))) return false;
      if (node.mustNot.some((n) => matchesIn(n, element, base))) return false;
      return node.must.length > 0 || node.should.length === 0 || node.should.some((n) => matchesIn(n, element, base));
    }
    case "term": {
      if (!node.field) return termMatches(node, leaves(element), "no");
      const { path, exact } = fieldOf(node.field);
      const rel = relative(path, base);
      return rel ? termMatches(node, valuesAt(element, rel), exact) : false;
    }
    case "range": {
      const rel = node.field ? relative(fieldOf(node.field).path, base) : undefined;
      return rel ? rangeMatches(node, valuesAt(element, rel)) : false;
    }
    case "exists": {
      const rel = relative(node.field, base);
      return rel ? valuesAt(element, rel).some((v) => v !== null) : false;
    }
    case "nested": {
      const rel = relative(node.path, base);
      return rel ? valuesAt(element, rel).some((el) => matchesIn(node.query, el, node.path)) : false;
    }
  }
}

/** A record matches `nested(path, q)` when one element at `path` matches `q`. */
export function matchesNested(node: NestedNode, doc: unknown): boolean {
  return valuesAt(doc, node.path.split(".")).some((el) => matchesIn(node.query, el, node.path));
}
