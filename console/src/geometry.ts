/**
 * Shapes to draw from search results: the GeoJSON geometries (and OSDU `{latitude, longitude}` /
 * `{lat, lon}` points) anywhere in a record, as the search actor finds them, projected on a plain
 * lon/lat plane (no map tiles offline).
 */

export type Position = [lon: number, lat: number];
export type Shape = { kind: "point"; at: Position } | { kind: "line"; points: Position[] } | { kind: "polygon"; rings: Position[][] };

const MAX_DEPTH = 24;
const isPosition = (value: unknown): value is number[] =>
  Array.isArray(value) && value.length >= 2 && typeof value[0] === "number" && typeof value[1] === "number";
const position = (value: number[]): Position => [value[0]!, value[1]!];
const positions = (value: unknown): Position[] => (Array.isArray(value) ? value.filter(isPosition).map(position) : []);
const asArray = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);

function geometry(value: Record<string, unknown>, out: Shape[], depth: number): boolean {
  const c = value.coordinates;
  switch (value.type) {
    case "Point":
      if (isPosition(c)) out.push({ kind: "point", at: position(c) });
      return true;
    case "MultiPoint":
      for (const at of positions(c)) out.push({ kind: "point", at });
      return true;
    case "LineString":
      out.push({ kind: "line", points: positions(c) });
      return true;
    case "MultiLineString":
      for (const line of asArray(c)) out.push({ kind: "line", points: positions(line) });
      return true;
    case "Polygon":
      out.push({ kind: "polygon", rings: asArray(c).map(positions) });
      return true;
    case "MultiPolygon":
      for (const polygon of asArray(c)) out.push({ kind: "polygon", rings: asArray(polygon).map(positions) });
      return true;
    case "GeometryCollection":
      for (const g of asArray(value.geometries)) collect(g, out, depth + 1);
      return true;
    case "Feature":
      collect(value.geometry, out, depth + 1);
      return true;
    case "FeatureCollection":
      for (const f of asArray(value.features)) collect(f, out, depth + 1);
      return true;
    default:
      return false;
  }
}

function collect(value: unknown, out: Shape[], depth: number): void {
  if (depth > MAX_DEPTH || value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    for (const item of value) collect(item, out, depth + 1);
    return;
  }
  const record = value as Record<string, unknown>;
  if (geometry(record, out, depth)) return;
  const lat = record.latitude ?? record.lat;
  const lon = record.longitude ?? record.lon;
  if (typeof lat === "number" && typeof lon === "number") {
    out.push({ kind: "point", at: [lon, lat] });
    return;
  }
  for (const child of Object.values(record)) collect(child, out, depth + 1);
}

/** Every shape found in a value (a search result, a GeoJSON object), in document order. */
export function shapesOf(value: unknown): Shape[] {
  const out: Shape[] = [];
  collect(value, out, 0);
  return out;
}

export type Bounds = { west: number; south: number; east: number; north: number };

/** The box around every shape's positions, padded by 5% (at least 0.01°) so nothing sits on the frame. */
export function boundsOf(shapes: readonly Shape[]): Bounds | undefined {
  let west = Number.POSITIVE_INFINITY;
  let south = Number.POSITIVE_INFINITY;
  let east = Number.NEGATIVE_INFINITY;
  let north = Number.NEGATIVE_INFINITY;
  const add = ([lon, lat]: Position) => {
    west = Math.min(west, lon);
    east = Math.max(east, lon);
    south = Math.min(south, lat);
    north = Math.max(north, lat);
  };
  for (const shape of shapes) {
    if (shape.kind === "point") add(shape.at);
    else if (shape.kind === "line") shape.points.forEach(add);
    else for (const ring of shape.rings) ring.forEach(add);
  }
  if (!Number.isFinite(west)) return undefined;
  const padLon = Math.max((east - west) * 0.05, 0.01);
  const padLat = Math.max((north - south) * 0.05, 0.01);
  return { west: west - padLon, south: south - padLat, east: east + padLon, north: north + padLat };
}
