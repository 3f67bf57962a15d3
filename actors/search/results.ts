/**
 * Shapes a hit into an OSDU result: `returnedFields` as `_source.includes` (dotted paths, `*`
 * wildcards; everything when empty), and `highlight` for `highlightedFields`: the values of each
 * field with the query's terms wrapped in <em>…</em>, up to 5 fragments of about 200 characters.
 */
import { tokenize } from "./documents.ts";
import { globToRegExp, valuesAt } from "./evaluate.ts";
import { positiveTerms, type QueryNode, type TermNode } from "./query/ast.ts";

const FRAGMENT_SIZE = 200;
const MAX_FRAGMENTS = 5;

function flatten(value: unknown, path: string, out: Map<string, unknown>): void {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, path ? `${path}.${k}` : k, out);
  } else out.set(path, value);
}

function setPath(target: Record<string, unknown>, parts: string[], value: unknown): void {
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    node = (next && typeof next === "object" && !Array.isArray(next) ? next : (node[part] = {})) as Record<string, unknown>;
  }
  node[parts[parts.length - 1]!] = value;
}

/** The document restricted to the given field paths (a path keeps its whole subtree). */
export function project(doc: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  if (fields.length === 0) return doc;
  const out: Record<string, unknown> = {};
  const exact = fields.filter((f) => !f.includes("*"));
  for (const field of exact) {
    const parts = field.split(".");
    let value: unknown = doc;
    for (const part of parts) value = value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>)[part] : undefined;
    if (value !== undefined) setPath(out, parts, value);
  }
  const patterns = fields.filter((f) => f.includes("*")).map((f) => globToRegExp(f));
  if (patterns.length) {
    const flat = new Map<string, unknown>();
    flatten(doc, "", flat);
    for (const [path, value] of flat) {
      if (patterns.some((re) => re.test(path) || path.split(".").some((_, i, all) => re.test(all.slice(0, i + 1).join("."))))) setPath(out, path.split("."), value);
    }
  }
  return out;
}

function termsFor(field: string, terms: TermNode[]): TermNode[] {
  return terms.filter((t) => {
    if (!t.field) return true;
    const base = t.field.replace(/\.keyword(Lower)?$/, "");
    return base === field || globToRegExp(base).test(field);
  });
}

function highlightText(text: string, terms: TermNode[]): string | undefined {
  const words = terms.flatMap((t) => tokenize(t.value).map((w, i, all) => ({ w, prefix: t.kind === "prefix" && i === all.length - 1 })));
  if (words.length === 0) return undefined;
  let hit = false;
  let firstHit = -1;
  const marked = text.replace(/[\p{L}\p{N}_]+/gu, (token, offset: number) => {
    const lower = tokenize(token)[0] ?? "";
    if (words.some(({ w, prefix }) => (prefix ? lower.startsWith(w) : lower === w))) {
      hit = true;
      if (firstHit < 0) firstHit = offset;
      return `<em>${token}</em>`;
    }
    return token;
  });
  if (!hit) return undefined;
  if (marked.length <= FRAGMENT_SIZE) return marked;
  const start = Math.max(0, marked.indexOf("<em>") - FRAGMENT_SIZE / 4);
  return marked.slice(start, start + FRAGMENT_SIZE + 9);
}

/** OSDU `highlight`: field → fragments, for fields that hold a query term. */
export function highlight(doc: Record<string, unknown>, fields: readonly string[], query: QueryNode): Record<string, string[]> | undefined {
  if (fields.length === 0) return undefined;
  const terms = positiveTerms(query);
  const out: Record<string, string[]> = {};
  const flat = new Map<string, unknown>();
  flatten(doc, "", flat);
  for (const field of fields) {
    const paths = field.includes("*") ? [...flat.keys()].filter((p) => globToRegExp(field).test(p)) : [field];
    for (const path of paths) {
      const fragments: string[] = [];
      for (const value of valuesAt(doc, path.split("."))) {
        if (typeof value !== "string" && typeof value !== "number") continue;
        const marked = highlightText(String(value), termsFor(path, terms));
        if (marked) fragments.push(marked);
        if (fragments.length >= MAX_FRAGMENTS) break;
      }
      if (fragments.length) out[path] = fragments;
    }
  }
  return out;
}
