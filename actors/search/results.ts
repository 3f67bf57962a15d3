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
 * Sets `key` as an own, enumerable property whatever it is: for a record's key `__proto__` (JSON.parse keeps it as an
 * own key) `target[key] = value` would set the prototype instead and drop the key from results (docs/search.md#records).
 */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The part of `value` (at `path`) that the include patterns select, as ES `_source.includes`
 * filters: a matched path keeps its whole subtree; arrays do not add to the path, so
 * `data.Items.name` keeps `name` in every element of `data.Items`; what is left empty goes.
 */
function pick(
  value: unknown,
  path: string,
  includes: ReadonlyArray<{ matches(path: string): boolean; below(path: string): boolean }>,
): unknown {
  if (Array.isArray(value)) {
    const kept = value.map((item) => pick(item, path, includes)).filter((item) => item !== undefined);
    return kept.length ? kept : undefined;
  }
  if (!isObject(value)) return undefined;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const at = path ? `${path}.${key}` : key;
    if (includes.some((inc) => inc.matches(at))) setOwn(out, key, child);
    else if (includes.some((inc) => inc.below(at))) {
      const part = pick(child, at, includes);
      if (part !== undefined) setOwn(out, key, part);
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

/**
 * Most highlight work one request may ask for, in units of roughly 0.1 µs; past it the remaining results
 * come without `highlight`, which clients already read as optional (docs/search.md#limits-and-known-differences-from-osdu-on-elasticsearch).
 */
export const HIGHLIGHT_WORK_MAX = 2_000_000;
/** Per returned document and per path it holds, and again per highlighted path of a document. */
const PATH_UNITS = 16;
/** Per value highlighted (plus one per character, times 1 + the prefix words that apply to its path). */
const VALUE_UNITS = 4;
/** Per highlighted-field pattern and wildcard-field term matched against a path new to the request. */
const GLOB_UNITS = 2;

type Words = { exact: Set<string>; prefixes: string[] };

/**
 * Highlights the results of one request: the highlighted-field patterns and the terms' field
 * globs are compiled once, each path's words computed once, and the work counted against
 * HIGHLIGHT_WORK_MAX.
 */
export class Highlighter {
  /** Work units spent so far. */
  work = 0;
  /** Whether the budget ran out (later documents get no highlight). */
  exhausted = false;
  private readonly fields: Array<{ field: string; matches?: (path: string) => boolean }>;
  private readonly unfielded: TermNode[];
  /** Fielded terms by their exact field (terms on `.keyword`/`.keywordLower` subfields highlight nothing). */
  private readonly exactField = new Map<string, TermNode[]>();
  /** Fielded terms whose field holds a glob character, with its matcher. */
  private readonly globField: Array<{ term: TermNode; matches: (path: string) => boolean }> = [];
  /** Per path: the words of the terms that apply to it (undefined when none). */
  private readonly wordsOf = new Map<string, Words | undefined>();
  /** Per path: which highlighted-field patterns name it (by their index in `fields`). */
  private readonly named = new Map<string, boolean[]>();

  constructor(
    fields: readonly string[],
    query: QueryNode,
    private readonly max = HIGHLIGHT_WORK_MAX,
  ) {
    // Duplicate entries name the same paths: each is looked at once.
    this.fields = [...new Set(fields)].map((field) => (field.includes("*") ? { field, matches: compileGlob(field) } : { field }));
    const terms = positiveTerms(query);
    this.unfielded = terms.filter((t) => !t.field);
    for (const t of terms) {
      // ES require_field_match (true by default): a field is highlighted only for terms on that same
      // field, so an exact `.keyword`/`.keywordLower` term does not mark the analyzed field's words.
      if (!t.field || /\.keyword(Lower)?$/.test(t.field)) continue;
      const base = t.field;
      if (/[*?\\]/.test(base)) this.globField.push({ term: t, matches: compileGlob(base) });
      else {
        const list = this.exactField.get(base);
        if (list) list.push(t);
        else this.exactField.set(base, [t]);
      }
    }
  }

  private spend(units: number): boolean {
    this.work += units;
    if (this.work > this.max) this.exhausted = true;
    return !this.exhausted;
  }

  private words(path: string): Words | undefined {
    if (this.wordsOf.has(path)) return this.wordsOf.get(path);
    this.spend(GLOB_UNITS * this.globField.length);
    const terms = [
      ...this.unfielded,
      ...(this.exactField.get(path) ?? []),
      ...this.globField.filter((g) => g.matches(path)).map((g) => g.term),
    ];
    const exact = new Set<string>();
    const prefixes: string[] = [];
    for (const t of terms) {
      const ws = tokenize(t.value);
      ws.forEach((w, i) => (t.kind === "prefix" && i === ws.length - 1 ? prefixes.push(w) : exact.add(w)));
    }
    const words = exact.size + prefixes.length ? { exact, prefixes: [...new Set(prefixes)] } : undefined;
    this.wordsOf.set(path, words);
    return words;
  }

  private isNamed(path: string, field: number, patterns: number): boolean {
    let hits = this.named.get(path);
    if (hits === undefined) {
      this.spend(GLOB_UNITS * patterns);
      this.named.set(path, (hits = this.fields.map((f) => f.matches?.(path) ?? false)));
    }
    return hits[field]!;
  }

  /** OSDU `highlight` of one document: field → fragments, for fields that hold a query term. */
  highlight(doc: Record<string, unknown>): Record<string, string[]> | undefined {
    if (this.fields.length === 0 || this.exhausted) return undefined;
    const out: Record<string, string[]> = {};
    const flat = new Map<string, unknown>();
    flatten(doc, "", flat);
    const patterns = this.fields.filter((f) => f.matches).length;
    if (!this.spend(PATH_UNITS + (patterns ? flat.size * PATH_UNITS : 0))) return undefined;
    // Each path once, in the order the entries name them.
    const paths = new Set<string>();
    this.fields.forEach(({ field, matches }, i) => {
      if (!matches) paths.add(field);
      else for (const path of flat.keys()) if (!paths.has(path) && this.isNamed(path, i, patterns)) paths.add(path);
    });
    for (const path of paths) {
      if (!this.spend(PATH_UNITS)) return undefined;
      const words = this.words(path);
      if (!words) continue;
      const fragments: string[] = [];
      for (const value of valuesAt(doc, path.split("."))) {
        if (typeof value !== "string" && typeof value !== "number") continue;
        const text = String(value);
        if (!this.spend(VALUE_UNITS + text.length * (1 + words.prefixes.length))) return undefined;
        const marked = highlightText(text, words);
        if (marked) fragments.push(marked);
        if (fragments.length >= MAX_FRAGMENTS) break;
      }
      // A top-level key `__proto__` (a record published straight on NATS may have one) stays a key.
      if (fragments.length) setOwn(out, path, fragments);
    }
    // OSDU adds `highlight` only when something matched.
    return Object.keys(out).length ? out : undefined;
  }
}

const ASCII = /^[\x00-\x7f]*$/;

function highlightText(text: string, { exact, prefixes }: Words): string | undefined {
  // ASCII text (most values): the same tokens without the Unicode classes, several times faster.
  const ascii = ASCII.test(text);
  const tokens = () => (ascii ? /[A-Za-z0-9_]+/g : /[\p{L}\p{N}_]+/gu);
  const matches = (token: string) => {
    const lower = ascii ? token.toLowerCase() : (tokenize(token)[0] ?? "");
    return exact.has(lower) || prefixes.some((w) => lower.startsWith(w));
  };
  let first = -1;
  for (const m of text.matchAll(tokens())) {
    if (matches(m[0])) {
      first = m.index;
      break;
    }
  }
  if (first < 0) return undefined;
  // The fragment is cut from the value, then marked: never inside a word, so a highlighted term and
  // its <em>…</em> stay whole (cutting the marked text left a long term's tag unclosed).
  let fragment = text;
  if (text.length > FRAGMENT_SIZE) {
    const word = ascii ? /[A-Za-z0-9_]/ : /[\p{L}\p{N}_]/u;
    let start = Math.max(0, first - FRAGMENT_SIZE / 4);
    while (start > 0 && start < first && word.test(text[start - 1]!)) start++;
    let end = Math.max(start + FRAGMENT_SIZE, first);
    while (end < text.length && word.test(text[end]!)) end++;
    fragment = text.slice(start, end);
  }
  return fragment.replace(tokens(), (token) => (matches(token) ? `<em>${token}</em>` : token));
}

/** OSDU `highlight` of one document (a Highlighter of its own: for one document only). */
export function highlight(doc: Record<string, unknown>, fields: readonly string[], query: QueryNode): Record<string, string[]> | undefined {
  return new Highlighter(fields, query).highlight(doc);
}
