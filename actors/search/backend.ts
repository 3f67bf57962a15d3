/**
 * The seam between the API layer and an engine. Handlers validate an OSDU request, parse the query
 * to the AST and build a SearchRequest; a backend answers it. The embedded default is SQLite
 * (sqlite.ts); an OpenSearch backend for deployments that outgrow one machine implements the same
 * interface (AST → query DSL mapping in docs/search.md) and nothing above it changes.
 */
import type { Aggregation } from "../../subjects/search.ts";
import type { IndexedDoc } from "./documents.ts";
import type { PreparedParts, PreparedRecord } from "./prepared.ts";
import type { Area, Position } from "./geo.ts";
import type { QueryNode } from "./query/ast.ts";

export type GeoFilter =
  | { field: string; relation: "within"; area: Area }
  | { field: string; relation: "intersects"; polygons: Position[][][] };

export type SortKey = { field: string; order: "asc" | "desc"; mode?: "min" | "max" };
export type SortValue = string | number | null;

/** Who may see what: everything (users.data.root), or records sharing a group with the caller. */
export type Access = { all: true } | { all: false; groups: readonly string[]; asOwner: boolean };

export type SearchRequest = {
  partition: string;
  /** Lowercased kind patterns (`*` per segment). */
  kinds: string[];
  query: QueryNode;
  spatial?: GeoFilter;
  access: Access;
  sort: SortKey[];
  offset: number;
  limit: number;
  /** Count past 10000 (else the count stops there, as ES's track_total_hits default). */
  trackTotalCount: boolean;
  /** Skip counting (later cursor pages reuse the first page's count). */
  skipCount?: boolean;
  aggregateBy?: string;
  /** `aggregateBy` came from `nested(path, field)`: count the array's elements holding each term (ES counts nested documents), not the records. */
  aggregateElements?: boolean;
  /**
   * Cursor order: the sort keys, then the record id (stable on every replica). `after` holds the
   * last row's sort values followed by its id; rows strictly after it are returned.
   */
  keyset?: { after?: SortValue[] };
};

export type SearchHit = {
  doc: Record<string, unknown>;
  /** The document's JSON as stored, when the backend keeps it so: a reply of whole documents writes it as it is. */
  json?: string;
  /** The row's sort values followed by its id (for cursors). */
  position: SortValue[];
};

export type SearchResult = { hits: SearchHit[]; total: number; aggregations: Aggregation[] };

/** One change from the RECORDS stream. */
export type RecordChange =
  | { op: "upsert"; doc: IndexedDoc }
  | { op: "delete"; partition: string; key: string }
  /** An upsert already prepared (prepared.ts), for a backend that takes them (`takesPrepared`); its lookup rows are part `part` of the batch's PreparedParts. */
  | { op: "prepared"; record: PreparedRecord; part: number };

export interface SearchBackend {
  /** Engine name and version, for GET /info's connectedOuterServices. */
  readonly engine: { name: string; version: string };
  /** Applies changes and records `seq` as the last applied stream sequence, atomically. `parts`: the lookup rows of `prepared` changes. */
  apply(changes: RecordChange[], seq: number, parts?: PreparedParts): void;
  appliedSeq(): number;
  /** An identity of the stream the index was built from (its creation time); a different one means rebuild. */
  streamIdentity(): string | undefined;
  reset(streamIdentity: string): void | Promise<void>;
  /** Optional: faster loading of a large backlog (indexes built once at the end; nothing is applied until it settles). */
  bulkLoad?(on: boolean): Promise<void>;
  /** Optional: takes `prepared` changes; the replica then decodes and prepares records in a worker during a bulk load. */
  readonly takesPrepared?: boolean;
  /** Optional: a promise to wait for before applying more, while the backend is behind on what it was given. */
  backpressure?(): Promise<void> | undefined;
  search(request: SearchRequest): SearchResult;
  /**
   * Optional: a number that changes whenever search() may answer differently (a change applied, a reset, a bulk
   * load's start and end); undefined while answers may change without it (a bulk load's worker writing behind).
   * Replies are cached per version (reply-cache.ts); a backend without it is never cached.
   */
  resultsVersion?(): number | undefined;
  recordCount(): number;
  close(): void;
}
