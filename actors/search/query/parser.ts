/**
 * A recursive-descent parser for the Lucene query-string syntax as OSDU Search uses it (ES `query_string`, default OR,
 * no leading wildcards) plus OSDU's `nested(path, (…))`, which no npm parser understands (docs/search.md); hand-written,
 * it can say where a query is malformed. Boolean clauses follow Lucene's classic QueryParser (`AND` makes both
 * neighbours required, `+`/`-`/`NOT` modify one clause), so `a AND b OR c` means `+a +b c`, as on OSDU.
 */
import { matchAll, type BoolNode, type QueryNode, type TermKind } from "./ast.ts";
import { isValidDateMath, looksLikeDateMath } from "./date-math.ts";

export const MAX_CLAUSES = 1024;

export class QuerySyntaxError extends Error {
  override name = "QuerySyntaxError";
  constructor(
    message: string,
    /** 0-based offset into the query string where the problem was found. */
    readonly position: number,
  ) {
    super(message);
  }
}

const Occur = { must: 0, should: 1, mustNot: 2 } as const;
type Occur = (typeof Occur)[keyof typeof Occur];
const Mod = { none: 0, req: 1, not: 2 } as const;
type Mod = (typeof Mod)[keyof typeof Mod];
const Conj = { none: 0, and: 1, or: 2 } as const;
type Conj = (typeof Conj)[keyof typeof Conj];

/** Characters that end an unquoted term (besides whitespace). */
const TERM_STOP = new Set(["(", ")", "[", "]", "{", "}", '"', ":", "^", "~", "!", "/"]);
const isSpace = (c: string | undefined) => c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\u3000";

type Token = {
  /** Unescaped text. */
  text: string;
  /** Text with wildcards kept and literal `*`, `?`, `\` escaped with `\`. */
  pattern: string;
  wildcard: boolean;
  leadingWildcard: boolean;
  pos: number;
};

export function parseQuery(query: string, options: { maxClauses?: number } = {}): QueryNode {
  return new Parser(query, options.maxClauses ?? MAX_CLAUSES).parse();
}

class Parser {
  private i = 0;
  private clauses = 0;
  constructor(
    private readonly s: string,
    private readonly maxClauses: number,
  ) {}

  parse(): QueryNode {
    this.skipWs();
    if (this.i >= this.s.length) return matchAll;
    const node = this.clauseList(undefined, undefined, false);
    this.skipWs();
    if (this.i < this.s.length) throw this.error(`Malformed closing parentheses in query part: ${this.s}, at position: ${this.i}`, this.i);
    return node;
  }

  private error(message: string, position: number): QuerySyntaxError {
    return new QuerySyntaxError(message, position);
  }

  private peek(offset = 0): string | undefined {
    return this.s[this.i + offset];
  }

  private skipWs(): void {
    while (isSpace(this.peek())) this.i++;
  }

  /** A bare keyword (AND, OR, NOT) at the cursor, followed by a non-term character. */
  private keyword(word: string): boolean {
    if (!this.s.startsWith(word, this.i)) return false;
    const after = this.s[this.i + word.length];
    return (
      after === undefined ||
      isSpace(after) ||
      after === "(" ||
      after === '"' ||
      after === "+" ||
      after === "-" ||
      after === "!" ||
      after === "[" ||
      after === "{"
    );
  }

  private conjunction(): Conj {
    if (this.keyword("AND")) return ((this.i += 3), Conj.and);
    if (this.keyword("OR")) return ((this.i += 2), Conj.or);
    if (this.s.startsWith("&&", this.i)) return ((this.i += 2), Conj.and);
    if (this.s.startsWith("||", this.i)) return ((this.i += 2), Conj.or);
    return Conj.none;
  }

  private modifier(): Mod {
    const c = this.peek();
    if (c === "+") return (this.i++, Mod.req);
    if (c === "-") return (this.i++, Mod.not);
    if (c === "!" && this.peek(1) !== "=") return (this.i++, Mod.not);
    if (this.keyword("NOT")) return ((this.i += 3), Mod.not);
    return Mod.none;
  }

  /** Clauses up to the end (or up to `)` inside a group), combined with Lucene's addClause rules. */
  private clauseList(field: string | undefined, nestedPath: string | undefined, inGroup: boolean): QueryNode {
    const clauses: Array<{ occur: Occur; node: QueryNode; mods: Mod }> = [];
    for (;;) {
      this.skipWs();
      if (this.i >= this.s.length) break;
      if (this.peek() === ")") {
        if (inGroup) break;
        throw this.error(`Malformed closing parentheses in query part: ${this.s}, at position: ${this.i}`, this.i);
      }
      const conjAt = this.i;
      const conj = clauses.length > 0 ? this.conjunction() : Conj.none;
      if (
        clauses.length === 0 &&
        (this.keyword("AND") || this.keyword("OR") || this.s.startsWith("&&", this.i) || this.s.startsWith("||", this.i))
      ) {
        throw this.error(`Malformed query: an operator has no left-hand side, at position: ${this.i}`, this.i);
      }
      this.skipWs();
      const mods = this.modifier();
      this.skipWs();
      if (this.i >= this.s.length || this.peek() === ")") {
        if (conj !== Conj.none || mods !== Mod.none)
          throw this.error(`Malformed query: an operator has no right-hand side, at position: ${conjAt}`, conjAt);
        continue;
      }
      const node = this.clause(field, nestedPath);
      if (clauses.length > 0 && conj === Conj.and) {
        const last = clauses[clauses.length - 1]!;
        if (last.occur !== Occur.mustNot) last.occur = Occur.must;
      }
      const prohibited = mods === Mod.not;
      const required = mods === Mod.req || (conj === Conj.and && !prohibited);
      clauses.push({ occur: required ? Occur.must : prohibited ? Occur.mustNot : Occur.should, node, mods });
    }
    if (clauses.length === 0) return matchAll;
    if (clauses.length === 1 && clauses[0]!.occur !== Occur.mustNot) return clauses[0]!.node;
    const bool: BoolNode = { type: "bool", must: [], should: [], mustNot: [] };
    for (const { occur, node } of clauses)
      (occur === Occur.must ? bool.must : occur === Occur.should ? bool.should : bool.mustNot).push(node);
    return bool;
  }

  private countClause(pos: number): void {
    if (++this.clauses > this.maxClauses)
      throw this.error(`Malformed query: more than ${this.maxClauses} clauses, at position: ${pos}`, pos);
  }

  private resolve(field: string, nestedPath: string | undefined): string {
    return nestedPath ? `${nestedPath}.${field}` : field;
  }

  private clause(field: string | undefined, nestedPath: string | undefined): QueryNode {
    const start = this.i;
    if (/^nested\s*\(/.test(this.s.slice(this.i, this.i + 16))) return this.nested();
    if (this.peek() === "(") return this.group(field, nestedPath);
    // A field name is a term directly followed by ':'.
    const token = this.readTerm();
    if (token && this.peek() === ":") {
      this.i++;
      this.skipWs();
      const name = token.text === "_exists_" ? "_exists_" : token.pattern.replace(/\\\*/g, "*");
      if (!name) throw this.error(`Malformed query: empty field name, at position: ${start}`, start);
      if (name === "_exists_") {
        const target = this.readTerm();
        if (!target?.text) throw this.error(`Malformed query: _exists_ needs a field name, at position: ${this.i}`, this.i);
        this.countClause(start);
        return { type: "exists", field: this.resolve(target.pattern.replace(/\\\*/g, "*"), nestedPath), pos: start };
      }
      const resolved = this.resolve(name, nestedPath);
      if (this.peek() === "(") return this.group(resolved, undefined);
      return this.value(resolved);
    }
    this.i = start;
    return this.value(field);
  }

  private group(field: string | undefined, nestedPath: string | undefined): QueryNode {
    const open = this.i;
    this.i++;
    const node = this.clauseList(field, nestedPath, true);
    if (this.peek() !== ")")
      throw this.error(`Malformed parentheses in query part: ${this.s}, 1 of closing brackets missing (opened at position: ${open})`, open);
    this.i++;
    this.suffixes();
    return node;
  }

  /** `nested(path, (query))` or `nested(path, nested(inner.path, (query)))`; an inner path is absolute. */
  private nested(): QueryNode {
    const start = this.i;
    this.i = this.s.indexOf("(", this.i) + 1;
    this.skipWs();
    const pathStart = this.i;
    while (this.i < this.s.length && !isSpace(this.peek()) && this.peek() !== "," && this.peek() !== ")") this.i++;
    const path = this.s.slice(pathStart, this.i);
    if (!path) throw this.error(`Malformed nested query: a path is required, at position: ${pathStart}`, pathStart);
    this.skipWs();
    if (this.peek() !== ",") throw this.error(`Malformed nested query: expected ',' after the path, at position: ${this.i}`, this.i);
    this.i++;
    this.skipWs();
    let query: QueryNode;
    if (/^nested\s*\(/.test(this.s.slice(this.i, this.i + 16))) query = this.nested();
    else if (this.peek() === "(") query = this.group(undefined, path);
    else throw this.error(`Malformed nested query: expected '(' or nested( after the path, at position: ${this.i}`, this.i);
    this.skipWs();
    if (this.peek() !== ")")
      throw this.error(
        `Malformed parentheses in query part: ${this.s}, 1 of closing brackets missing (opened at position: ${start})`,
        start,
      );
    this.i++;
    this.countClause(start);
    return { type: "nested", path, query, pos: start };
  }

  /** Boost (`^2`) and fuzziness/slop (`~`, `~2`) after a term, phrase or group. Returns the `~` number when given. */
  private suffixes(): number | undefined {
    let tilde: number | undefined;
    for (;;) {
      const c = this.peek();
      if (c !== "^" && c !== "~") return tilde;
      this.i++;
      const numStart = this.i;
      while (/[0-9.]/.test(this.peek() ?? "")) this.i++;
      const digits = this.s.slice(numStart, this.i);
      if (c === "^" && !digits) throw this.error(`Malformed query: '^' needs a number, at position: ${numStart - 1}`, numStart - 1);
      if (c === "~") tilde = digits ? Number(digits) : 2;
    }
  }

  private value(field: string | undefined): QueryNode {
    this.skipWs();
    const start = this.i;
    const c = this.peek();
    if (c === undefined) throw this.error(`Malformed query: a value is missing, at position: ${start}`, start);
    if (c === '"') {
      const text = this.readQuoted();
      const slop = this.suffixes();
      this.countClause(start);
      return {
        type: "term",
        ...(field ? { field } : {}),
        value: text,
        kind: "phrase",
        ...(slop !== undefined ? { slop } : {}),
        pos: start,
      };
    }
    if (c === "[" || c === "{") return this.range(field);
    if (c === ">" || c === "<") return this.comparison(field);
    if (c === "/") throw this.error(`Malformed query: regular expressions are not supported, at position: ${start}`, start);
    // Lucene reads a bare AND, OR, NOT, && or || as an operator, never as a term: `a AND AND b` does not parse.
    const operator = ["AND", "OR", "NOT"].find((word) => this.keyword(word)) ?? ["&&", "||"].find((op) => this.s.startsWith(op, this.i));
    if (operator) throw this.error(`Malformed query: unexpected operator '${operator}' where a term belongs, at position: ${start}`, start);
    const token = this.readTerm();
    if (!token?.text) throw this.error(`Malformed query: unexpected '${c}', at position: ${start}`, start);
    this.countClause(start);
    if (token.pattern === "*") {
      this.suffixes();
      return field ? { type: "exists", field, pos: start } : matchAll;
    }
    if (token.wildcard && token.leadingWildcard)
      throw this.error(`Malformed query: leading wildcard is not allowed in '${token.text}', at position: ${start}`, start);
    const fuzzy = this.suffixes();
    let kind: TermKind = "word";
    let value = token.text;
    if (token.wildcard) {
      const body = token.pattern.slice(0, -1);
      kind = token.pattern.endsWith("*") && !/(^|[^\\])[*?]/.test(body) ? "prefix" : "wildcard";
      value = kind === "prefix" ? unescapePattern(body) : token.pattern;
    }
    return {
      type: "term",
      ...(field ? { field } : {}),
      value,
      kind,
      ...(fuzzy !== undefined && kind === "word" ? { fuzzy } : {}),
      pos: start,
    };
  }

  private readQuoted(): string {
    const start = this.i;
    this.i++;
    let out = "";
    while (this.i < this.s.length) {
      const c = this.s[this.i]!;
      if (c === "\\" && this.i + 1 < this.s.length) {
        out += this.s[this.i + 1];
        this.i += 2;
        continue;
      }
      if (c === '"') {
        this.i++;
        return out;
      }
      out += c;
      this.i++;
    }
    throw this.error(`Malformed unbalanced double quotes in query: ${this.s}, at position: ${start}`, start);
  }

  /** An unquoted term (a leading wildcard is read too, so the caller can reject it with a clear message). */
  private readTerm(): Token | undefined {
    const pos = this.i;
    let text = "";
    let pattern = "";
    let wildcard = false;
    let leadingWildcard = false;
    while (this.i < this.s.length) {
      const c = this.s[this.i]!;
      if (isSpace(c) || TERM_STOP.has(c)) break;
      if (c === "\\") {
        const next = this.s[this.i + 1];
        if (next === undefined) throw this.error(`Malformed query: a trailing '\\' escapes nothing, at position: ${this.i}`, this.i);
        text += next;
        pattern += next === "*" || next === "?" || next === "\\" ? `\\${next}` : next;
        this.i += 2;
        continue;
      }
      // Lucene: '+', '-' continue a term but cannot start one (they are modifiers there).
      if ((c === "+" || c === "-") && this.i === pos) break;
      if ((c === "<" || c === ">") && this.i === pos) break;
      if (c === "*" || c === "?") {
        if (this.i === pos) leadingWildcard = true;
        wildcard = true;
      }
      text += c;
      pattern += c;
      this.i++;
    }
    if (this.i === pos) return undefined;
    return { text, pattern, wildcard, leadingWildcard, pos };
  }

  /** A range bound: quoted, `*`, or anything up to whitespace, `]` or `}`. */
  private bound(): { value?: string; pos: number } {
    this.skipWs();
    const pos = this.i;
    if (this.peek() === '"') return { value: this.readQuoted(), pos };
    let raw = "";
    while (this.i < this.s.length) {
      const c = this.s[this.i]!;
      if (isSpace(c) || c === "]" || c === "}") break;
      if (c === "\\" && this.i + 1 < this.s.length) {
        raw += this.s[this.i + 1];
        this.i += 2;
        continue;
      }
      raw += c;
      this.i++;
    }
    if (!raw) throw this.error(`Malformed range: a bound is missing, at position: ${pos}`, pos);
    if (raw === "*") return { pos };
    this.checkDateMath(raw, pos);
    return { value: raw, pos };
  }

  /** A bound meant as ES date math (`now…`, `…||…`) must be valid: a typo would compare as a string and silently match nothing. */
  private checkDateMath(value: string, pos: number): void {
    if (looksLikeDateMath(value) && !isValidDateMath(value))
      throw this.error(`Malformed query: invalid date math '${value}', at position: ${pos}`, pos);
  }

  private range(field: string | undefined): QueryNode {
    const start = this.i;
    const includeLower = this.peek() === "[";
    this.i++;
    const lower = this.bound();
    this.skipWs();
    if (!this.keyword("TO")) throw this.error(`Malformed range: expected 'TO', at position: ${this.i}`, this.i);
    this.i += 2;
    const upper = this.bound();
    this.skipWs();
    const close = this.peek();
    if (close !== "]" && close !== "}") throw this.error(`Malformed range: expected ']' or '}', at position: ${this.i}`, this.i);
    this.i++;
    this.suffixes();
    this.countClause(start);
    if (!field) throw this.error(`Malformed range: a range needs a field, at position: ${start}`, start);
    return {
      type: "range",
      field,
      ...(lower.value !== undefined ? { lower: lower.value } : {}),
      ...(upper.value !== undefined ? { upper: upper.value } : {}),
      includeLower,
      includeUpper: close === "]",
      pos: start,
    };
  }

  private comparison(field: string | undefined): QueryNode {
    const start = this.i;
    const op = this.peek()!;
    this.i++;
    const inclusive = this.peek() === "=";
    if (inclusive) this.i++;
    let value: string;
    const valueAt = this.i;
    if (this.peek() === '"') value = this.readQuoted();
    else {
      const from = this.i;
      // ES reads up to whitespace or ')': dates with ':' need no escaping here.
      while (this.i < this.s.length && !isSpace(this.peek()) && this.peek() !== ")") {
        if (this.peek() === "\\") this.i++;
        this.i++;
      }
      value = this.s.slice(from, this.i).replace(/\\(.)/g, "$1");
    }
    if (!value) throw this.error(`Malformed query: '${op}${inclusive ? "=" : ""}' needs a value, at position: ${start}`, start);
    if (!field) throw this.error(`Malformed query: a comparison needs a field, at position: ${start}`, start);
    this.checkDateMath(value, valueAt);
    this.countClause(start);
    return op === ">"
      ? { type: "range", field, lower: value, includeLower: inclusive, includeUpper: false, pos: start }
      : { type: "range", field, upper: value, includeLower: false, includeUpper: inclusive, pos: start };
  }
}

function unescapePattern(pattern: string): string {
  return pattern.replace(/\\(.)/g, "$1");
}
