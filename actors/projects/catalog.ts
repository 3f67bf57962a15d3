/**
 * The catalog of display items and key parameters: the JSON file shipped in the repo (or
 * DERRICK_CATALOG_FILE), overlaid with admin additions kept in JetStream KV so every process serves
 * the same list. Reads are answered from memory; paging and the category filter are pure functions.
 */
import { BoundedCache } from "../../platform/bounded-cache.ts";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Value } from "@sinclair/typebox/value";
import {
  CATALOG_DEFAULT_LIMIT,
  CATALOG_MAX_LIMIT,
  CatalogFile,
  CatalogKind,
  type CatalogItem,
  type CatalogPage,
  type CatalogQuery,
} from "../../subjects/projects.ts";
import { EncodedJson, invalidField, quoteValue } from "../../subjects/index.ts";

export const DEFAULT_CATALOG_FILE = fileURLToPath(new URL("./catalog.json", import.meta.url));

/** Reads and validates a catalog file; the first problem stops start-up with the file and pointer named. */
export function readCatalogFile(path: string = DEFAULT_CATALOG_FILE): CatalogFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new Error(`catalog ${path}: ${(error as Error).message}`);
  }
  const first = Value.Errors(CatalogFile, parsed).First();
  if (first) throw new Error(`catalog ${path}: ${first.path || "/"} ${first.message}`);
  const file = parsed as CatalogFile;
  for (const [list, items] of [
    ["displayItems", file.displayItems],
    ["keyParameters", file.keyParameters],
  ] as const) {
    const seen = new Set<string>();
    for (const item of items) {
      if (seen.has(item.id)) throw new Error(`catalog ${path}: /${list} has the id "${item.id}" twice`);
      seen.add(item.id);
    }
  }
  return file;
}

/** One catalog (display items or key parameters): the file's items in file order, additions after. */
export class CatalogList {
  private readonly base: Map<string, CatalogItem>;
  private readonly added = new Map<string, { item: CatalogItem; revision: number }>();
  private ordered: CatalogItem[] | undefined;
  /** Pages as sent, by query, until the list changes: a catalog is read far more often than it changes. */
  private readonly pages = new BoundedCache<string, EncodedJson<CatalogPage>>({ max: MAX_PAGES_HELD });

  constructor(items: readonly CatalogItem[]) {
    this.base = new Map(items.map((item) => [item.id, item]));
  }

  /** Applies an addition or replacement seen in KV; older revisions than the one held are ignored. */
  apply(item: CatalogItem, revision: number): void {
    const held = this.added.get(item.id);
    if (held && held.revision >= revision) return;
    this.added.set(item.id, { item, revision });
    this.changed();
  }

  /** Forgets the additions (their bucket was made again: its revisions start over); the file's items stay. */
  resetAdditions(): void {
    this.added.clear();
    this.changed();
  }

  /** The page a query asks for, as JSON (400 naming a bad parameter). */
  page(query: CatalogQuery): EncodedJson<CatalogPage> {
    const parsed = catalogQuery(query);
    const key = `${parsed.offset}|${parsed.limit}|${parsed.category ?? ""}`;
    let page = this.pages.get(key);
    if (!page) this.pages.set(key, (page = new EncodedJson(encoder.encode(JSON.stringify(pageOf(this.all(), parsed))), true)));
    return page;
  }

  private changed(): void {
    this.ordered = undefined;
    this.pages.clear();
  }

  get(id: string): CatalogItem | undefined {
    return this.added.get(id)?.item ?? this.base.get(id);
  }

  has(id: string): boolean {
    return this.added.has(id) || this.base.has(id);
  }

  get size(): number {
    return this.all().length;
  }

  /** Stable order: file items (replaced in place), then additions sorted by id. */
  all(): CatalogItem[] {
    if (!this.ordered) {
      const fromFile = [...this.base.keys()].map((id) => this.get(id)!);
      const extra = [...this.added.keys()]
        .filter((id) => !this.base.has(id))
        .sort()
        .map((id) => this.added.get(id)!.item);
      this.ordered = [...fromFile, ...extra];
    }
    return this.ordered;
  }
}

export type Catalog = Record<CatalogKind, CatalogList>;

export function catalogFrom(file: CatalogFile): Catalog {
  return {
    [CatalogKind.displayItems]: new CatalogList(file.displayItems),
    [CatalogKind.keyParameters]: new CatalogList(file.keyParameters),
  };
}

/** A whole-number query parameter, `fallback` when absent; 400 naming the parameter otherwise. */
export function nonNegativeInteger(raw: string | undefined, pointer: string, fallback: number, max?: number, min = 0): number {
  if (raw === undefined || raw === "") return fallback;
  const accepted = max === undefined ? `a whole number from ${min}` : `a whole number from ${min} to ${max}`;
  if (!/^\d{1,9}$/.test(raw.trim())) throw invalidField(pointer, `${quoteValue(raw)} is not a whole number; accepted: ${accepted}`);
  const value = Number(raw.trim());
  if (value < min) throw invalidField(pointer, `${value} must be at least ${min}`);
  if (max !== undefined && value > max) throw invalidField(pointer, `${value} must be at most ${max}`);
  return value;
}

/** Pages and filters a catalog: `total` counts after the category filter. */
export function pageCatalog(items: readonly CatalogItem[], query: CatalogQuery): CatalogPage {
  return pageOf(items, catalogQuery(query));
}

type ParsedQuery = { offset: number; limit: number; category: string | undefined };

function catalogQuery(query: CatalogQuery): ParsedQuery {
  const offset = nonNegativeInteger(query.offset, "/query/offset", 0);
  const limit = nonNegativeInteger(query.limit, "/query/limit", CATALOG_DEFAULT_LIMIT, CATALOG_MAX_LIMIT, 1);
  return { offset, limit, category: query.category?.trim() || undefined };
}

function pageOf(items: readonly CatalogItem[], { offset, limit, category }: ParsedQuery): CatalogPage {
  const filtered = category ? items.filter((item) => item.category === category) : items;
  return { items: filtered.slice(offset, offset + limit), total: filtered.length, offset, limit };
}

/** Distinct page queries held per list, the least recently read going first (queries are few: offsets, limits, categories). */
const MAX_PAGES_HELD = 256;
const encoder = new TextEncoder();
