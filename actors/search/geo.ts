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

const GEOJSON_TYPES = new Set([
  "Point",
  "MultiPoint",
  "LineString",
  "MultiLineString",
  "Polygon",
  "MultiPolygon",
  "GeometryCollection",
  "Feature",
  "FeatureCollection",
]);

export const emptyShape = (): Shape => ({ points: [], lines: [], polygons: [] });
export const isEmpty = (s: Shape) => s.points.length + s.lines.length + s.polygons.length === 0;

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isPos = (v: unknown): v is Position => Array.isArray(v) && v.length >= 2 && isNum(v[0]) && isNum(v[1]);

/** Whether a JSON value is a geometry derrick indexes (then it is not walked further). */
export function isGeometry(value: unknown): boolean {
  if (!value || typeof value !== "object" || Array.isArray(value)) return false;
  const o = value as Record<string, unknown>;
  if (
    typeof o.type === "string" &&
    GEOJSON_TYPES.has(o.type) &&
    ("coordinates" in o || "geometries" in o || "features" in o || "geometry" in o)
  )
    return true;
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
      if (Array.isArray(c) && c.every((r) => Array.isArray(r) && r.every(isPos)))
        into.polygons.push((c as Position[][]).map((r) => r.map((p) => [p[0], p[1]] as Position)));
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
  const lo = p[1] - 1e-12;
  const hi = p[1] + 1e-12;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const a = ring[i]!;
    const b = ring[j]!;
    const yi = a[1];
    const yj = b[1];
    // An edge wholly above or below the point neither holds it (onSegment's tolerance) nor crosses its ray.
    if ((yi < lo && yj < lo) || (yi > hi && yj > hi)) continue;
    const xi = a[0];
    const xj = b[0];
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
  return (
    Math.abs(cross(a, b, p)) < 1e-12 &&
    Math.min(a[0], b[0]) - 1e-12 <= p[0] &&
    p[0] <= Math.max(a[0], b[0]) + 1e-12 &&
    Math.min(a[1], b[1]) - 1e-12 <= p[1] &&
    p[1] <= Math.max(a[1], b[1]) + 1e-12
  );
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

/**
 * Counts the work of the exact tests, in units of one query vertex or edge compared with one vertex
 * or segment of a record's shape (one per vertex against a box or circle); the caller may throw to
 * stop a test that has grown past its budget.
 */
export type Spend = (units: number) => void;
const free: Spend = () => {};

/** A query polygon prepared once for every candidate: its rings with their boxes, its edges, its size. */
export type PreparedPolygon = {
  rings: Array<{ ring: Position[]; box: BBox }>;
  box: BBox;
  edges: Array<[Position, Position]>;
  vertices: Position[];
};
/** A WITHIN area prepared once per query. */
export type PreparedArea =
  | { type: "box"; box: BBox }
  | { type: "circle"; center: Position; radiusM: number }
  | { type: "polygon"; polygon: PreparedPolygon };

/** Beyond the tolerance of onSegment (1e-12): a point farther than this outside a box is off everything in it. */
const BOX_SLACK = 1e-9;
const outside = (p: Position, b: BBox) =>
  p[0] < b.minX - BOX_SLACK || p[0] > b.maxX + BOX_SLACK || p[1] < b.minY - BOX_SLACK || p[1] > b.maxY + BOX_SLACK;
const disjoint = (a: BBox, b: BBox) =>
  a.maxX < b.minX - BOX_SLACK || a.minX > b.maxX + BOX_SLACK || a.maxY < b.minY - BOX_SLACK || a.minY > b.maxY + BOX_SLACK;

export function preparePolygon(polygon: Position[][]): PreparedPolygon {
  const shape: Shape = { points: [], lines: [], polygons: [polygon] };
  const empty: BBox = { minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity };
  return {
    rings: polygon.map((ring) => ({ ring, box: bboxOf({ points: ring, lines: [], polygons: [] }) ?? empty })),
    box: bboxOf(shape) ?? empty,
    edges: segments(shape),
    vertices: vertices(shape),
  };
}

export function prepareArea(area: Area): PreparedArea {
  return area.type === "polygon" ? { type: "polygon", polygon: preparePolygon(area.polygon) } : area;
}

/** inPolygon on a prepared polygon: a point outside a ring's box is not in it, without reading its edges. */
function inPrepared(p: Position, polygon: PreparedPolygon, spend: Spend): boolean {
  const outer = polygon.rings[0];
  if (!outer || outside(p, outer.box)) return false;
  spend(outer.ring.length);
  if (!inRing(p, outer.ring)) return false;
  for (let h = 1; h < polygon.rings.length; h++) {
    const hole = polygon.rings[h]!;
    if (outside(p, hole.box)) continue;
    spend(2 * hole.ring.length);
    if (inRing(p, hole.ring) && !onRingBoundary(p, hole.ring)) return false;
  }
  return true;
}

/** Every part of the shape lies in the area (ES geo_shape WITHIN). */
export function within(shape: Shape, area: Area): boolean {
  return withinPrepared(shape, prepareArea(area));
}

export function withinPrepared(shape: Shape, area: PreparedArea, spend: Spend = free): boolean {
  const all = vertices(shape);
  if (all.length === 0) return false;
  if (area.type === "box") {
    spend(all.length);
    const b = area.box;
    return all.every((p) => p[0] >= b.minX && p[0] <= b.maxX && p[1] >= b.minY && p[1] <= b.maxY);
  }
  if (area.type === "circle") {
    spend(all.length);
    return all.every((p) => haversineM(area.center, p) <= area.radiusM);
  }
  const polygon = area.polygon;
  if (!all.every((p) => inPrepared(p, polygon, spend))) return false;
  // A concave area can hold every vertex and still let an edge leave it.
  const mine = segments(shape);
  if (mine.length === 0) return true;
  spend(mine.length * polygon.edges.length);
  return mine.every(([a, b]) => polygon.edges.every(([c, d]) => !segmentsCross(a, b, c, d)));
}

/** The shape and any of the polygons share at least one point (ES geo_shape INTERSECTS). */
export function intersects(shape: Shape, polygons: Position[][][]): boolean {
  return intersectsPrepared(shape, polygons.map(preparePolygon));
}

/**
 * intersects() on prepared polygons. It is the same test polygon by polygon (a vertex of either
 * inside the other, or edges touching), so a polygon whose box is apart from the shape's is skipped.
 */
export function intersectsPrepared(shape: Shape, polygons: PreparedPolygon[], spend: Spend = free): boolean {
  const box = bboxOf(shape);
  if (!box) return false;
  const mine = vertices(shape);
  const myEdges = segments(shape);
  const myRingVertices = shape.polygons.reduce((n, poly) => n + poly.reduce((m, ring) => m + ring.length, 0), 0);
  spend(polygons.length);
  for (const poly of polygons) {
    if (disjoint(box, poly.box)) continue;
    if (mine.some((p) => inPrepared(p, poly, spend))) return true;
    if (myRingVertices > 0) {
      spend(2 * poly.vertices.length * myRingVertices);
      if (shape.polygons.some((own) => poly.vertices.some((p) => inPolygon(p, own)))) return true;
    }
    if (myEdges.length > 0) {
      spend(myEdges.length * poly.edges.length);
      if (myEdges.some(([a, b]) => poly.edges.some(([c, d]) => segmentsTouch(a, b, c, d)))) return true;
    }
  }
  return false;
}
