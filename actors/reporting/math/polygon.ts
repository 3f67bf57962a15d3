/**
 * Prospect outlines as GeoJSON (RFC 7946, WGS84 lon/lat): validity checks that name the offending
 * position, geodesic area in km² (spherical excess on the WGS84 equatorial radius, the formula of
 * mapbox/geojson-area and Turf) and bounding box. Winding order is not enforced (RFC 7946: parsers
 * should not reject it); holes must lie inside their exterior ring and are subtracted by absolute area.
 */

export type Position = number[];
export type PolygonGeometry = { type: "Polygon"; coordinates: Position[][] } | { type: "MultiPolygon"; coordinates: Position[][][] };

const RADIUS_M = 6378137;

/** Problems found in a geometry, each with a JSON pointer relative to the geometry. */
export function geometryProblems(geometry: PolygonGeometry): Array<{ pointer: string; message: string }> {
  const problems: Array<{ pointer: string; message: string }> = [];
  const polygons = geometry.type === "Polygon" ? [geometry.coordinates] : geometry.coordinates;
  polygons.forEach((rings, p) => {
    const base = geometry.type === "Polygon" ? "/coordinates" : `/coordinates/${p}`;
    if (rings.length === 0) problems.push({ pointer: base, message: "a polygon needs an exterior ring" });
    rings.forEach((ring, r) => {
      if (ring.length < 4) problems.push({ pointer: `${base}/${r}`, message: "a linear ring needs at least 4 positions" });
      ring.forEach((pos, i) => {
        const [lon, lat] = pos;
        if (pos.length < 2 || pos.length > 3)
          problems.push({ pointer: `${base}/${r}/${i}`, message: "a position is [longitude, latitude] (optionally altitude)" });
        else if (!(lon! >= -180 && lon! <= 180))
          problems.push({ pointer: `${base}/${r}/${i}/0`, message: "longitude must be within [-180, 180]" });
        else if (!(lat! >= -90 && lat! <= 90))
          problems.push({ pointer: `${base}/${r}/${i}/1`, message: "latitude must be within [-90, 90]" });
      });
      const first = ring[0];
      const last = ring[ring.length - 1];
      if (ring.length >= 4 && first && last && (first[0] !== last[0] || first[1] !== last[1]))
        problems.push({ pointer: `${base}/${r}`, message: "a linear ring must be closed (first position equals the last)" });
    });
    // RFC 7946: interior rings bound holes within the surface. Checked on the lon/lat plane (vertices
    // only: a hole crossing the exterior between two vertices is not caught), enough for outlines
    // that do not cross the antimeridian.
    const exterior = rings[0];
    if (exterior && exterior.length >= 4 && problems.length === 0) {
      rings.slice(1).forEach((hole, h) => {
        const outside = hole.findIndex((pos) => !insideOrOnRing(pos, exterior));
        if (outside >= 0)
          problems.push({ pointer: `${base}/${h + 1}/${outside}`, message: "a hole (interior ring) must lie inside the exterior ring" });
      });
    }
  });
  return problems;
}

/** Point in (or on the boundary of) a closed ring, on the lon/lat plane (even-odd rule). */
export function insideOrOnRing(point: Position, ring: readonly Position[]): boolean {
  const [x, y] = point as [number, number];
  let inside = false;
  for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
    const [xi, yi] = ring[i] as [number, number];
    const [xj, yj] = ring[j] as [number, number];
    const cross = (xj - xi) * (y - yi) - (yj - yi) * (x - xi);
    if (cross === 0 && Math.min(xi, xj) <= x && x <= Math.max(xi, xj) && Math.min(yi, yj) <= y && y <= Math.max(yi, yj)) return true;
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

/** Area of one ring on the sphere, m² (absolute). */
function ringArea(ring: readonly Position[]): number {
  const n = ring.length;
  if (n < 3) return 0;
  let total = 0;
  for (let i = 0; i < n; i++) {
    const lower = ring[i]!;
    const middle = ring[(i + 1) % n]!;
    const upper = ring[(i + 2) % n]!;
    total += (rad(upper[0]!) - rad(lower[0]!)) * Math.sin(rad(middle[1]!));
  }
  return Math.abs((total * RADIUS_M * RADIUS_M) / 2);
}

const rad = (deg: number) => (deg * Math.PI) / 180;

export function areaKm2(geometry: PolygonGeometry): number {
  const polygons = geometry.type === "Polygon" ? [geometry.coordinates] : geometry.coordinates;
  let m2 = 0;
  // Holes never take more than their polygon's area (validation keeps them inside it).
  for (const rings of polygons)
    m2 += Math.max(
      0,
      rings.reduce((acc, ring, r) => acc + (r === 0 ? ringArea(ring) : -ringArea(ring)), 0),
    );
  return m2 / 1e6;
}

/** [minLon, minLat, maxLon, maxLat]. */
export function bbox(geometry: PolygonGeometry): [number, number, number, number] {
  const polygons = geometry.type === "Polygon" ? [geometry.coordinates] : geometry.coordinates;
  let [minLon, minLat, maxLon, maxLat] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const rings of polygons)
    for (const ring of rings)
      for (const [lon, lat] of ring) {
        minLon = Math.min(minLon, lon!);
        maxLon = Math.max(maxLon, lon!);
        minLat = Math.min(minLat, lat!);
        maxLat = Math.max(maxLat, lat!);
      }
  return [minLon, minLat, maxLon, maxLat];
}
