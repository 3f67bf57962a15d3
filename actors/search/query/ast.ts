/**
 * The backend-neutral query AST: what a Lucene query string (plus OSDU's `nested(path, (…))`) means,
 * independent of the engine that answers it. The SQLite backend compiles it to SQL; an OpenSearch
 * backend would compile it to the query DSL (mapping in docs/search.md).
 */

/** Lucene boolean query: every `must`, no `mustNot`, and at least one `should` when there is no `must`. */
export type BoolNode = { type: "bool"; must: QueryNode[]; should: QueryNode[]; mustNot: QueryNode[] };

export type TermKind = "word" | "phrase" | "prefix" | "wildcard";

/**
 * A term or phrase. `field` absent = every field. `field` may end with `.keyword` (exact,
 * case-sensitive) or `.keywordLower` (exact, case-insensitive), and may contain `*` (wildcard field name).
 */
export type TermNode = {
  type: "term";
  field?: string;
  value: string;
  kind: TermKind;
  /** Phrase slop (`"a b"~2`) or fuzziness (`abc~1`): kept for backends that support them. */
  slop?: number;
  fuzzy?: number;
  /** Offset of the term in the query string. */
  pos: number;
};

/** `[a TO b]`, `{a TO b}`, `>10`, `<=2020-01-01`; absent bound = open (`*`). */
export type RangeNode = {
  type: "range";
  field?: string;
  lower?: string;
  upper?: string;
  includeLower: boolean;
  includeUpper: boolean;
  pos: number;
};

/** `_exists_:field` and `field:*`. */
export type ExistsNode = { type: "exists"; field: string; pos: number };

/** OSDU `nested(path, (query))`: one element of the array at `path` must match `query` as a whole. Fields in `query` are absolute. */
export type NestedNode = { type: "nested"; path: string; query: QueryNode; pos: number };

export type MatchAllNode = { type: "matchAll" };

export type QueryNode = BoolNode | TermNode | RangeNode | ExistsNode | NestedNode | MatchAllNode;

export const matchAll: MatchAllNode = { type: "matchAll" };

/** Positive terms of a query (for highlighting): what a matching document likely contains. */
export function positiveTerms(node: QueryNode, out: TermNode[] = []): TermNode[] {
  switch (node.type) {
    case "term":
      out.push(node);
      break;
    case "bool":
      for (const child of [...node.must, ...node.should]) positiveTerms(child, out);
      break;
    case "nested":
      positiveTerms(node.query, out);
      break;
  }
  return out;
}

/**
 * A query that every record holding a match of `node` satisfies, for a record-level prefilter of
 * `nested()`: the positive clauses only. A negation inside nested() is about one element (it lacks a
 * value) while another element of the same record may hold that value, so it cannot narrow records.
 */
export function positivePart(node: QueryNode): QueryNode {
  switch (node.type) {
    case "bool":
      if (node.must.length) return { type: "bool", must: node.must.map(positivePart), should: [], mustNot: [] };
      if (node.should.length) return { type: "bool", must: [], should: node.should.map(positivePart), mustNot: [] };
      return matchAll;
    case "nested":
      return positivePart(node.query);
    default:
      return node;
  }
}
