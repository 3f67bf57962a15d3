/**
 * Messages of the search capability: OSDU Search v2 requests and responses, and the OSDU
 * Storage-compatible records that feed the index (stream RECORDS). The edge validates and documents
 * HTTP bodies with these schemas; the `search` and `storage` actors decode with them and then apply
 * OSDU's own rules (with OSDU's messages) in actors/search/validate.ts.
 *
 * Request objects say `additionalProperties: true` (OPEN): OSDU reads bodies with null as absent and unknown
 * fields ignored, while Elysia closes an object that leaves it unsaid, as derrick's own APIs want
 * (docs/search.md, "Bodies as OSDU reads them").
 */
import { createHash } from "node:crypto";
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { DerrickError, invalidField, type FieldError } from "./errors.ts";
import { NoContent, NoRequest, operation } from "./operation.ts";

/** Groups that may query (OSDU: members of service.search.user / service.search.admin). */
export const SEARCH_ROLES = ["users.datalake.viewers", "users.datalake.editors", "users.datalake.admins", "users.datalake.ops"] as const;
/** Group that may write records through storage. */
export const STORAGE_WRITER_GROUP = "users.datalake.editors";
/**
 * Group that may purge records (`DELETE /api/storage/v2/records/{id}`). OSDU's purge needs
 * service.storage.admin, which OSDU's entitlements bootstrap gives to users.datalake.ops only.
 */
export const STORAGE_PURGE_GROUP = "users.datalake.ops";
/** Members see every record whatever its ACL (OSDU). */
export const DATA_ROOT_GROUP = "users.data.root";

/** OSDU's text of a refused role, a 401 on search and a 403 on storage. */
export const NOT_AUTHORIZED = "The user is not authorized to perform this action";

/** `a`, `a or b`, `a, b or c`. */
const oneOf = (groups: readonly string[]) =>
  groups.length <= 1 ? groups.join("") : `${groups.slice(0, -1).join(", ")} or ${groups[groups.length - 1]}`;

/**
 * The detail of a refusal for a missing group: OSDU's text first (clients match on it), then what
 * would allow it, e.g. "…: writing records needs the group users.datalake.editors".
 */
export function missingGroupDetail(action: string, groups: readonly string[], base = NOT_AUTHORIZED): string {
  return `${base}: ${action} needs ${groups.length === 1 ? "the group" : "one of the groups"} ${oneOf(groups)}`;
}

// ---- search requests --------------------------------------------------------------------------

/**
 * Longest field path or pattern a request may name (`returnedFields`, `highlightedFields`, `spatialFilter.field`):
 * patterns are matched against every path of every result, so their length is work a request asks for; 256 as
 * `KEYWORD_MAX` (docs/search.md#limits-and-known-differences-from-osdu-on-elasticsearch).
 */
export const FIELD_PATH_MAX_LENGTH = 256;
/**
 * Longest sort field or `aggregateBy`: a path, or `nested(path, field[, min|max])` and
 * `nested(p1, nested(p1.p2, field))`, which repeat their paths, so four field paths long.
 */
export const FIELD_EXPRESSION_MAX_LENGTH = 4 * FIELD_PATH_MAX_LENGTH;
const FieldPath = Type.String({ maxLength: FIELD_PATH_MAX_LENGTH });
const FieldExpression = Type.String({ maxLength: FIELD_EXPRESSION_MAX_LENGTH });

/**
 * OSDU's 400 for a search request it cannot read or validate: "Bad Request" / "Invalid parameters were given on
 * search request", each problem in `errors` (none for a body that is not JSON). The search actor answers its
 * rules with it, the edge its schema and JSON failures on the query routes.
 */
export function invalidParameters(errors: FieldError[] = []): DerrickError {
  return new DerrickError(400, "Invalid parameters were given on search request", { type: "validation", title: "Bad Request", errors });
}

/** Options of an OSDU request object: fields it does not name are accepted (and ignored by the actors). */
const OPEN = { additionalProperties: true } as const;

/** An optional request field that also takes JSON null: OSDU (Jackson) reads null as absent. */
const Nullable = <T extends TSchema>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

export const Point = Type.Object({ latitude: Type.Number(), longitude: Type.Number() }, OPEN);
export type Point = Static<typeof Point>;
const Points = Type.Object({ points: Type.Array(Point, { maxItems: 10_000 }) }, OPEN);

export const SpatialFilter = Type.Object(
  {
    /** The record field holding the geometry, e.g. `data.SpatialLocation.Wgs84Coordinates`. */
    field: FieldPath,
    byBoundingBox: Nullable(Type.Object({ topLeft: Point, bottomRight: Point }, OPEN)),
    byDistance: Nullable(Type.Object({ point: Point, distance: Type.Number({ description: "metres" }) }, OPEN)),
    byGeoPolygon: Nullable(Points),
    /** Ignored when byBoundingBox, byDistance or byGeoPolygon is given too (OSDU applies the first of the four). */
    byIntersection: Nullable(Type.Object({ polygons: Type.Array(Points, { maxItems: 1000 }) }, OPEN)),
    /** Accepted as OSDU's model does; OSDU's current query builder ignores it, and so does derrick. */
    byWithinPolygon: Nullable(Points),
  },
  { ...OPEN, description: "Fields not named here are ignored, as OSDU ignores them" },
);
export type SpatialFilter = Static<typeof SpatialFilter>;

export const SortQuery = Type.Object(
  {
    /**
     * Required (400 "'sort.field' can not be null or empty" otherwise, as OSDU). A null entry is
     * answered by OSDU's rule ("'sort.field' list can not have null or empty values"), not the schema.
     */
    field: Nullable(Type.Array(Type.Union([FieldExpression, Type.Null()]), { maxItems: 32 })),
    /** ASC or DESC, case-insensitive. Required like `field`; a null entry is OSDU's "Not a valid order option". */
    order: Nullable(Type.Array(Type.Union([Type.String({ maxLength: FIELD_PATH_MAX_LENGTH }), Type.Null()]), { maxItems: 32 })),
    filter: Nullable(Type.Array(FieldExpression, { maxItems: 32 })),
  },
  { ...OPEN, description: "Fields not named here are ignored, as OSDU ignores them" },
);
export type SortQuery = Static<typeof SortQuery>;

/**
 * Every field takes null for absent (OSDU); a missing or null `kind` is answered by OSDU's rule, not the schema.
 * Other fields are ignored: the OSDU Python SDK sends `from`, `returnHighlightedFields` and, to the cursor route,
 * `aggregateBy`, null unless set (docs/search.md, "Bodies as OSDU reads them").
 */
const queryFields = {
  /**
   * One kind, a comma-separated list, or an array; `*` wildcards per segment. Required: missing,
   * null or empty → 400 "Record kind can't be null or empty" (OSDU's message, from the search actor).
   */
  kind: Nullable(
    Type.Union([Type.String(), Type.Array(Type.String(), { maxItems: 1000 })], {
      description: "authority:source:type:version; wildcards per segment",
    }),
  ),
  /** Lucene query-string syntax plus OSDU `nested(path, (…))`; blank = everything. */
  query: Nullable(Type.String({ maxLength: 100_000 })),
  /** 0 → 10; above 1000 → 1000. */
  limit: Nullable(Type.Integer()),
  sort: Nullable(SortQuery),
  /** Only records whose `acl.owners` hold one of the caller's groups. */
  queryAsOwner: Nullable(Type.Boolean()),
  /** Exact `totalCount` beyond 10000. */
  trackTotalCount: Nullable(Type.Boolean()),
  spatialFilter: Nullable(SpatialFilter),
  returnedFields: Nullable(Type.Array(FieldPath, { maxItems: 1000 })),
  highlightedFields: Nullable(Type.Array(FieldPath, { maxItems: 100 })),
  /** Preview in OSDU; accepted and answered with no suggestions. */
  suggestPhrase: Nullable(Type.String()),
};

export const QueryRequest = Type.Object(
  {
    ...queryFields,
    offset: Nullable(Type.Integer()),
    /** Terms aggregation on a field: `[{key, count}]`, count desc then key asc, at most 1000 buckets. */
    aggregateBy: Nullable(FieldExpression),
  },
  {
    ...OPEN,
    description:
      "OSDU QueryRequest. A null field is an absent one; fields not named here (`from`, `returnHighlightedFields`, `cursor`…) are ignored, as OSDU ignores them",
  },
);
export type QueryRequest = Static<typeof QueryRequest>;

export const CursorQueryRequest = Type.Object(
  {
    ...queryFields,
    /** The cursor of the previous page (the query it was opened with is kept with it); absent, null or "" = a first call. */
    cursor: Nullable(Type.String({ maxLength: 256 })),
  },
  {
    ...OPEN,
    description:
      "OSDU CursorQueryRequest. A null field is an absent one; fields not named here (`offset`, `aggregateBy`, `from`…) are ignored, as OSDU ignores them",
  },
);
export type CursorQueryRequest = Static<typeof CursorQueryRequest>;

export const Aggregation = Type.Object({ key: Type.String(), count: Type.Integer() });
export type Aggregation = Static<typeof Aggregation>;

export const QueryResponse = Type.Object({
  results: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  aggregations: Type.Array(Aggregation),
  phraseSuggestions: Type.Array(Type.String()),
  totalCount: Type.Integer(),
});
export type QueryResponse = Static<typeof QueryResponse>;

export const CursorQueryResponse = Type.Object({
  /** Absent on the last (empty) page. */
  cursor: Type.Optional(Type.String()),
  results: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  totalCount: Type.Integer(),
});
export type CursorQueryResponse = Static<typeof CursorQueryResponse>;

/**
 * NATS request of `derrick.search.query` and `derrick.search.cursor.query`: the HTTP body as received.
 * The actor checks it itself (QueryRequest, CursorQueryRequest), so that a NATS caller meets OSDU's 400
 * with `/body/…` pointers too, not the runtime's check of the envelope.
 */
export const SearchQueryMessage = Type.Object({ body: Type.Unknown() });
export type SearchQueryMessage = Static<typeof SearchQueryMessage>;
/** NATS request of `derrick.storage.records.put`: the HTTP body as received (checked by the actor against PutRecordsBody). */
export const RecordsPutMessage = Type.Object({ body: Type.Unknown() });
export type RecordsPutMessage = Static<typeof RecordsPutMessage>;
/** NATS request of `derrick.search.cursor.delete`. */
export const CursorRef = Type.Object({ cursor: Type.String({ maxLength: 256 }) }, { additionalProperties: false });
export type CursorRef = Static<typeof CursorRef>;

/** OSDU `VersionInfo` of GET /info. */
export const VersionInfo = Type.Object({
  groupId: Type.String(),
  artifactId: Type.String(),
  version: Type.String(),
  buildTime: Type.String(),
  branch: Type.String(),
  commitId: Type.String(),
  commitMessage: Type.String(),
  connectedOuterServices: Type.Array(Type.Object({ name: Type.String(), version: Type.String() })),
});
export type VersionInfo = Static<typeof VersionInfo>;

/** Whether one search replica follows the RECORDS stream (cheap: no index reads; the OSDU readiness check asks it). */
export const SearchHealth = Type.Object({
  /**
   * The replica is consuming RECORDS. False while it restarts its consumer after a failure (NATS,
   * JetStream or the index file): it still answers, from an index frozen at `appliedSeq`.
   */
  following: Type.Boolean(),
  /** Last RECORDS stream sequence applied to the local index (skipped messages included). */
  appliedSeq: Type.Integer(),
  /** Times the consumer was restarted after a failure since the process started. */
  restarts: Type.Integer(),
  /** Messages skipped since the process started because they could not be indexed (each logged with its subject, sequence and reason). */
  skipped: Type.Integer(),
});
export type SearchHealth = Static<typeof SearchHealth>;

/** What one search replica holds (tests and operations). */
export const SearchStatus = Type.Object({
  ...SearchHealth.properties,
  records: Type.Integer(),
  indexFile: Type.String(),
  /**
   * A bulk load (a rebuild, a long backlog) is under way, `indexing` included: answers may miss records not yet
   * loaded, and the files are no finished build until it ends.
   */
  loading: Type.Boolean(),
  /** The value indexes are being built at the end of a bulk load: queries are answered, range and keyword ones slower. */
  indexing: Type.Boolean(),
  /** The last failure that restarted the consumer. */
  lastError: Type.Optional(Type.String()),
  /** The last message skipped, and why. */
  lastSkipped: Type.Optional(Type.Object({ subject: Type.String(), seq: Type.Integer(), reason: Type.String() })),
});
export type SearchStatus = Static<typeof SearchStatus>;

// ---- records ----------------------------------------------------------------------------------

/** A record's ACL. Other fields in a request are ignored (OSDU); only these two are stored. */
export const Acl = Type.Object(
  {
    viewers: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { minItems: 1, maxItems: 100 }),
    owners: Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { minItems: 1, maxItems: 100 }),
  },
  OPEN,
);
export type Acl = Static<typeof Acl>;

/** OSDU record id: `<partition>:<type>:<id>`. */
export const RECORD_ID_PATTERN = "^[\\w\\-.]+:[\\w\\-.]+:[\\w\\-.:%]+$";
/** OSDU kind: `authority:source:type:major.minor.patch`. */
export const RECORD_KIND_PATTERN = "^[\\w\\-.]+:[\\w\\-.]+:[\\w\\-.]+:[0-9]+\\.[0-9]+\\.[0-9]+$";

/**
 * How deeply a record may nest objects and arrays (the record object is level 1, `data` level 2): above all
 * Elasticsearch, OSDU's index, would take, and far from the stack limit of every recursive pass over a record
 * (why 64: docs/search.md#records).
 */
export const RECORD_MAX_DEPTH = 64;

/**
 * The JSON pointer (RFC 6901, below `pointer`) of the first object or array nested deeper than
 * `maxDepth` levels in `value` (which is level 1), or undefined. Iterative: any depth is measured
 * without recursion, so the check itself cannot overflow the stack.
 */
export function tooDeepAt(value: unknown, maxDepth: number, pointer = ""): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (maxDepth < 1) return pointer;
  // Containers still to look into; each knows its parent and key, so a pointer is built only for
  // the one reported (building one per container cost more than the walk on wide bodies).
  type Entry = { node: object; depth: number; parent: Entry | undefined; key: string };
  const pointerOf = (entry: Entry, childKey: string) => {
    const keys = [childKey];
    for (let e: Entry | undefined = entry; e?.parent; e = e.parent) keys.push(e.key);
    return (
      pointer +
      keys
        .reverse()
        .map((k) => `/${k.replaceAll("~", "~0").replaceAll("/", "~1")}`)
        .join("")
    );
  };
  const stack: Entry[] = [{ node: value, depth: 1, parent: undefined, key: "" }];
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const { node, depth } = entry;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i];
        if (typeof child !== "object" || child === null) continue;
        if (depth >= maxDepth) return pointerOf(entry, String(i));
        stack.push({ node: child, depth: depth + 1, parent: entry, key: String(i) });
      }
    } else {
      for (const key of Object.keys(node)) {
        const child: unknown = (node as Record<string, unknown>)[key];
        if (typeof child !== "object" || child === null) continue;
        if (depth >= maxDepth) return pointerOf(entry, key);
        stack.push({ node: child, depth: depth + 1, parent: entry, key });
      }
    }
  }
  return undefined;
}

/**
 * Refuses records nested deeper than RECORD_MAX_DEPTH: a 400 naming the first field too deep
 * (`/body/<i>/data/…`). The edge checks before it serializes the body for NATS (JSON.stringify
 * overflows the stack on ~45,000 levels); the storage actor checks again for NATS callers.
 */
export function checkRecordDepth(records: readonly unknown[], pointer = "/body"): void {
  for (let i = 0; i < records.length; i++) {
    const at = tooDeepAt(records[i], RECORD_MAX_DEPTH, `${pointer}/${i}`);
    if (at !== undefined)
      throw invalidField(at, `nests objects and arrays more than ${RECORD_MAX_DEPTH} levels deep (the record itself is level 1)`);
  }
}

const Ancestry = Type.Object({ parents: Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 1000 }) });

/** What storage keeps of a written record (and what a NATS producer publishes, with `id`). */
const recordFields = {
  id: Type.Optional(Type.String({ pattern: RECORD_ID_PATTERN, maxLength: 1024 })),
  kind: Type.String({ pattern: RECORD_KIND_PATTERN, maxLength: 512 }),
  acl: Acl,
  /** Stored as given (legal tags are not checked by derrick). */
  legal: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  data: Type.Record(Type.String(), Type.Unknown()),
  ancestry: Type.Optional(Ancestry),
  tags: Type.Optional(Type.Record(Type.String(), Type.String())),
  meta: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()), { maxItems: 1000 })),
};
export const RecordBody = Type.Object(recordFields);
export type RecordBody = Static<typeof RecordBody>;

/** Numbers or text: storage's GET gives times as RFC 3339 text, OSDU's Record declares them as numbers. */
const ServerAssignedTime = Nullable(
  Type.Union([Type.String({ maxLength: 64 }), Type.Number()], { description: "server-assigned: ignored on write" }),
);

/**
 * A record as `PUT /api/storage/v2/records` takes it, read as OSDU's Record is: a null field is absent (`"id": null`
 * → an id is generated); server-assigned fields sent back from a GET and unknown fields are ignored, not stored.
 * `kind`, `acl` and `data` are required, as OSDU's validators require them.
 */
export const RecordInput = Type.Object(
  {
    id: Nullable(recordFields.id),
    kind: recordFields.kind,
    acl: Acl,
    legal: Nullable(recordFields.legal),
    data: recordFields.data,
    ancestry: Nullable(Type.Object({ parents: Nullable(Ancestry.properties.parents) }, OPEN)),
    tags: Nullable(recordFields.tags),
    meta: Nullable(recordFields.meta),
    /** Server-assigned (each write gets a new one): ignored on write. */
    version: Nullable(Type.Union([Type.Integer(), Type.String({ maxLength: 64 })], { description: "server-assigned: ignored on write" })),
    createUser: Nullable(Type.String({ maxLength: 1024, description: "server-assigned: ignored on write" })),
    createTime: ServerAssignedTime,
    modifyUser: Nullable(Type.String({ maxLength: 1024, description: "server-assigned: ignored on write" })),
    modifyTime: ServerAssignedTime,
  },
  {
    ...OPEN,
    description:
      "OSDU Record. A null field is an absent one; version, createUser, createTime, modifyUser, modifyTime and fields not named here are ignored, as OSDU ignores them",
  },
);
export type RecordInput = Static<typeof RecordInput>;

export const PutRecordsBody = Type.Array(RecordInput, { minItems: 1, maxItems: 500 });
export type PutRecordsBody = Static<typeof PutRecordsBody>;

/**
 * What storage keeps of a record as written: the fields of RecordBody that hold a value (null is
 * absent); server-assigned and unknown fields are dropped. `ancestry` without parents is dropped.
 */
export function recordBodyOf(input: RecordInput): RecordBody {
  const { id, kind, acl, legal, data, ancestry, tags, meta } = input;
  return {
    ...(id != null ? { id } : {}),
    kind,
    acl: { viewers: acl.viewers, owners: acl.owners },
    ...(legal != null ? { legal } : {}),
    data,
    ...(ancestry?.parents != null ? { ancestry: { parents: ancestry.parents } } : {}),
    ...(tags != null ? { tags } : {}),
    ...(meta != null ? { meta } : {}),
  };
}

/** A record as stored on the RECORDS stream and returned by GET. */
export const StoredRecord = Type.Object({
  ...recordFields,
  id: Type.String(),
  /** Microseconds since the epoch of this write: increases on every write of the record. */
  version: Type.Integer(),
  createUser: Type.String(),
  createTime: Type.String(),
  modifyUser: Type.Optional(Type.String()),
  modifyTime: Type.Optional(Type.String()),
});
export type StoredRecord = Static<typeof StoredRecord>;

export const PutRecordsResponse = Type.Object({
  recordCount: Type.Integer(),
  recordIds: Type.Array(Type.String()),
  /** `<id>:<version>` */
  recordIdVersions: Type.Array(Type.String()),
  skippedRecordIds: Type.Array(Type.String()),
});
export type PutRecordsResponse = Static<typeof PutRecordsResponse>;

export const RecordRef = Type.Object({ id: Type.String({ maxLength: 1024 }) }, { additionalProperties: false });
export type RecordRef = Static<typeof RecordRef>;

/** Reply of `derrick.storage.health` (the storage readiness check asks it). */
export const StorageHealth = Type.Object({
  /** Messages on the RECORDS stream (latest versions, deletion marks and purge marks). */
  records: Type.Integer(),
});
export type StorageHealth = Static<typeof StorageHealth>;

/** The RECORDS stream: last value per record subject, so it replays as a table. */
export const RECORDS_STREAM = "RECORDS";
/**
 * A record message with this header value, or an empty body, deletes the record. storage's logical
 * delete (`POST …/{id}:delete`) keeps the last version as the body of that message (OSDU keeps a
 * deleted record until it is purged: its owners may still purge it); a purge leaves an empty one.
 */
export const RECORD_OPERATION_HEADER = "Derrick-Record-Operation";
export const RECORD_DELETE = "delete";

/** Hex SHA-1 of the record id: the last token of the record's subject (docs/contract.md). */
export function recordKey(id: string): string {
  return createHash("sha1").update(id).digest("hex");
}

// ---- operations -------------------------------------------------------------------------------

export const searchQuery = operation("search", "query", { request: SearchQueryMessage, reply: QueryResponse });
export const searchCursorQuery = operation("search", "cursor.query", { request: SearchQueryMessage, reply: CursorQueryResponse });
/** Answers 200 with an empty body (OSDU's). */
export const searchCursorDelete = operation("search", "cursor.delete", { request: CursorRef, reply: NoContent });
export const searchInfo = operation("search", "info", { request: NoRequest, reply: VersionInfo });
export const searchStatus = operation("search", "status", { request: NoRequest, reply: SearchStatus });
export const searchHealth = operation("search", "health", { request: NoRequest, reply: SearchHealth });

export const storageRecordsPut = operation("storage", "records.put", { request: RecordsPutMessage, reply: PutRecordsResponse });
export const storageRecordsGet = operation("storage", "records.get", { request: RecordRef, reply: StoredRecord });
export const storageRecordsDelete = operation("storage", "records.delete", { request: RecordRef, reply: NoContent });
export const storageRecordsPurge = operation("storage", "records.purge", { request: RecordRef, reply: NoContent });
export const storageHealth = operation("storage", "health", { request: NoRequest, reply: StorageHealth });
