/**
 * Geometry for spatial filters: shapes found in records (GeoJSON of any kind, OSDU `{latitude,
 * longitude}` and `{lat, lon}` points) reduced to points, lines and polygons, and the exact tests
 * behind OSDU's filters — WITHIN a box, circle or polygon, INTERSECTS polygons. Coordinates are
 * [longitude, latitude] treated as a plane (as ES geo_shape does for these relations), except
 * distances, which are great-circle (haversine) metres.
 */

export type Position = [number, number];
/** A record's geometry at one field: every primitive found there, combined (WITHIN means all of them). */
export type Shape = { points: Position[]; lines: Position[][]; polygons: Position[][][] };
export type BBox = { minX: number; minY: number; maxX: number; maxY: number };

const GEOJSON_TYPES = new Set(["Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon", "GeometryCollection", "Feature", "FeatureCollection"]);

export const emptyShape = (): Shape => ({ points: [], lines: [], polygons: [] });
export const isEmpty = (s: Shape) => s.points.length + s.lines.length + s.polygons.length === 0;

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isPos = (v: unknown): v is Position => Array.isArray(v) && v.length >= 2 && isNum(v[0]) && isNum(v[1]);

/** Whether a JSON value is a geometry derrick indexes (then it is not walked further). */
export function isGeometry(value: unknown): boolean {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const o = value as Record<string, unknown>;
  if (typeof o.type === "string" && GEOJSON_TYPES.has(o.type) && ("coordinates" in o || "geometries" in o || "features" in o || "geometry" in o)) return true;
  return (isNum(o.latitude) && isNum(o.longitude)) || (isNum(o.lat) && isNum(o.lon));
}

/** Adds a geometry value's primitives to `into`; ignores what is not valid. */
export function collectShape(value: unknown, into: Shape): void {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  const o = value as Record<string, unknown>;
  if (isNum(o.latitude) && isNum(o.longitude)) return void into.points.push([o.longitude, o.latitude]);
  if (isNum(o.lat) && isNum(o.lon)) return void into.points.push([o.lon, o.lat]);
  const c = o.coordinates as unknown;
  switch (o.type) {
    case "Point":
      if (isPos(c)) into.points.push([c[0], c[1]]);
      break;
    case "MultiPoint":
      if (Array.isArray(c)) for (const p of c) if (isPos(p)) into.points.push([p[0], p[1]]);
      break;
    case "LineString":
      if (Array.isArray(c) && c.every(isPos)) into.lines.push(c.map((p) => [p[0], p[1]]));
      break;
    case "MultiLineString":
      if (Array.isArray(c)) for (const l of c) if (Array.isArray(l) && l.every(isPos)) into.lines.push(l.map((p) => [p[0], p[1]]));
      break;
    case "Polygon":
      if (Array.isArray(c) && c.every((r) => Array.isArray(r) && r.every(isPos))) into.polygons.push((c as Position[][]).map((r) => r.map((p) => [p[0], p[1]] as Position)));
      break;
    case "MultiPolygon":
      if (Array.isArray(c)) for (const poly of c) collectShape({ type: "Polygon", coordinates: poly }, into);
      break;
    case "GeometryCollection":
      if (Array.isArray(o.geometries)) for (const g of o.geometries) collectShape(g, into);
      break;
    case "Feature":
      collectShape(o.geometry, into);
      break;
    case "FeatureCollection":
      if (Array.isArray(o.features)) for (const f of o.features) collectShape(f, into);
      break;
  }
}

export function bboxOf(shape: Shape): BBox | undefined {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  const add = (p: Position) => {
    if (p[0] < minX) minX = p[0];
    if (p[0] > maxX) maxX = p[0];
    if (p[1] < minY) minY = p[1];
    if (p[1] > maxY) maxY = p[1];
  };
  shape.points.forEach(add);
  for (const l of shape.lines) l.forEach(add);
  for (const poly of shape.polygons) for (const ring of poly) ring.forEach(add);
  return minX === Infinity ? undefined : { minX, minY, maxX, maxY };
}

function vertices(shape: Shape): Position[] {
  const out = [...shape.points];
  for (const l of shape.lines) out.push(...l);
  for (const poly of shape.polygons) for (const ring of poly) out.push(...ring);
  return out;
}

function segments(shape: Shape): Array<[Position, Position]> {
  const out: Array<[Position, Position]> = [];
  const add = (line: Position[]) => {
    for (let i = 1; i < line.length; i++) out.push([line[i - 1]!, line[i]!]);
  };
  shape.lines.forEach(add);
  for (const poly of shape.polygons) poly.forEach(add);
  return out;
}

/** Ray casting on one ring (boundary counts as inside). */
function inRing(p: Position, ring: Position[]): boolean {
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const [xi, yi] = ring[i]!;
    const [xj, yj] = ring[j]!;
    if (onSegment(p, ring[j]!, ring[i]!)) return true;
    if (yi > p[1] !== yj > p[1] && p[0] < ((xj - xi) * (p[1] - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

/** Inside the outer ring and not inside a hole. */
export function inPolygon(p: Position, polygon: Position[][]): boolean {
  if (!polygon[0] || !inRing(p, polygon[0])) return false;
  for (let h = 1; h < polygon.length; h++) if (inRing(p, polygon[h]!) && !onRingBoundary(p, polygon[h]!)) return false;
  return true;
}

function onRingBoundary(p: Position, ring: Position[]): boolean {
  for (let i = 1; i < ring.length; i++) if (onSegment(p, ring[i - 1]!, ring[i]!)) return true;
  return false;
}

const cross = (o: Position, a: Position, b: Position) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);

function onSegment(p: Position, a: Position, b: Position): boolean {
  return Math.abs(cross(a, b, p)) < 1e-12 && Math.min(a[0], b[0]) - 1e-12 <= p[0] && p[0] <= Math.max(a[0], b[0]) + 1e-12 && Math.min(a[1], b[1]) - 1e-12 <= p[1] && p[1] <= Math.max(a[1], b[1]) + 1e-12;
}

/** Proper crossing (touching endpoints do not count: a shape sharing a border is still within). */
function segmentsCross(a: Position, b: Position, c: Position, d: Position): boolean {
  const d1 = cross(c, d, a);
  const d2 = cross(c, d, b);
  const d3 = cross(a, b, c);
  const d4 = cross(a, b, d);
  return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0));
}

function segmentsTouch(a: Position, b: Position, c: Position, d: Position): boolean {
  return segmentsCross(a, b, c, d) || onSegment(a, c, d) || onSegment(b, c, d) || onSegment(c, a, b) || onSegment(d, a, b);
}

/** A query area for WITHIN: a box, a circle or a polygon. */
export type Area =
  | { type: "box"; box: BBox }
  | { type: "circle"; center: Position; radiusM: number }
  | { type: "polygon"; polygon: Position[][] };

const EARTH_RADIUS_M = 6_371_008.8;

export function haversineM(a: Position, b: Position): number {
  const rad = Math.PI / 180;
  const dLat = (b[1] - a[1]) * rad;
  const dLon = (b[0] - a[0]) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a[1] * rad) * Math.cos(b[1] * rad) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** The box around a circle, for the R*Tree prefilter (generous near the poles). */
export function circleBBox(center: Position, radiusM: number): BBox {
  const dLat = (radiusM / EARTH_RADIUS_M) * (180 / Math.PI);
  const cosLat = Math.max(0.01, Math.cos(((Math.abs(center[1]) + dLat) * Math.PI) / 180));
  const dLon = Math.min(180, dLat / cosLat);
  return { minX: center[0] - dLon, maxX: center[0] + dLon, minY: Math.max(-90, center[1] - dLat), maxY: Math.min(90, center[1] + dLat) };
}

export function areaBBox(area: Area): BBox {
  if (area.type === "box") return area.box;
  if (area.type === "circle") return circleBBox(area.center, area.radiusM);
  return bboxOf({ points: [], lines: [], polygons: [area.polygon] })!;
}

/** Every part of the shape lies in the area (ES geo_shape WITHIN). */
export function within(shape: Shape, area: Area): boolean {
  const all = vertices(shape);
  if (all.length === 0) return false;
  if (area.type === "box") {
    const b = area.box;
    return all.every((p) => p[0] >= b.minX && p[0] <= b.maxX && p[1] >= b.minY && p[1] <= b.maxY);
  }
  if (area.type === "circle") return all.every((p) => haversineM(area.center, p) <= area.radiusM);
  if (!all.every((p) => inPolygon(p, area.polygon))) return false;
  // A concave area can hold every vertex and still let an edge leave it.
  const edges = segments({ points: [], lines: [], polygons: [area.polygon] });
  return segments(shape).every(([a, b]) => edges.every(([c, d]) => !segmentsCross(a, b, c, d)));
}

/** The shape and any of the polygons share at least one point (ES geo_shape INTERSECTS). */
export function intersects(shape: Shape, polygons: Position[][][]): boolean {
  const query: Shape = { points: [], lines: [], polygons };
  const mine = vertices(shape);
  if (polygons.some((poly) => mine.some((p) => inPolygon(p, poly)))) return true;
  const theirs = vertices(query);
  if (shape.polygons.some((poly) => theirs.some((p) => inPolygon(p, poly)))) return true;
  const edges = segments(query);
  return segments(shape).some(([a, b]) => edges.some(([c, d]) => segmentsTouch(a, b, c, d)));
}
