/** The shapes the console's search view draws, found in records as the search actor finds geometry. */
import { describe, expect, it } from "vitest";
import { boundsOf, shapesOf } from "../../console/src/geometry.ts";

describe("console geometry", () => {
  it("shapes - GeoJSON geometries, features and collections anywhere in a record, and OSDU lat/lon points", () => {
    const record = {
      id: "w1",
      data: {
        SpatialLocation: {
          Wgs84Coordinates: {
            type: "FeatureCollection",
            features: [
              { type: "Feature", geometry: { type: "Point", coordinates: [1.5, 58.4] } },
              {
                type: "Feature",
                geometry: {
                  type: "LineString",
                  coordinates: [
                    [1, 58],
                    [2, 59],
                  ],
                },
              },
            ],
          },
        },
        Outline: {
          type: "MultiPolygon",
          coordinates: [
            [
              [
                [0, 0],
                [1, 0],
                [1, 1],
                [0, 0],
              ],
            ],
          ],
        },
        Surface: [
          { latitude: 60, longitude: 5 },
          { lat: 61, lon: 6 },
        ],
        Name: "no geometry here",
      },
    };
    expect(shapesOf(record)).toEqual([
      { kind: "point", at: [1.5, 58.4] },
      {
        kind: "line",
        points: [
          [1, 58],
          [2, 59],
        ],
      },
      {
        kind: "polygon",
        rings: [
          [
            [0, 0],
            [1, 0],
            [1, 1],
            [0, 0],
          ],
        ],
      },
      { kind: "point", at: [5, 60] },
      { kind: "point", at: [6, 61] },
    ]);
    expect(shapesOf({ data: { Count: 3, Tags: ["a"] } })).toEqual([]);
  });

  it("bounds - the box around every position, padded; none without shapes", () => {
    expect(boundsOf([])).toBeUndefined();
    const bounds = boundsOf([
      { kind: "point", at: [0, 0] },
      {
        kind: "polygon",
        rings: [
          [
            [10, 20],
            [20, 20],
            [20, 40],
            [10, 20],
          ],
        ],
      },
    ])!;
    expect(bounds).toEqual({ west: -1, south: -2, east: 21, north: 42 });
    // One point: a small box around it, never an empty one.
    const single = boundsOf([{ kind: "point", at: [5, 5] }])!;
    expect(single.east - single.west).toBeGreaterThan(0);
    expect(single.north - single.south).toBeGreaterThan(0);
  });
});
