/**
 * An indexed document as the SQLite backend writes it: what the documents file holds (the result
 * JSON, the ACL key, the shapes) and what the lookup file holds (the FTS5 row and the leaves, a
 * LookupPart). Plain data, so a bulk load prepares records in the decode worker (decode-worker.ts), the
 * actor's thread writes the documents file and passes the parts on to the lookup writer unread.
 */
import type { BBox } from "./geo.ts";
import type { IndexedDoc, Leaf, LeafType } from "./documents.ts";
import { aclKey } from "./rows.ts";
import type { LookupPart } from "./lookup.ts";

/** Geometry ids: rid * SHAPE_SLOTS + the shape's ordinal in its record (deleted by id, no index needed). */
export const SHAPE_SLOTS = 65_536;

/** What the documents file holds of a record (its lookup-file rows are a LookupPart). */
export type PreparedRecord = {
  partition: string;
  key: string;
  id: string;
  /** Lowercased kind and authority (documents.ts). */
  kind: string;
  authority: string;
  json: string;
  acl: string;
  groups: string[];
  owners: boolean[];
  /** Token count of the FTS row (both columns): BM25's document length. */
  tokens: number;
  /** The first SHAPE_SLOTS shapes: a lone point as its coordinates, any other shape as JSON. */
  shapes: Array<{ path: string; bbox: BBox; point: [number, number] | null; shape: string | null }>;
};

/**
 * The lookup-file rows of a batch of `prepared` changes, as the JSON of a `LookupPart[]` (each
 * change names its part by index), with the field paths its leaves name by index (a PathTable's):
 * the actor's thread passes the JSON on to the lookup writer unread, giving ids to new paths only.
 */
export type PreparedParts = { json: string; paths: string[] };

/** FNV-1a of a field path: the prefix of its tokens in the `fielded` column. */
export function fieldPrefix(path: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    h ^= path.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return `f${(h >>> 0).toString(36)}_`;
}

/** The `fielded` prefix of each field path seen, per thread. */
const prefixes = new Map<string, string>();

/** The field paths a batch's parts name, each once: a part's leaves give their path as its index here. */
export class PathTable {
  readonly paths: string[] = [];
  private readonly index = new Map<string, number>();

  indexOf(path: string): number {
    let at = this.index.get(path);
    if (at === undefined) this.index.set(path, (at = this.paths.push(path) - 1));
    return at;
  }
}

export function prepareRecord(d: IndexedDoc, maxShapes: number, table: PathTable): { record: PreparedRecord; part: LookupPart } {
  let tokens = 0;
  // Joined once, not concatenated token by token: the ropes concatenation builds are flattened later,
  // at a cost above the join's (docs/search.md#work-across-threads-in-a-bulk-load).
  const bodyTokens: string[] = [];
  const fieldedTokens: string[] = [];
  for (const { path, tokens: words, searchable, numeric } of d.fieldText) {
    const n = words.length;
    if (n === 0) continue;
    tokens += (searchable ? n : 0) + (numeric ? 0 : n);
    // Field terms match numbers by value (vals), not by their digits: numbers are free text only.
    let prefix = "";
    if (!numeric) {
      prefix = prefixes.get(path) ?? "";
      if (prefix === "") prefixes.set(path, (prefix = fieldPrefix(path)));
    }
    for (let i = 0; i < n; i++) {
      const token = words[i]!;
      if (searchable) bodyTokens.push(token);
      if (!numeric) fieldedTokens.push(prefix + token);
    }
  }
  // Filled by push, not preallocated: JSC's JSON.stringify of a holey array (new Array(n)) took ~5× longer.
  const paths: number[] = [];
  const types: number[] = [];
  const strs: Array<string | null> = [];
  const nums: Array<number | null> = [];
  for (const l of d.leaves) {
    paths.push(table.indexOf(l.path));
    types.push(l.t);
    strs.push(l.str);
    nums.push(l.num !== null && Number.isFinite(l.num) ? l.num : null); // as JSON carried it before
  }
  const record: PreparedRecord = {
    partition: d.partition,
    key: d.key,
    id: d.id,
    kind: d.kind,
    authority: d.authority,
    json: JSON.stringify(d.doc),
    acl: aclKey(d.acl),
    groups: d.acl.map((a) => a.group),
    owners: d.acl.map((a) => a.owner),
    tokens,
    shapes: d.shapes.slice(0, maxShapes).map(({ path, shape, bbox }) => {
      // A lone point (the common case) goes to the in-memory point index; other shapes to the R*Tree.
      const point = shape.points.length === 1 && shape.lines.length === 0 && shape.polygons.length === 0 ? shape.points[0]! : null;
      return { path, bbox, point: point ? [point[0], point[1]] : null, shape: point ? null : JSON.stringify(shape) };
    }),
  };
  return { record, part: [bodyTokens.join(" "), fieldedTokens.join(" "), paths, types, strs, nums] };
}

/** The leaves of a part as objects (for the in-memory sort columns). */
export function leavesOf([, , paths, types, strs, nums]: LookupPart, names: string[]): Leaf[] {
  return paths.map((path, i) => ({ path: names[path]!, t: types[i]! as LeafType, str: strs[i]!, num: nums[i]! }));
}
