/**
 * Evaluates a query AST against one JSON object. Used for the exact meaning of OSDU's
 * `nested(path, (…))`: one element of the array at `path` must satisfy the whole inner query
 * (an index answers "somewhere in the record"; this check narrows it to "in the same element").
 */
import { KEYWORD_MAX, dateValue, parseDate, parseNumber, tokenize } from "./documents.ts";
import { compileGlob } from "./glob.ts";
import { compareCodePoints } from "./sort-columns.ts";
import { parseDateBound } from "./query/date-math.ts";
import type { NestedNode, QueryNode, RangeNode, TermNode } from "./query/ast.ts";

/** A closed interval of numbers or epoch ms, either end open. */
export type Bounds = { lower?: number; upper?: number };

/**
 * What a field term means besides the words of string values, as on ES fields of that type: a
 * number equal to it (`5` on a numeric field does not match 100.5), or a date within it (a date
 * term covers its whole day, hour… as ES's date term query does). Wildcards and prefixes: neither.
 */
export function typedTerm(node: TermNode): { number?: number; dates?: Required<Bounds> } {
  if (node.kind !== "word" && node.kind !== "phrase") return {};
  const value = node.value.trim();
  const number = parseNumber(value);
  // At least a full day, as record values are detected as dates: `2017` stays a number and a word.
  const lower = parseDate(value, { minimal: "day" });
  return {
    ...(number !== undefined ? { number } : {}),
    ...(lower !== undefined ? { dates: { lower, upper: parseDate(value, { minimal: "day", roundUp: true })! } } : {}),
  };
}

/**
 * How a range's bounds read: as numbers, as dates (partial dates and date math rounded as ES
 * rounds them), or both — `[2017 TO 2018]` is a number range on numbers and a year range on dates.
 * Neither: the bounds compare as strings.
 */
export function typedBounds(node: RangeNode, now = Date.now()): { numbers?: Bounds; dates?: Bounds } {
  const given = [node.lower, node.upper].filter((b): b is string => b !== undefined);
  const numeric = given.every((b) => parseNumber(b) !== undefined);
  const lowerDate = node.lower === undefined ? undefined : parseDateBound(node.lower, { roundUp: !node.includeLower, now });
  const upperDate = node.upper === undefined ? undefined : parseDateBound(node.upper, { roundUp: node.includeUpper, now });
  const dated = (node.lower === undefined || lowerDate !== undefined) && (node.upper === undefined || upperDate !== undefined);
  const bounds = (lower: number | undefined, upper: number | undefined): Bounds => ({
    ...(lower !== undefined ? { lower } : {}),
    ...(upper !== undefined ? { upper } : {}),
  });
  return {
    ...(numeric
      ? {
          numbers: bounds(
            node.lower === undefined ? undefined : Number(node.lower),
            node.upper === undefined ? undefined : Number(node.upper),
          ),
        }
      : {}),
    ...(dated ? { dates: bounds(lowerDate, upperDate) } : {}),
  };
}

/** Whether `x` lies within `bounds`, each end inclusive or not as the range says. */
export function inBounds(x: number, bounds: Bounds, includeLower = true, includeUpper = true): boolean {
  if (bounds.lower !== undefined && (includeLower ? x < bounds.lower : x <= bounds.lower)) return false;
  if (bounds.upper !== undefined && (includeUpper ? x > bounds.upper : x >= bounds.upper)) return false;
  return true;
}

/**
 * Values at a dotted path, arrays flattened at every level. Own keys only: `constructor`,
 * `__proto__`, `toString`… are values only where the record holds such a key (read as
 * `obj[key]`, an element without one gave Object's constructor or Object.prototype).
 */
export function valuesAt(value: unknown, parts: readonly string[], from = 0): unknown[] {
  if (Array.isArray(value)) return value.flatMap((v) => valuesAt(v, parts, from));
  if (from === parts.length) return [value];
  if (!value || typeof value !== "object" || !Object.hasOwn(value, parts[from]!)) return [];
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

/** Whether one of the strings holds the term's words in sequence (the last one as a prefix for prefix terms). */
function wordsMatch(node: TermNode, strings: string[]): boolean {
  if (node.kind === "wildcard") {
    const matches = compileGlob(node.value.toLowerCase());
    return strings.some((s) => tokenize(s).some(matches));
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

/**
 * `values` are a field's values (`fielded`) or every value of an element (free text). As the index
 * does: a field term matches numbers by value and dates within it, other values by their words;
 * free text matches the words of numbers too.
 */
function termMatches(node: TermNode, values: unknown[], exact: "no" | "case" | "lower", fielded: boolean): boolean {
  const scalars = values.filter((v) => v !== null && v !== undefined && typeof v !== "object");
  const strings = scalars.map(String);
  if (exact !== "no") {
    if (node.kind === "prefix" || node.kind === "wildcard") {
      const matches = compileGlob(node.kind === "prefix" ? `${node.value.replace(/[\\*?]/g, "\\$&")}*` : node.value, {
        ignoreCase: exact === "lower",
      });
      return strings.some(matches);
    }
    if (node.value === "null" && node.kind === "word") return values.some((v) => v === null);
    return exact === "lower" ? strings.some((s) => s.toLowerCase() === node.value.toLowerCase()) : strings.includes(node.value);
  }
  if (!fielded) return wordsMatch(node, strings);
  const { number, dates } = typedTerm(node);
  if (number !== undefined && scalars.includes(number)) return true;
  const texts = scalars.filter((v) => typeof v !== "number").map(String);
  const inDates = (s: string) => {
    const epoch = dates ? dateValue(s) : undefined;
    return epoch !== undefined && inBounds(epoch, dates!);
  };
  return texts.some(inDates) || wordsMatch(node, texts);
}

function rangeMatches(node: RangeNode, values: unknown[], exact: "no" | "case" | "lower"): boolean {
  if (node.lower === undefined && node.upper === undefined) return values.some((v) => v !== null); // [* TO *]: exists
  if (exact === "no") {
    const { numbers, dates } = typedBounds(node);
    if (numbers || dates) {
      return values.some((v) => {
        if (typeof v === "number") return numbers !== undefined && inBounds(v, numbers, node.includeLower, node.includeUpper);
        const epoch = dates && typeof v === "string" ? dateValue(v) : undefined;
        return epoch !== undefined && inBounds(epoch, dates!, node.includeLower, node.includeUpper);
      });
    }
  }
  // Text order, as the index compares its `str` (SQLite BINARY = code points): `.keyword` as stored,
  // with numbers and booleans as their text; `.keywordLower` and analyzed fields lowercased (the
  // latter on strings only). Strings longer than the index keeps as keywords have no value.
  const norm = (x: string) => (exact === "case" ? x : x.toLowerCase());
  const lower = node.lower === undefined ? undefined : norm(node.lower);
  const upper = node.upper === undefined ? undefined : norm(node.upper);
  return values.some((v) => {
    const text =
      typeof v === "string"
        ? v.length <= KEYWORD_MAX
          ? v
          : undefined
        : exact !== "no" && (typeof v === "number" || typeof v === "boolean")
          ? String(v)
          : undefined;
    if (text === undefined) return false;
    const x = norm(text);
    if (lower !== undefined && (node.includeLower ? compareCodePoints(x, lower) < 0 : compareCodePoints(x, lower) <= 0)) return false;
    if (upper !== undefined && (node.includeUpper ? compareCodePoints(x, upper) > 0 : compareCodePoints(x, upper) >= 0)) return false;
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
      if (!node.field) return termMatches(node, leaves(element), "no", false);
      const { path, exact } = fieldOf(node.field);
      const rel = relative(path, base);
      return rel ? termMatches(node, valuesAt(element, rel), exact, true) : false;
    }
    case "range": {
      const field = node.field ? fieldOf(node.field) : undefined;
      const rel = field ? relative(field.path, base) : undefined;
      return rel ? rangeMatches(node, valuesAt(element, rel), field!.exact) : false;
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
