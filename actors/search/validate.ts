/**
 * OSDU's request rules for /query and /query_with_cursor, with OSDU's messages (core-lib-common
 * validators, QueryUtils, SortParserUtil, SpatialFilterValidator, GeoQueryBuilder), turned into a
 * backend-neutral plan. Every failure is collected and answered once: 400 "Invalid parameters were
 * given on search request" with one `errors` entry per rule, each naming its field by JSON pointer.
 * JSON null stands for an absent field, as Jackson reads it for OSDU.
 */
import type { Static, TSchema } from "@sinclair/typebox";
import { DerrickError, check, type FieldError } from "../../subjects/index.ts";
import { invalidParameters, type CursorQueryRequest, type Point, type QueryRequest, type SpatialFilter } from "../../subjects/search.ts";
import type { GeoFilter, SortKey } from "./backend.ts";
import type { Position } from "./geo.ts";
import { parseQuery, QuerySyntaxError } from "./query/parser.ts";
import type { QueryNode } from "./query/ast.ts";

export { invalidParameters };

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 1000;
export const MAX_RESULT_WINDOW = 10_000;
export const MAX_KIND_LENGTH = 3840;
/** OSDU KindParser / MultiKindValidator. */
const KIND_FORMAT = /^[\w\-.*]+:[\w\-.*]+:[\w\-.*]+:[(\d+.)+(\d+.)+(\d+)*]+$/;

/** A validated request, JSON-serializable (a cursor keeps it in KV). */
export type SearchPlan = {
  kinds: string[];
  query: string;
  offset: number;
  limit: number;
  sort: SortKey[];
  queryAsOwner: boolean;
  trackTotalCount: boolean;
  spatial?: GeoFilter;
  aggregateBy?: string;
  /** `aggregateBy` is a `nested(…)` aggregation: its buckets count elements, as ES's nested aggregation does. */
  aggregateNested?: boolean;
  returnedFields: string[];
  highlightedFields: string[];
};

export function malformedQuery(error: QuerySyntaxError): DerrickError {
  return new DerrickError(400, error.message, {
    type: "malformed-query",
    title: "Malformed query",
    errors: [{ pointer: "/body/query", message: `${error.message}` }],
    extensions: { position: error.position },
  });
}

/** The body typed by its schema; a type error is answered in OSDU's framing like the rules below. */
export function decodeSearchBody<T extends TSchema>(schema: T, body: unknown): Static<T> {
  try {
    return check(schema, body);
  } catch (error) {
    if (error instanceof DerrickError && error.status === 400 && error.errors) throw invalidParameters(error.errors);
    throw error;
  }
}

/** Parses the query string, answering 400 "Malformed query" with the position. */
export function parsePlanQuery(query: string): QueryNode {
  try {
    return parseQuery(query);
  } catch (error) {
    if (error instanceof QuerySyntaxError) throw malformedQuery(error);
    throw error;
  }
}

function kinds(value: unknown, errors: FieldError[]): string[] {
  const pointer = "/body/kind";
  if (value === undefined || value === null || value === "" || (Array.isArray(value) && value.length === 0)) {
    errors.push({ pointer, message: "Record kind can't be null or empty" });
    return [];
  }
  let list: string[];
  // Split on the comma and trim below: `split(/\s*,\s*/)` took quadratic time on a long run of spaces (100,000: 3 s).
  // As Java's String.split (OSDU's KindParser), trailing empty entries are dropped; any other empty entry is a bad kind.
  const entries = (text: string) => {
    const parts = text.split(",").map((k) => k.trim());
    while (parts.length > 0 && parts[parts.length - 1] === "") parts.pop();
    return parts;
  };
  if (typeof value === "string") list = entries(value);
  else if (Array.isArray(value) && value.every((k) => typeof k === "string")) list = value.flatMap((k: string) => entries(k));
  else {
    errors.push({ pointer, message: "Not a valid record kind type" });
    return [];
  }
  if (list.length === 0) errors.push({ pointer, message: "Record kind can't be null or empty" });
  // OSDU's MultiKindValidator stops at the first bad kind and names the kind as given (a list as Java
  // prints it: `[a, b]`); cut at MAX_KIND_LENGTH characters so a huge kind is not echoed whole.
  else if (list.some((kind) => !KIND_FORMAT.test(kind))) {
    const given = typeof value === "string" ? value : `[${(value as string[]).join(", ")}]`;
    errors.push({
      pointer,
      message: `Not a valid record kind format. Found: ${given.length > MAX_KIND_LENGTH ? `${given.slice(0, MAX_KIND_LENGTH)}…` : given}`,
    });
  } else if (list.join(",").length > MAX_KIND_LENGTH)
    errors.push({ pointer, message: `The kind length exceeds the maximum of ${MAX_KIND_LENGTH} characters` });
  return [...new Set(list.map((k) => k.toLowerCase()))];
}

function checkPoint(point: Point, pointer: string, errors: FieldError[]): Position {
  if (!(point.latitude >= -90 && point.latitude <= 90))
    errors.push({ pointer: `${pointer}/latitude`, message: "'latitude' value is out of the range [-90, 90]" });
  if (!(point.longitude >= -180 && point.longitude <= 180))
    errors.push({ pointer: `${pointer}/longitude`, message: "'longitude' value is out of the range [-180, 180]" });
  return [point.longitude, point.latitude];
}

const samePoint = (a: Position, b: Position) => a[0] === b[0] && a[1] === b[1];

/**
 * A coordinate as OSDU's messages print it (Java's `String.format("%s", double)`, i.e.
 * `Double.toString`): always a fraction (`10.0`), scientific below 10^-3 and from 10^7 (`1.0E-4`).
 * Clients compare these messages verbatim (OSDU's acceptance tests do).
 */
export function javaDouble(n: number): string {
  if (!Number.isFinite(n)) return Number.isNaN(n) ? "NaN" : n > 0 ? "Infinity" : "-Infinity";
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const abs = Math.abs(n);
  if (abs >= 1e-3 && abs < 1e7) {
    const text = String(n);
    return text.includes(".") ? text : `${text}.0`;
  }
  const [mantissa, exponent] = n.toExponential().split("e") as [string, string];
  return `${mantissa.includes(".") ? mantissa : `${mantissa}.0`}E${exponent.replace("+", "")}`;
}

function spatial(filter: SpatialFilter, errors: FieldError[]): GeoFilter | undefined {
  const base = "/body/spatialFilter";
  const before = errors.length;
  if (!filter.field?.trim()) errors.push({ pointer: `${base}/field`, message: "'spatialFilter.field' can not be null or empty" });
  // OSDU checks only these three against each other; byIntersection beside one of them is ignored
  // (its GeoQueryBuilder applies the first of byBoundingBox, byDistance, byGeoPolygon, byIntersection, as below).
  const exclusive = (["byBoundingBox", "byDistance", "byGeoPolygon"] as const).filter((k) => filter[k] != null);
  if (exclusive.length > 1) errors.push({ pointer: base, message: "only one criteria can be used with SpatialFilter" });
  // None of the criteria: OSDU's validator accepts it and its GeoQueryBuilder adds no geo query (falls through to undefined below).
  // byWithinPolygon: OSDU's validator range-checks its points, though its query builder applies nothing for it.
  filter.byWithinPolygon?.points.forEach((pt, i) => checkPoint(pt, `${base}/byWithinPolygon/points/${i}`, errors));
  if (errors.length > before) return undefined;
  const field = filter.field.trim();
  if (filter.byBoundingBox) {
    const p = `${base}/byBoundingBox`;
    const [left, top] = checkPoint(filter.byBoundingBox.topLeft, `${p}/topLeft`, errors);
    const [right, bottom] = checkPoint(filter.byBoundingBox.bottomRight, `${p}/bottomRight`, errors);
    if (errors.length > before) return undefined;
    const [t, b, l, r] = [top, bottom, left, right].map(javaDouble);
    // Only the first that applies, in this order, as OSDU's SpatialFilterValidator (an else-if chain).
    const corners =
      top < bottom
        ? `top corner is below bottom corner: ${t} vs. ${b}`
        : left > right
          ? `left corner and right corner are flipped: ${l} vs. ${r}`
          : top === bottom
            ? `top latitude cannot be the same as bottom latitude: ${t} == ${b}`
            : left === right
              ? `left longitude cannot be the same as right longitude: ${l} == ${r}`
              : undefined;
    if (corners) errors.push({ pointer: p, message: corners });
    return errors.length > before
      ? undefined
      : { field, relation: "within", area: { type: "box", box: { minX: left, maxX: right, minY: bottom, maxY: top } } };
  }
  if (filter.byDistance) {
    const p = `${base}/byDistance`;
    const center = checkPoint(filter.byDistance.point, `${p}/point`, errors);
    if (!(filter.byDistance.distance > 0)) errors.push({ pointer: `${p}/distance`, message: "'distance' must be greater than 0" });
    return errors.length > before
      ? undefined
      : { field, relation: "within", area: { type: "circle", center, radiusM: filter.byDistance.distance } };
  }
  if (filter.byGeoPolygon) {
    const p = `${base}/byGeoPolygon/points`;
    const ring = filter.byGeoPolygon.points.map((pt, i) => checkPoint(pt, `${p}/${i}`, errors));
    if (errors.length > before) return undefined;
    const closed = ring.length > 1 && samePoint(ring[0]!, ring[ring.length - 1]!);
    if (ring.length < (closed ? 4 : 3)) {
      errors.push({ pointer: p, message: "too few points defined for geo polygon query" });
      return undefined;
    }
    // Auto-closed, as OSDU's GeoQueryBuilder does.
    return { field, relation: "within", area: { type: "polygon", polygon: [closed ? ring : [...ring, ring[0]!]] } };
  }
  if (filter.byIntersection) {
    const p = `${base}/byIntersection/polygons`;
    if (filter.byIntersection.polygons.length === 0) errors.push({ pointer: p, message: "at least one polygon is required" });
    const polygons = filter.byIntersection.polygons.map((poly, i) => {
      const ring = poly.points.map((pt, j) => checkPoint(pt, `${p}/${i}/points/${j}`, errors));
      if (ring.length < 4) errors.push({ pointer: `${p}/${i}/points`, message: "Polygons must have at least 4 points" });
      else if (!samePoint(ring[0]!, ring[ring.length - 1]!))
        errors.push({ pointer: `${p}/${i}/points`, message: "The first point must match the last point to close the polygon" });
      return [ring];
    });
    return errors.length > before ? undefined : { field, relation: "intersects", polygons };
  }
  // byWithinPolygon alone: in OSDU's model, ignored by its current query builder (no filter added).
  return undefined;
}

/** `nested(`, the path and its comma: fixed text and classes that exclude each other, so nothing to backtrack. */
const NESTED_HEAD = /^nested\s*\(\s*([^,\s()]+)\s*,\s*/i;
const LINE_TERMINATOR = /[\n\r\u2028\u2029]/;

/**
 * `nested(path, field[, min|max])` (sort) or `nested(path, field)` / `nested(p1, nested(p2, field))`
 * (aggregation), read by hand in one pass as the lazy RegExp it replaces read it, without its cubic time
 * (docs/search.md#patterns-from-callers).
 */
export function nestedField(text: string): { field: string; mode?: "min" | "max" } | undefined {
  const s = text.trim();
  const head = NESTED_HEAD.exec(s);
  if (!head || !s.endsWith(")")) return undefined;
  const body = s.slice(head[0].length, -1).trimEnd();
  let inner = body;
  let mode: "min" | "max" | undefined;
  const last = body.slice(-3).toLowerCase();
  if (last === "min" || last === "max") {
    const beforeMode = body.slice(0, -3).trimEnd();
    const candidate = beforeMode.endsWith(",") ? beforeMode.slice(0, -1).trimEnd() : "";
    if (candidate) {
      inner = candidate;
      mode = last;
    }
  }
  if (!inner || LINE_TERMINATOR.test(inner)) return undefined;
  if (/^nested\s*\(/i.test(inner)) {
    const deeper = nestedField(inner);
    return deeper ? { field: deeper.field, ...(mode ? { mode } : {}) } : undefined;
  }
  if (!/^[\w.-]+$/.test(inner)) return undefined;
  return { field: `${head[1]}.${inner}`, ...(mode ? { mode } : {}) };
}

function sort(value: QueryRequest["sort"], errors: FieldError[]): SortKey[] {
  if (!value) return [];
  const base = "/body/sort";
  const before = errors.length;
  const fields = value.field ?? [];
  const orders = value.order ?? [];
  if (fields.length === 0) errors.push({ pointer: `${base}/field`, message: "'sort.field' can not be null or empty" });
  if (orders.length === 0) errors.push({ pointer: `${base}/order`, message: "'sort.order' can not be null or empty" });
  if (errors.length > before) return [];
  if (fields.length !== orders.length) errors.push({ pointer: base, message: "'sort.field' and 'sort.order' size do not match" });
  fields.forEach((f, i) => {
    if (!f?.trim()) errors.push({ pointer: `${base}/field/${i}`, message: "'sort.field' list can not have null or empty values" });
  });
  orders.forEach((o, i) => {
    if (!/^(asc|desc)$/i.test(o ?? ""))
      errors.push({ pointer: `${base}/order/${i}`, message: "Not a valid order option. It can only be either 'ASC' or 'DESC'" });
  });
  if (value.filter?.some((f) => f?.trim()))
    errors.push({ pointer: `${base}/filter`, message: "sort filters are not supported by this search service" });
  if (errors.length > before) return [];
  const keys: SortKey[] = [];
  fields.forEach((raw, i) => {
    // Null entries were refused above.
    const order = orders[i]!.toLowerCase() as "asc" | "desc";
    const f = raw!.trim();
    if (f === "_score") return; // relevance is not scored by the embedded engine: a no-op key
    if (/^nested\s*\(/i.test(f)) {
      const nested = nestedField(f);
      if (!nested) errors.push({ pointer: `${base}/field/${i}`, message: `Malformed nested sort : ${f}` });
      else keys.push({ field: nested.field, order, ...(nested.mode ? { mode: nested.mode } : {}) });
      return;
    }
    keys.push({ field: f, order });
  });
  return keys;
}

function fieldList(value: string[] | null | undefined, pointer: string, errors: FieldError[]): string[] {
  if (!value) return [];
  value.forEach((f, i) => {
    if (typeof f !== "string" || !f.trim()) errors.push({ pointer: `${pointer}/${i}`, message: "must not be empty" });
  });
  return value.map((f) => f.trim());
}

/** Validates a /query or first /query_with_cursor request into a plan (throws 400 with every problem). */
export function planSearch(body: QueryRequest | CursorQueryRequest, cursor: boolean): { plan: SearchPlan; ast: QueryNode } {
  const errors: FieldError[] = [];
  const kindList = kinds(body.kind, errors);
  const offset = cursor ? 0 : ((body as QueryRequest).offset ?? 0);
  const rawLimit = body.limit ?? 0;
  if (offset < 0) errors.push({ pointer: "/body/offset", message: "'offset' must be equal or greater than 0" });
  if (rawLimit < 0) errors.push({ pointer: "/body/limit", message: "'limit' must be equal or greater than 0" });
  const limit = rawLimit === 0 ? DEFAULT_LIMIT : Math.min(rawLimit, MAX_LIMIT);
  if (!cursor && offset >= 0 && rawLimit >= 0 && offset + limit > MAX_RESULT_WINDOW) {
    errors.push({
      pointer: "/body/offset",
      message: "Invalid combination of limit and offset values, offset + limit cannot be greater than 10000",
    });
  }
  const sortKeys = sort(body.sort, errors);
  const geo = body.spatialFilter ? spatial(body.spatialFilter, errors) : undefined;
  let aggregateBy: string | undefined;
  let aggregateNested = false;
  const agg = cursor ? undefined : (body as QueryRequest).aggregateBy;
  if (agg?.trim()) {
    if (/^nested\s*\(/i.test(agg.trim())) {
      const nested = nestedField(agg);
      if (!nested || nested.mode) errors.push({ pointer: "/body/aggregateBy", message: `Malformed nested aggregation : ${agg}` });
      else {
        aggregateBy = nested.field;
        aggregateNested = true;
      }
    } else aggregateBy = agg.trim();
  }
  const returnedFields = fieldList(body.returnedFields, "/body/returnedFields", errors);
  // A repeated entry names the same paths again: kept once, so the highlight work is not repeated.
  const highlightedFields = [...new Set(fieldList(body.highlightedFields, "/body/highlightedFields", errors))];
  if (errors.length) throw invalidParameters(errors);
  const query = body.query ?? "";
  const ast = parsePlanQuery(query);
  return {
    plan: {
      kinds: kindList,
      query,
      offset,
      limit,
      sort: sortKeys,
      queryAsOwner: body.queryAsOwner ?? false,
      // Cursor queries always count exactly (OSDU docs).
      trackTotalCount: cursor ? true : (body.trackTotalCount ?? false),
      ...(geo ? { spatial: geo } : {}),
      ...(aggregateBy ? { aggregateBy, ...(aggregateNested ? { aggregateNested } : {}) } : {}),
      returnedFields,
      highlightedFields,
    },
    ast,
  };
}
