/**
 * Shapes a hit into an OSDU result: `returnedFields` as `_source.includes` (dotted paths, `*`
 * wildcards; everything when empty), and `highlight` for `highlightedFields`: the values of each
 * field with the query's terms wrapped in <em>…</em>, up to 5 fragments of about 200 characters.
 */
import { tokenize } from "./documents.ts";
import { valuesAt } from "./evaluate.ts";
import { compileGlob } from "./glob.ts";
import { positiveTerms, type QueryNode, type TermNode } from "./query/ast.ts";

const FRAGMENT_SIZE = 200;
const MAX_FRAGMENTS = 5;

function flatten(value: unknown, path: string, out: Map<string, unknown>): void {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, path ? `${path}.${k}` : k, out);
  } else out.set(path, value);
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The part of `value` (at `path`) that the include patterns select, as ES `_source.includes`
 * filters: a matched path keeps its whole subtree; arrays do not add to the path, so
 * `data.Items.name` keeps `name` in every element of `data.Items`; what is left empty goes.
 */
function pick(value: unknown, path: string, includes: ReadonlyArray<{ matches(path: string): boolean; below(path: string): boolean }>): unknown {
  if (Array.isArray(value)) {
    const kept = value.map((item) => pick(item, path, includes)).filter((item) => item !== undefined);
    return kept.length ? kept : undefined;
  }
  if (!isObject(value)) return undefined;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const at = path ? `${path}.${key}` : key;
    if (includes.some((inc) => inc.matches(at))) out[key] = child;
    else if (includes.some((inc) => inc.below(at))) {
      const part = pick(child, at, includes);
      if (part !== undefined) out[key] = part;
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/** An include pattern: whether it names a path, and whether it may name something below it. */
function include(field: string): { matches(path: string): boolean; below(path: string): boolean } {
  if (!field.includes("*")) return { matches: (path) => path === field, below: (path) => field.startsWith(`${path}.`) };
  const matches = compileGlob(field);
  // A `*` matches across dots (ES simple match): anything under the literal head may match.
  const head = field.slice(0, field.indexOf("*"));
  return { matches, below: (path) => `${path}.`.startsWith(head) || head.startsWith(`${path}.`) };
}

/** The document restricted to the given field paths (ES `_source.includes`; everything when empty). */
export function project(doc: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  if (fields.length === 0) return doc;
  return (pick(doc, "", fields.map(include)) as Record<string, unknown> | undefined) ?? {};
}

function termsFor(field: string, terms: TermNode[]): TermNode[] {
  return terms.filter((t) => {
    if (!t.field) return true;
    const base = t.field.replace(/\.keyword(Lower)?$/, "");
    return base === field || compileGlob(base)(field);
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
    const paths = field.includes("*") ? [...flat.keys()].filter(compileGlob(field)) : [field];
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
  // OSDU adds `highlight` only when something matched.
  return Object.keys(out).length ? out : undefined;
}
