/**
 * How a stored record becomes an indexed document, backend-neutral: the result document (the record
 * plus OSDU's derived `authority`, `source`, `namespace`, `type`), its typed leaves (exact values for
 * keyword matches, ranges, sort and aggregations), its text (analyzed like ES's standard analyzer:
 * lowercased, diacritics removed, split on punctuation), its ACL groups and its geometries.
 */
import type { StoredRecord } from "../../subjects/search.ts";
import { bboxOf, collectShape, emptyShape, isEmpty, isGeometry, type BBox, type Shape } from "./geo.ts";
import { BoundedCache } from "../../platform/bounded-cache.ts";

/** Leaf value types. */
export const LeafType = { string: 0, number: 1, date: 2, boolean: 3, null: 4, geometry: 5 } as const;
export type LeafType = (typeof LeafType)[keyof typeof LeafType];

export type Leaf = { path: string; t: LeafType; str: string | null; num: number | null };

export type IndexedDoc = {
  partition: string;
  /** Subject key: hex SHA-1 of the id. */
  key: string;
  id: string;
  /** Lowercased kind and authority: kind matching is case-insensitive (OSDU). */
  kind: string;
  authority: string;
  doc: Record<string, unknown>;
  /** ACL group names, normalized (see aclGroup), with whether they own. */
  acl: Array<{ group: string; owner: boolean }>;
  leaves: Leaf[];
  /**
   * Tokens of each leaf, per path (field search); `searchable` ones (data/tags strings and numbers)
   * are also free text. A number's tokens (`numeric`) are free text only: a field term matches
   * numbers by value (ES numeric fields), so `data.Depth:5` does not match 100.5.
   */
  fieldText: Array<{ path: string; tokens: string[]; searchable: boolean; numeric?: true }>;
  shapes: Array<{ path: string; shape: Shape; bbox: BBox }>;
};

/** Keyword values longer than this are not kept as exact values (ES `ignore_above: 256`). */
export const KEYWORD_MAX = 256;

const ASCII = /^[\x00-\x7f]*$/;

export function tokenize(text: string): string[] {
  // ASCII text (most values) needs no Unicode normalization: same tokens, several times faster.
  if (ASCII.test(text)) return text.toLowerCase().match(/[a-z0-9_]+/g) ?? [];
  return (
    text
      .normalize("NFD")
      .replace(/\p{M}/gu, "")
      .toLowerCase()
      .match(/[\p{L}\p{N}_]+/gu) ?? []
  );
}

/**
 * An ACL entry or a caller group as one comparable name: OSDU ACLs hold group emails
 * (`data.default.viewers@opendes.example.com`), tokens hold group names: compare the part before
 * `@`, case-insensitively.
 */
export function aclGroup(value: string): string {
  const at = value.indexOf("@");
  return (at >= 0 ? value.slice(0, at) : value).toLowerCase();
}

/**
 * Whether a token's groups hold the entitlement `name`, given as OSDU's entitlements service names them
 * (`users.datalake.viewers@opendes.example.com`) or bare (`users.datalake.viewers`): compared as
 * record ACLs are, by the part before `@`, case-insensitively.
 */
export function holdsGroup(groups: readonly string[], name: string): boolean {
  return groups.some((g) => aclGroup(g) === name);
}

/** `authority:source:type:version` → OSDU's derived attributes. */
export function kindParts(kind: string): { authority: string; source: string; namespace: string; type: string } {
  const [authority = "", source = "", type = ""] = kind.split(":");
  return { authority, source, namespace: `${authority}:${source}`, type };
}

const NUMBER = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/;

/** A query value that reads as a finite JSON number (`5`, `-5`, `1.5e3`), else undefined. */
export function parseNumber(text: string): number | undefined {
  const value = NUMBER.test(text) ? Number(text) : NaN;
  return Number.isFinite(value) ? value : undefined;
}

const DATE = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?)?)?(Z|[+-]\d{2}:?\d{2})?$/i;

/**
 * ES `date_optional_time` (yyyy[-MM[-dd]]['T'HH[:mm[:ss[.fff]]]][Z|±HH:mm]) to epoch ms; missing
 * parts are the start of the period, or its end with `roundUp` (ES rounds inclusive upper bounds up).
 * `minimal` requires at least a full date (how values in records are recognized as dates).
 */
export function parseDate(text: string, options: { roundUp?: boolean; minimal?: "year" | "day" } = {}): number | undefined {
  const m = DATE.exec(text.trim());
  if (!m) return undefined;
  if ((options.minimal ?? "year") === "day" && m[3] === undefined) return undefined;
  const up = options.roundUp === true;
  const year = Number(m[1]);
  const month = m[2] !== undefined ? Number(m[2]) - 1 : up ? 11 : 0;
  if (month > 11) return undefined;
  const daysIn = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  const day = m[3] !== undefined ? Number(m[3]) : up ? daysIn : 1;
  if (day < 1 || day > daysIn) return undefined;
  const hour = m[4] !== undefined ? Number(m[4]) : up ? 23 : 0;
  const minute = m[5] !== undefined ? Number(m[5]) : up ? 59 : 0;
  const second = m[6] !== undefined ? Number(m[6]) : up ? 59 : 0;
  const ms = m[7] !== undefined ? Number(m[7].slice(0, 3).padEnd(3, "0")) : up ? 999 : 0;
  if (hour > 23 || minute > 59 || second > 60) return undefined;
  let epoch = Date.UTC(year, month, day, hour, minute, second, ms);
  const zone = m[8];
  if (zone && zone.toUpperCase() !== "Z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    epoch -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
  }
  return epoch;
}

/** A string value of a record that is a date (at least a full day, as ES's date detection): its epoch ms. */
export function dateValue(value: string): number | undefined {
  return value.length >= 10 && value.length <= 40 ? parseDate(value, { minimal: "day" }) : undefined;
}

/**
 * The analysis of short string values, per thread: kinds, legal tags, statuses, users and dates repeat across records
 * (docs/search.md#work-across-threads-in-a-bulk-load). Bounded, read with peek; the token arrays are shared and must
 * not be changed.
 */
const ANALYZED_MAX_LENGTH = 64;
const analyzedStrings = new BoundedCache<string, { tokens: string[]; date: number | undefined }>({ max: 10_000 });

function analyzed(value: string): { tokens: string[]; date: number | undefined } {
  if (value.length > ANALYZED_MAX_LENGTH) return { tokens: tokenize(value), date: dateValue(value) };
  let known = analyzedStrings.peek(value);
  if (known === undefined) analyzedStrings.set(value, (known = { tokens: tokenize(value), date: dateValue(value) }));
  return known;
}

/**
 * Field paths as one string per path and thread: records repeat their paths, and a path made anew for each
 * record is hashed anew by every Map it is looked up in (the analysis, the prefixes, the path table). Bounded:
 * past PATHS_INTERNED paths (a stream of ever new keys) the rest are made per record, as before.
 */
const PATHS_INTERNED = 10_000;
const ACL_PATHS = { viewers: "acl.viewers", owners: "acl.owners" } as const;
const childPaths = new Map<string, Map<string, string>>();
let pathsInterned = 0;

function childPath(parent: string, key: string): string {
  if (parent === "") return key;
  let children = childPaths.get(parent);
  let child = children?.get(key);
  if (child !== undefined) return child;
  child = `${parent}.${key}`;
  if (pathsInterned >= PATHS_INTERNED) return child;
  if (!children) childPaths.set(parent, (children = new Map()));
  children.set(key, child);
  pathsInterned++;
  return child;
}

export function toIndexedDoc(partition: string, key: string, record: StoredRecord): IndexedDoc {
  const parts = kindParts(record.kind);
  const doc: Record<string, unknown> = { ...record, ...parts };
  const leaves: Leaf[] = [];
  const fieldText: IndexedDoc["fieldText"] = [];
  const shapes = new Map<string, Shape>();

  const walk = (value: unknown, path: string, searchable: boolean, geoAllowed: boolean) => {
    if (value === null || value === undefined) {
      leaves.push({ path, t: LeafType.null, str: null, num: null });
      return;
    }
    if (Array.isArray(value)) {
      for (const item of value) walk(item, path, searchable, geoAllowed);
      return;
    }
    switch (typeof value) {
      case "string": {
        const { tokens, date } = analyzed(value);
        leaves.push({
          path,
          t: date !== undefined ? LeafType.date : LeafType.string,
          str: value.length <= KEYWORD_MAX ? value : null,
          num: date ?? null,
        });
        fieldText.push({ path, tokens, searchable });
        return;
      }
      case "number":
        if (!Number.isFinite(value)) return;
        leaves.push({ path, t: LeafType.number, str: String(value), num: value });
        fieldText.push({ path, tokens: tokenize(String(value)), searchable, numeric: true });
        return;
      case "boolean":
        leaves.push({ path, t: LeafType.boolean, str: String(value), num: null });
        fieldText.push({ path, tokens: [String(value)], searchable: false });
        return;
      case "object": {
        if (geoAllowed && isGeometry(value)) {
          let shape = shapes.get(path);
          if (!shape) shapes.set(path, (shape = emptyShape()));
          collectShape(value, shape);
          return;
        }
        for (const [k, v] of Object.entries(value as Record<string, unknown>)) walk(v, childPath(path, k), searchable, geoAllowed);
        return;
      }
    }
  };

  for (const [k, v] of Object.entries(doc)) {
    if (k === "acl") continue;
    walk(v, k, k === "data" || k === "tags", k === "data");
  }
  // ACL entries are keyword values (`acl.viewers:"data.x.viewers@…"`), never text or dates.
  for (const role of ["viewers", "owners"] as const) {
    for (const group of (record.acl?.[role] ?? []).map(String))
      leaves.push({ path: ACL_PATHS[role], t: LeafType.string, str: group.length <= KEYWORD_MAX ? group : null, num: null });
  }
  const out: IndexedDoc["shapes"] = [];
  for (const [path, shape] of shapes) {
    const bbox = bboxOf(shape);
    if (bbox && !isEmpty(shape)) {
      out.push({ path, shape, bbox });
      leaves.push({ path, t: LeafType.geometry, str: null, num: null });
    }
  }
  const acl = new Map<string, boolean>();
  for (const v of record.acl?.viewers ?? []) if (!acl.has(aclGroup(v))) acl.set(aclGroup(v), false);
  for (const o of record.acl?.owners ?? []) acl.set(aclGroup(o), true);
  return {
    partition,
    key,
    id: record.id,
    kind: record.kind.toLowerCase(),
    authority: parts.authority.toLowerCase(),
    doc,
    acl: [...acl].map(([group, owner]) => ({ group, owner })),
    leaves,
    fieldText,
    shapes: out,
  };
}
