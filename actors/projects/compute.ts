/**
 * The pure part of the capability: checking project values against the catalog, computing a
 * content from a project's values, and cutting a large content into parts. No I/O, so the bench's
 * in-process baseline and the worker run exactly the same code.
 */
import { invalidField, type Principal } from "../../subjects/index.ts";
import {
  CatalogKind,
  PART_MAX_BYTES,
  type CatalogItem,
  type ContentItem,
  type Project,
  type ProjectValues,
} from "../../subjects/projects.ts";
import type { Catalog, CatalogList } from "./catalog.ts";

const MAX_STRING = 4096;
const MAX_TABLE_ROWS = 100_000;
const MAX_TABLE_COLUMNS = 64;
const DATE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/**
 * An RFC 3339 full-date or date-time naming a day that exists. `Date.parse` alone is not enough: it
 * rolls impossible days over (2026-02-30 parses as 2 March), so the day is checked against the
 * calendar, and the time fields against their ranges.
 */
export function isRfc3339Date(text: string): boolean {
  const m = DATE.exec(text);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return false;
  if (m[4] !== undefined && (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 60)) return false; // 60: a leap second (RFC 3339 5.6)
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return false;
  return true;
}

/** The value field's key in a project for each catalog. */
export const VALUE_FIELD = { [CatalogKind.displayItems]: "displayItems", [CatalogKind.keyParameters]: "keyParameters" } as const;

/** Why a value does not fit its item's data type, or undefined when it does. */
export function valueProblem(item: CatalogItem, value: unknown): string | undefined {
  if (value === null) return undefined; // explicit "not known yet"
  switch (item.dataType) {
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? undefined : "must be a finite number";
    case "integer":
      return Number.isSafeInteger(value) ? undefined : "must be an integer";
    case "string":
      return typeof value === "string" && value.length <= MAX_STRING ? undefined : `must be a string of at most ${MAX_STRING} characters`;
    case "boolean":
      return typeof value === "boolean" ? undefined : "must be true or false";
    case "date":
      return typeof value === "string" && isRfc3339Date(value) ? undefined : "must be an RFC 3339 date or date-time";
    case "table":
      return tableProblem(value);
  }
}

function tableProblem(value: unknown): string | undefined {
  if (!Array.isArray(value)) return "must be an array of rows (objects)";
  if (value.length > MAX_TABLE_ROWS) return `must have at most ${MAX_TABLE_ROWS} rows`;
  for (let i = 0; i < value.length; i++) {
    const row = value[i] as unknown;
    if (typeof row !== "object" || row === null || Array.isArray(row)) return `row ${i} must be an object`;
    const cells = Object.entries(row);
    if (cells.length > MAX_TABLE_COLUMNS) return `row ${i} has more than ${MAX_TABLE_COLUMNS} columns`;
    for (const [column, cell] of cells) {
      if (cell !== null && !["string", "number", "boolean"].includes(typeof cell))
        return `row ${i} column ${column} must be a string, number, boolean or null`;
      if (typeof cell === "number" && !Number.isFinite(cell)) return `row ${i} column ${column} must be finite`;
    }
  }
  return undefined;
}

/** Whether every item a project body has a value for is in the catalog. */
export function knowsEveryItem(values: ProjectValues | undefined, catalog: Catalog): boolean {
  return Object.values(CatalogKind).every((kind) => Object.keys(values?.[VALUE_FIELD[kind]] ?? {}).every((id) => catalog[kind].has(id)));
}

/** Checks every value of a project body against the catalog; the 400 names the value by pointer. */
export function checkValues(values: ProjectValues | undefined, catalog: Catalog): Project["values"] {
  // Keyed by item ids, which callers choose: null-prototype maps, so an id such as `__proto__` is a
  // key like any other (on a plain object that assignment would set the prototype, and be lost).
  const out: Project["values"] = {
    displayItems: Object.create(null) as Record<string, unknown>,
    keyParameters: Object.create(null) as Record<string, unknown>,
  };
  for (const kind of Object.values(CatalogKind)) {
    const field = VALUE_FIELD[kind];
    for (const [id, value] of Object.entries(values?.[field] ?? {})) {
      const pointer = `/body/values/${field}/${id.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      const item = catalog[kind].get(id);
      if (!item) throw invalidField(pointer, `is not a known ${kind === CatalogKind.displayItems ? "display item" : "key parameter"}`);
      const problem = valueProblem(item, value);
      if (problem) throw invalidField(pointer, `${problem} (dataType ${item.dataType})`);
      out[field][id] = value;
    }
  }
  return out;
}

/** A member is named by client id or by user subject. */
export function isMember(project: Pick<Project, "members">, who: Pick<Principal, "clientId" | "subject">): boolean {
  return project.members.includes(who.clientId) || project.members.includes(who.subject);
}

type ColumnSummary = { min: number; max: number; mean: number; count: number };

/** Row count and numeric statistics per column: what a planning display shows above a table. */
export function summarizeTable(rows: ReadonlyArray<Record<string, unknown>>): { rows: number; columns: Record<string, ColumnSummary> } {
  const sums = new Map<string, { min: number; max: number; sum: number; count: number }>();
  for (const row of rows) {
    for (const [column, cell] of Object.entries(row)) {
      if (typeof cell !== "number") continue;
      const s = sums.get(column);
      if (!s) sums.set(column, { min: cell, max: cell, sum: cell, count: 1 });
      else {
        if (cell < s.min) s.min = cell;
        if (cell > s.max) s.max = cell;
        s.sum += cell;
        s.count++;
      }
    }
  }
  // Column names come from the rows: a null-prototype map keeps one named `__proto__` (a plain object's
  // assignment would set its prototype instead, and the column would vanish from the summary).
  const columns = Object.create(null) as Record<string, ColumnSummary>;
  for (const [column, s] of sums) columns[column] = { min: s.min, max: s.max, mean: s.sum / s.count, count: s.count };
  return { rows: rows.length, columns };
}

/**
 * The content of one request: for each requested item (catalog order; all items when `ids` is
 * absent) the catalog facts, the project's value and a table summary.
 * Throws when an id is no longer in the catalog (the caller turns that into a failed task).
 */
export function computeContent(project: Project, list: CatalogList, kind: CatalogKind, ids?: readonly string[]): ContentItem[] {
  const values = project.values[VALUE_FIELD[kind]];
  let items: CatalogItem[];
  if (ids) {
    items = ids.map((id) => {
      const item = list.get(id);
      if (!item) throw new Error(`the item ${id} is no longer in the ${kind} catalog`);
      return item;
    });
  } else items = list.all();
  return items.map((item) => {
    const has = Object.hasOwn(values, item.id) && values[item.id] !== null;
    const value = has ? values[item.id] : null;
    return {
      id: item.id,
      name: item.name,
      category: item.category,
      dataType: item.dataType,
      ...(item.unit ? { unit: item.unit } : {}),
      status: has ? "set" : "missing",
      value,
      ...(has && item.dataType === "table" ? { summary: summarizeTable(value as Array<Record<string, unknown>>) } : {}),
    } satisfies ContentItem;
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Cuts a text into slices of at most `maxBytes` UTF-8 bytes, never inside a character, so each
 * slice is valid text and their concatenation is the original.
 */
export function splitUtf8(text: string, maxBytes: number = PART_MAX_BYTES): string[] {
  const bytes = encoder.encode(text);
  if (bytes.length <= maxBytes) return [text];
  const out: string[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = Math.min(start + maxBytes, bytes.length);
    // Back off continuation bytes (10xxxxxx) so a multi-byte character stays whole.
    while (end < bytes.length && end > start && (bytes[end]! & 0xc0) === 0x80) end--;
    out.push(decoder.decode(bytes.subarray(start, end)));
    start = end;
  }
  return out;
}

export const utf8Length = (text: string) => encoder.encode(text).length;
