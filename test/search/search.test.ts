import { describe, expect } from "vitest";
import { jetstream } from "@nats-io/jetstream";
import { eventually } from "../harness/index.ts";
import { expectProblem } from "../harness/json.ts";
import { subjects, type DerrickError } from "../../subjects/index.ts";
import { FIELD_EXPRESSION_MAX_LENGTH, FIELD_PATH_MAX_LENGTH, recordKey, type StoredRecord } from "../../subjects/search.ts";
import { putRecords as putRecordsHandler } from "../../actors/storage/handlers.ts";
import { RecordChanged, openRecordStore } from "../../actors/storage/store.ts";
import { createLogger } from "../../platform/logger.ts";
import {
  NORTH_ACL,
  SOUTH_ACL,
  WELL,
  WELLBORE,
  api,
  ids,
  putRecords,
  searchOk,
  searchTest,
  tokenOf,
  untilFound,
  type Page,
} from "./helpers.ts";

const W1 = "opendes:well:w1";
const W2 = "opendes:well:w2";
const W3 = "opendes:well:w3";
const WB1 = "opendes:wellbore:wb1";
const WB2 = "opendes:wellbore:wb2";

const square = (minX: number, minY: number, maxX: number, maxY: number) => [
  [minX, minY],
  [maxX, minY],
  [maxX, maxY],
  [minX, maxY],
  [minX, minY],
];
const points = (ring: number[][]) => ring.map(([longitude, latitude]) => ({ latitude, longitude }));

const FIXTURES = [
  {
    id: W1,
    kind: WELL,
    acl: NORTH_ACL,
    legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
    data: {
      FacilityName: "Ocean Drilling Alpha",
      Basin: "Permian",
      Rig_Contractor: "Ocean",
      Depth: 1200,
      SpudDate: "2017-03-01T00:00:00Z",
      Status: "Active",
      Location: { latitude: 58.5, longitude: 2.5 },
      VerticalMeasurements: [
        { VerticalMeasurementID: "Elevation", VerticalMeasurement: 120 },
        { VerticalMeasurementID: "TD", VerticalMeasurement: 3000 },
      ],
    },
  },
  {
    id: W2,
    kind: WELL,
    acl: NORTH_ACL,
    data: {
      FacilityName: "Drilling Bravo",
      Basin: "North Sea",
      Rig_Contractor: "Drilling",
      Depth: 2500,
      SpudDate: "2018-06-15T00:00:00Z",
      Location: { lat: 60.2, lon: 4.1 },
      VerticalMeasurements: [
        { VerticalMeasurementID: "Elevation", VerticalMeasurement: 15 },
        { VerticalMeasurementID: "TD", VerticalMeasurement: 150 },
      ],
    },
  },
  {
    id: W3,
    kind: WELL,
    acl: SOUTH_ACL,
    data: {
      FacilityName: "Spillpath DA no.109",
      Basin: "Permian",
      Rig_Contractor: "Other",
      Depth: 800,
      SpudDate: "2019-01-10",
      Status: "Suspended",
      Location: { latitude: 58.9, longitude: 3.0 },
    },
  },
  {
    id: WB1,
    kind: WELLBORE,
    acl: SOUTH_ACL,
    data: {
      FacilityName: "Wellbore Charlie",
      Depth: 3100,
      Status: "Active",
      Shape: {
        type: "FeatureCollection",
        features: [{ type: "Feature", properties: {}, geometry: { type: "Polygon", coordinates: [square(2, 58, 3, 59)] } }],
      },
    },
  },
  {
    id: WB2,
    kind: WELLBORE,
    acl: NORTH_ACL,
    data: {
      FacilityName: "Wellbore Delta",
      Shape: {
        type: "LineString",
        coordinates: [
          [10, 50],
          [11, 51],
        ],
      },
    },
  },
];

const it = searchTest();

describe("search over records put through storage", () => {
  it.beforeAll(async ({ derrick }) => {
    await putRecords(derrick, FIXTURES);
    await eventually(async () => (await searchOk(derrick, {})).totalCount === FIXTURES.length, { what: "fixtures indexed" });
  });

  it("search - /info is public and names the build (OSDU VersionInfo)", async ({ derrick }) => {
    for (const path of ["/api/search/v2/info", "/api/search/v2/info/"]) {
      const res = await api(derrick, path, { as: null, partition: null });
      expect(res.status, path).toBe(200);
      const info = (await res.json()) as Record<string, unknown>;
      for (const field of ["groupId", "artifactId", "version", "buildTime", "branch", "commitId", "commitMessage"])
        expect(info[field], field).toBeTruthy();
      // Time values are RFC 3339 UTC strings (docs/contract.md), not git's committer-local offset.
      expect(info.buildTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(info.connectedOuterServices).toEqual(expect.arrayContaining([expect.objectContaining({ name: "sqlite" })]));
    }
  });

  it("search - the OSDU health checks are public and answer 200 while a search actor serves", async ({ derrick }) => {
    for (const [path, text] of [
      ["/api/search/v2/liveness_check", "Search Service is alive"],
      ["/api/search/v2/readiness_check", "Search Service is ready"],
      ["/api/search/v2/health/liveness_check", "Search Service is alive"],
      ["/api/search/v2/health/readiness_check", "Search Service is ready"],
    ] as const) {
      const res = await api(derrick, path, { as: null, partition: null });
      expect(res.status, path).toBe(200);
      expect(await res.text(), path).toBe(text);
    }
  });

  it("search - a query needs a token, a partition, a search role and a data group (401 Access denied as OSDU)", async ({ derrick }) => {
    expect((await api(derrick, "/api/search/v2/query", { as: null, body: { kind: WELL } })).status).toBe(401);
    const missing = await api(derrick, "/api/search/v2/query", { partition: null, body: { kind: WELL } });
    expect(missing.status).toBe(400);
    const denied = await api(derrick, "/api/search/v2/query", { as: "norole", body: { kind: WELL } });
    expect(denied.status).toBe(401);
    expect(await denied.json()).toMatchObject({
      code: 401,
      reason: "Access denied",
      message: expect.stringMatching(
        /^The user is not authorized to perform this action: searching needs one of the groups users\.datalake\.viewers, /,
      ),
    });
    // A search role without any data.* group is refused the same way (OSDU), not answered with nothing.
    for (const path of ["/api/search/v2/query", "/api/search/v2/query_with_cursor"]) {
      const noData = await api(derrick, path, { as: "nodata", body: { kind: WELL } });
      expect(noData.status, path).toBe(401);
      expect(await noData.json()).toMatchObject({
        code: 401,
        reason: "Access denied",
        message: "The user is not authorized to perform this action: searching needs a data group (data.*) or users.data.root",
      });
    }
  });

  it("search - OSDU's documented query examples", async ({ derrick }) => {
    const cases: Array<[string, string[]]> = [
      ["drilling", [W1, W2]],
      ["data.Basin:Permian", [W1, W3]],
      ["data.Rig_Contractor:(Ocean OR Drilling)", [W1, W2]],
      ['"Ocean Drilling"', [W1]],
      ["data.FacilityName:Well*", [WB1, WB2]],
      ["data.FacilityName:Wellb?re", [WB1, WB2]],
      ["data.Depth:[1000 TO 2500]", [W1, W2]],
      ["data.Depth:{1200 TO 2500}", []],
      ["data.Depth:>2000", [W2, WB1]],
      ["data.Depth:(>=800 AND <1200)", [W3]],
      ["data.SpudDate:[2018-01-01 TO 2019-12-31]", [W2, W3]],
      ["data.SpudDate:[2017 TO 2017]", [W1]],
      ["data.Status.keyword:Active", [W1, WB1]],
      ["_exists_:data.Status", [W1, W3, WB1]],
      ["NOT _exists_:data.Status", [W2, WB2]],
      ['data.FacilityName.keyword:"Spillpath DA no.109"', [W3]],
      ['data.FacilityName.keywordLower:"spillpath da no.109"', [W3]],
      ["data.Basin:Permian AND NOT data.Status:Suspended", [W1]],
      ["data.Basin:Permian AND data.Depth:<1000 OR data.Rig_Contractor:Ocean", [W3]],
      ["data.\\*:Bravo", [W2]],
      ["nested(data.VerticalMeasurements, (VerticalMeasurementID:Elevation AND VerticalMeasurement:>100))", [W1]],
      ["nested(data.VerticalMeasurements, (VerticalMeasurementID:TD AND VerticalMeasurement:(>=100 AND <=200)))", [W2]],
      ["id:opendes\\:well\\:w3", [W3]],
      ["legal.legaltags:opendes-public", [W1]],
      ["createTime:[2020 TO *]", [W1, W2, W3, WB1, WB2]],
      ["createTime:<2020", []],
    ];
    for (const [query, expected] of cases) {
      const page = await searchOk(derrick, { query });
      expect(ids(page), query).toEqual(expected);
      expect(page.totalCount, query).toBe(expected.length);
    }
  });

  it("search - without a sort, text queries come back by relevance (BM25)", async ({ derrick }) => {
    // W2 holds "drilling" twice in fewer words than W1.
    expect((await searchOk(derrick, { query: "drilling" })).results.map((r) => r.id)).toEqual([W2, W1]);
    expect((await searchOk(derrick, { query: "drilling", sort: { field: ["id"], order: ["ASC"] } })).results.map((r) => r.id)).toEqual([
      W1,
      W2,
    ]);
  });

  it("search - kinds: exact (case-insensitive), lists, arrays, wildcards; an unknown kind is 200 with nothing", async ({ derrick }) => {
    expect((await searchOk(derrick, { kind: WELLBORE })).totalCount).toBe(2);
    expect((await searchOk(derrick, { kind: WELL.toUpperCase() })).totalCount).toBe(3);
    expect((await searchOk(derrick, { kind: `${WELL}, ${WELLBORE}` })).totalCount).toBe(5);
    expect((await searchOk(derrick, { kind: [WELL, WELLBORE] })).totalCount).toBe(5);
    expect((await searchOk(derrick, { kind: "osdu:wks:master-data--Well*:*" })).totalCount).toBe(5);
    expect((await searchOk(derrick, { kind: "osdu:*:*:1.0.0" })).totalCount).toBe(5);
    expect(await searchOk(derrick, { kind: "osdu:wks:nothing:1.0.0" })).toEqual({
      results: [],
      aggregations: [],
      phraseSuggestions: [],
      totalCount: 0,
    });
  });

  it("search - sort keeps missing values last in both orders; offset and limit slice the sorted list", async ({ derrick }) => {
    const desc = await searchOk(derrick, { sort: { field: ["data.Depth"], order: ["DESC"] } });
    expect(desc.results.map((r) => r.id)).toEqual([WB1, W2, W1, W3, WB2]);
    const asc = await searchOk(derrick, { sort: { field: ["data.Depth"], order: ["asc"] } });
    expect(asc.results.map((r) => r.id)).toEqual([W3, W1, W2, WB1, WB2]);
    const slice = await searchOk(derrick, { sort: { field: ["data.Depth"], order: ["asc"] }, offset: 1, limit: 2 });
    expect(slice.results.map((r) => r.id)).toEqual([W1, W2]);
    expect(slice.totalCount).toBe(5);
    const byName = await searchOk(derrick, { kind: WELL, sort: { field: ["data.Basin", "data.FacilityName"], order: ["ASC", "DESC"] } });
    expect(byName.results.map((r) => r.id)).toEqual([W2, W3, W1]);
  });

  it("search - returnedFields, highlightedFields and the OSDU derived kind attributes", async ({ derrick }) => {
    const page = await searchOk(derrick, {
      query: "drilling",
      returnedFields: ["id", "data.Depth"],
      highlightedFields: ["data.FacilityName"],
      sort: { field: ["id"], order: ["ASC"] },
    });
    expect(page.results).toEqual([
      { id: W1, data: { Depth: 1200 }, highlight: { "data.FacilityName": ["Ocean <em>Drilling</em> Alpha"] } },
      { id: W2, data: { Depth: 2500 }, highlight: { "data.FacilityName": ["<em>Drilling</em> Bravo"] } },
    ]);
    const full = await searchOk(derrick, { query: "id:opendes\\:well\\:w1" });
    expect(full.results[0]).toMatchObject({
      id: W1,
      kind: WELL,
      authority: "osdu",
      source: "wks",
      namespace: "osdu:wks",
      type: "master-data--Well",
      acl: NORTH_ACL,
      createUser: "writer",
    });
    expect(full.results[0]).not.toHaveProperty("x-acl");
  });

  it("search - a highlightedFields or returnedFields pattern built to make a RegExp backtrack is answered, matching nothing", async ({
    derrick,
  }) => {
    // Against the 46-character data.VerticalMeasurements.VerticalMeasurementID this held the actor for minutes as a RegExp.
    const pattern = `${"*?".repeat(12)}!`;
    const page = await searchOk(derrick, {
      query: "drilling",
      highlightedFields: [pattern],
      returnedFields: ["id", pattern],
      sort: { field: ["id"], order: ["ASC"] },
    });
    expect(page.results).toEqual([{ id: W1 }, { id: W2 }]);
  });

  it("search - aggregateBy counts terms, count desc then key asc, including nested paths", async ({ derrick }) => {
    expect((await searchOk(derrick, { aggregateBy: "kind" })).aggregations).toEqual([
      { key: WELL, count: 3 },
      { key: WELLBORE, count: 2 },
    ]);
    expect((await searchOk(derrick, { aggregateBy: "data.Basin" })).aggregations).toEqual([
      { key: "Permian", count: 2 },
      { key: "North Sea", count: 1 },
    ]);
    expect((await searchOk(derrick, { aggregateBy: "nested(data.VerticalMeasurements, VerticalMeasurementID)" })).aggregations).toEqual([
      { key: "Elevation", count: 2 },
      { key: "TD", count: 2 },
    ]);
  });

  it("search - aggregateBy on numbers breaks count ties by numeric key (ES orders a number field's terms by value), keys as text", async ({
    derrick,
  }) => {
    expect((await searchOk(derrick, { aggregateBy: "data.Depth" })).aggregations).toEqual([
      { key: "800", count: 1 },
      { key: "1200", count: 1 },
      { key: "2500", count: 1 },
      { key: "3100", count: 1 },
    ]);
    expect((await searchOk(derrick, { aggregateBy: "nested(data.VerticalMeasurements, VerticalMeasurement)" })).aggregations).toEqual([
      { key: "15", count: 1 },
      { key: "120", count: 1 },
      { key: "150", count: 1 },
      { key: "3000", count: 1 },
    ]);
  });

  it("search - ACL: two clients with different data groups see different records, counts and aggregations", async ({ derrick }) => {
    const north = await searchOk(derrick, { aggregateBy: "data.Basin" }, "north");
    expect(ids(north)).toEqual([W1, W2, WB2]);
    expect(north.totalCount).toBe(3);
    expect(north.aggregations).toEqual([
      { key: "North Sea", count: 1 },
      { key: "Permian", count: 1 },
    ]);
    const south = await searchOk(derrick, { aggregateBy: "kind" }, "south");
    expect(ids(south)).toEqual([W3, WB1]);
    expect(south.aggregations).toEqual([
      { key: WELL, count: 1 },
      { key: WELLBORE, count: 1 },
    ]);
    expect((await searchOk(derrick, { query: "data.Basin:Permian" }, "north")).totalCount).toBe(1);
    expect((await searchOk(derrick, {}, "root")).totalCount).toBe(5);
    // queryAsOwner: viewers only see nothing; owners see what they own.
    expect((await searchOk(derrick, { queryAsOwner: true }, "north")).totalCount).toBe(0);
    expect(ids(await searchOk(derrick, { queryAsOwner: true }, "southOwner"))).toEqual([W3, WB1]);
  });

  it("search - roles and users.data.root are recognised in the email form OSDU's entitlements put in tokens (group@partition.domain), as data groups are", async ({
    derrick,
  }) => {
    expect(ids(await searchOk(derrick, {}, "northEmail"))).toEqual([W1, W2, WB2]);
    expect((await searchOk(derrick, {}, "rootEmail")).totalCount).toBe(5);
    // users.datalake.editors@… writes, users.data.root@… reads any record.
    const read = await api(derrick, `/api/storage/v2/records/${encodeURIComponent(W3)}`, { as: "rootEmail" });
    expect(read.status).toBe(200);
  });

  it("search - spatial filters on points: bounding box, distance, polygon, intersection", async ({ derrick }) => {
    const field = "data.Location";
    const box = await searchOk(derrick, {
      spatialFilter: { field, byBoundingBox: { topLeft: { latitude: 59, longitude: 2 }, bottomRight: { latitude: 58, longitude: 3.5 } } },
    });
    expect(ids(box)).toEqual([W1, W3]);
    const boxFilter = { field, byBoundingBox: { topLeft: { latitude: 59, longitude: 2 }, bottomRight: { latitude: 58, longitude: 3.5 } } };
    const paged = await searchOk(derrick, { spatialFilter: boxFilter, aggregateBy: "data.Basin", offset: 1, limit: 1 });
    expect(paged).toMatchObject({ totalCount: 2, aggregations: [{ key: "Permian", count: 2 }] });
    expect(paged.results.map((r) => r.id)).toEqual([W3]);
    const northOnly = await searchOk(derrick, { spatialFilter: boxFilter, aggregateBy: "data.Basin" }, "north");
    expect(northOnly).toMatchObject({ totalCount: 1, aggregations: [{ key: "Permian", count: 1 }] });
    expect(ids(northOnly)).toEqual([W1]);
    const near = await searchOk(derrick, {
      spatialFilter: { field, byDistance: { point: { latitude: 58.5, longitude: 2.5 }, distance: 50_000 } },
    });
    expect(ids(near)).toEqual([W1]);
    const farther = await searchOk(derrick, {
      spatialFilter: { field, byDistance: { point: { latitude: 58.5, longitude: 2.5 }, distance: 60_000 } },
    });
    expect(ids(farther)).toEqual([W1, W3]);
    const triangle = await searchOk(derrick, {
      spatialFilter: {
        field,
        byGeoPolygon: {
          points: points([
            [2, 58],
            [2, 59],
            [2.8, 58.5],
          ]),
        },
      },
    });
    expect(ids(triangle)).toEqual([W1]);
    const crossing = await searchOk(derrick, {
      spatialFilter: { field, byIntersection: { polygons: [{ points: points(square(4, 60, 4.2, 60.4)) }] } },
    });
    expect(ids(crossing)).toEqual([W2]);
    // byIntersection is not exclusive with the others (OSDU): beside a bounding box it is ignored, as OSDU's GeoQueryBuilder does.
    const boxAndIntersection = await searchOk(derrick, {
      spatialFilter: { ...boxFilter, byIntersection: { polygons: [{ points: points(square(4, 60, 4.2, 60.4)) }] } },
    });
    expect(ids(boxAndIntersection)).toEqual([W1, W3]);
    const combined = await searchOk(derrick, {
      query: "data.Basin:Permian",
      spatialFilter: { field, byBoundingBox: { topLeft: { latitude: 61, longitude: 0 }, bottomRight: { latitude: 58.7, longitude: 5 } } },
    });
    expect(ids(combined)).toEqual([W3]);
  });

  it("search - spatial filters on polygons and lines: WITHIN needs the whole shape inside, INTERSECTS any overlap", async ({ derrick }) => {
    const field = "data.Shape";
    const around = await searchOk(derrick, {
      spatialFilter: {
        field,
        byBoundingBox: { topLeft: { latitude: 59.5, longitude: 1.5 }, bottomRight: { latitude: 57.5, longitude: 3.5 } },
      },
    });
    expect(ids(around)).toEqual([WB1]);
    const half = await searchOk(derrick, {
      spatialFilter: {
        field,
        byBoundingBox: { topLeft: { latitude: 58.5, longitude: 1.5 }, bottomRight: { latitude: 57.5, longitude: 3.5 } },
      },
    });
    expect(ids(half)).toEqual([]);
    const circle = await searchOk(derrick, {
      spatialFilter: { field, byDistance: { point: { latitude: 58.5, longitude: 2.5 }, distance: 100_000 } },
    });
    expect(ids(circle)).toEqual([WB1]);
    const polygon = await searchOk(derrick, {
      spatialFilter: { field, byGeoPolygon: { points: points(square(1, 57, 12, 52).slice(0, 4)) } },
    });
    expect(ids(polygon)).toEqual([]);
    const big = await searchOk(derrick, {
      spatialFilter: {
        field,
        byGeoPolygon: {
          points: points([
            [1, 49],
            [12, 49],
            [12, 60],
            [1, 60],
          ]),
        },
      },
    });
    expect(ids(big)).toEqual([WB1, WB2]);
    const overlap = await searchOk(derrick, {
      spatialFilter: { field, byIntersection: { polygons: [{ points: points(square(2.5, 58.5, 3.5, 59.5)) }] } },
    });
    expect(ids(overlap)).toEqual([WB1]);
    // The line crosses this thin box with no vertex inside it.
    const crossesLine = await searchOk(derrick, {
      spatialFilter: { field, byIntersection: { polygons: [{ points: points(square(10.4, 49, 10.6, 52)) }] } },
    });
    expect(ids(crossesLine)).toEqual([WB2]);
  });

  it("search - request validation answers OSDU's messages, naming each field", async ({ derrick }) => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ kind: WELL, limit: -1 }, "/body/limit", "'limit' must be equal or greater than 0"],
      [{ kind: WELL, offset: -1 }, "/body/offset", "'offset' must be equal or greater than 0"],
      [
        { kind: WELL, offset: 9995, limit: 10 },
        "/body/offset",
        "Invalid combination of limit and offset values, offset + limit cannot be greater than 10000",
      ],
      [
        { kind: WELL, offset: 9991 },
        "/body/offset",
        "Invalid combination of limit and offset values, offset + limit cannot be greater than 10000",
      ],
      [{ kind: "abc" }, "/body/kind", "Not a valid record kind format. Found: abc"],
      [{ kind: "" }, "/body/kind", "Record kind can't be null or empty"],
      [{}, "/body/kind", "Record kind can't be null or empty"],
      [{ kind: null }, "/body/kind", "Record kind can't be null or empty"],
      [{ kind: [] }, "/body/kind", "Record kind can't be null or empty"],
      [{ kind: WELL, sort: { order: ["ASC"] } }, "/body/sort/field", "'sort.field' can not be null or empty"],
      [{ kind: WELL, sort: { field: [], order: ["ASC"] } }, "/body/sort/field", "'sort.field' can not be null or empty"],
      [{ kind: WELL, sort: { field: ["id"], order: [] } }, "/body/sort/order", "'sort.order' can not be null or empty"],
      [{ kind: WELL, sort: { field: ["id", "kind"], order: ["ASC"] } }, "/body/sort", "'sort.field' and 'sort.order' size do not match"],
      [{ kind: WELL, sort: { field: [""], order: ["ASC"] } }, "/body/sort/field/0", "'sort.field' list can not have null or empty values"],
      [
        { kind: WELL, sort: { field: ["id"], order: ["UP"] } },
        "/body/sort/order/0",
        "Not a valid order option. It can only be either 'ASC' or 'DESC'",
      ],
      [
        { kind: WELL, spatialFilter: { field: "data.Location", byDistance: { point: { latitude: 91, longitude: 0 }, distance: 1 } } },
        "/body/spatialFilter/byDistance/point/latitude",
        "'latitude' value is out of the range [-90, 90]",
      ],
      [
        { kind: WELL, spatialFilter: { field: "data.Location", byDistance: { point: { latitude: 0, longitude: 181 }, distance: 1 } } },
        "/body/spatialFilter/byDistance/point/longitude",
        "'longitude' value is out of the range [-180, 180]",
      ],
      [
        { kind: WELL, spatialFilter: { field: "data.Location", byDistance: { point: { latitude: 0, longitude: 0 }, distance: 0 } } },
        "/body/spatialFilter/byDistance/distance",
        "'distance' must be greater than 0",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byBoundingBox: { topLeft: { latitude: 1, longitude: 0 }, bottomRight: { latitude: 2, longitude: 1 } },
          },
        },
        "/body/spatialFilter/byBoundingBox",
        "top corner is below bottom corner: 1.0 vs. 2.0",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byBoundingBox: { topLeft: { latitude: 2, longitude: 1 }, bottomRight: { latitude: 1, longitude: 0 } },
          },
        },
        "/body/spatialFilter/byBoundingBox",
        "left corner and right corner are flipped: 1.0 vs. 0.0",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byBoundingBox: { topLeft: { latitude: 1, longitude: 0 }, bottomRight: { latitude: 1, longitude: 1 } },
          },
        },
        "/body/spatialFilter/byBoundingBox",
        "top latitude cannot be the same as bottom latitude: 1.0 == 1.0",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byBoundingBox: { topLeft: { latitude: 2, longitude: 1 }, bottomRight: { latitude: 1, longitude: 1 } },
          },
        },
        "/body/spatialFilter/byBoundingBox",
        "left longitude cannot be the same as right longitude: 1.0 == 1.0",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byGeoPolygon: {
              points: points([
                [0, 0],
                [1, 1],
              ]),
            },
          },
        },
        "/body/spatialFilter/byGeoPolygon/points",
        "too few points defined for geo polygon query",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byIntersection: {
              polygons: [
                {
                  points: points([
                    [0, 0],
                    [1, 0],
                    [1, 1],
                    [0, 1],
                  ]),
                },
              ],
            },
          },
        },
        "/body/spatialFilter/byIntersection/polygons/0/points",
        "The first point must match the last point to close the polygon",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byIntersection: {
              polygons: [
                {
                  points: points([
                    [0, 0],
                    [1, 0],
                    [0, 0],
                  ]),
                },
              ],
            },
          },
        },
        "/body/spatialFilter/byIntersection/polygons/0/points",
        "Polygons must have at least 4 points",
      ],
      [
        {
          kind: WELL,
          spatialFilter: {
            field: "data.Location",
            byDistance: { point: { latitude: 0, longitude: 0 }, distance: 1 },
            byGeoPolygon: { points: points(square(0, 0, 1, 1)) },
          },
        },
        "/body/spatialFilter",
        "only one criteria can be used with SpatialFilter",
      ],
    ];
    for (const [body, pointer, message] of cases) {
      const res = await api(derrick, "/api/search/v2/query", { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.reason).toBe("Bad Request");
      expect(problem.errors, JSON.stringify(body)).toContainEqual({ pointer, message });
    }
    // OSDU's framing of a missing kind, not the schema's "expected required property".
    expect(await (await api(derrick, "/api/search/v2/query", { body: {} })).json()).toMatchObject({
      code: 400,
      reason: "Bad Request",
      message: "Invalid parameters were given on search request",
    });
    // offset + effective limit = 10000 exactly is allowed (limit 0 → 10).
    expect((await api(derrick, "/api/search/v2/query", { body: { kind: WELL, offset: 9990 } })).status).toBe(200);
    expect((await api(derrick, "/api/search/v2/query", { body: { kind: WELL, limit: 5000 } })).status).toBe(200);
  });

  it("search - bounding box messages print coordinates as OSDU does (Java's Double.toString: 10.0, -100.0, 1.0E-4)", async ({
    derrick,
  }) => {
    const box = (top: number, left: number, bottom: number, right: number) => ({
      kind: WELL,
      spatialFilter: {
        field: "data.Location",
        byBoundingBox: { topLeft: { latitude: top, longitude: left }, bottomRight: { latitude: bottom, longitude: right } },
      },
    });
    // The rows of OSDU's acceptance test (Query.feature, invalid bounding box inputs), then decimals and tiny values.
    const cases: Array<[Record<string, unknown>, string]> = [
      [box(0, 0, 0, 0), "top latitude cannot be the same as bottom latitude: 0.0 == 0.0"],
      [box(0, -100, -10, -100), "left longitude cannot be the same as right longitude: -100.0 == -100.0"],
      [box(10, -100, 10, 0), "top latitude cannot be the same as bottom latitude: 10.0 == 10.0"],
      [box(0, -100, 10, 0), "top corner is below bottom corner: 0.0 vs. 10.0"],
      [box(50.78, 60, 70.145, 70.23), "top corner is below bottom corner: 50.78 vs. 70.145"],
      [box(80.78, 90, 70.145, 70.23), "left corner and right corner are flipped: 90.0 vs. 70.23"],
      [box(0.0001, 0, 0.0002, 1), "top corner is below bottom corner: 1.0E-4 vs. 2.0E-4"],
      [box(1, -0.00015, 0, -0.00025), "left corner and right corner are flipped: -1.5E-4 vs. -2.5E-4"],
    ];
    for (const [body, message] of cases) {
      const res = await api(derrick, "/api/search/v2/query", { body });
      expect(res.status, message).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.message).toBe("Invalid parameters were given on search request");
      expect(problem.errors!.map((e) => e.message)).toContain(message);
    }
  });

  it("search - a bounding box gets only the first of OSDU's corner messages, in OSDU's order", async ({ derrick }) => {
    const box = (top: number, left: number, bottom: number, right: number) => ({
      kind: WELL,
      spatialFilter: {
        field: "data.Location",
        byBoundingBox: { topLeft: { latitude: top, longitude: left }, bottomRight: { latitude: bottom, longitude: right } },
      },
    });
    const cases: Array<[Record<string, unknown>, string]> = [
      // OSDU's acceptance row: top == bottom and left == right, one error.
      [box(0, 0, 0, 0), "top latitude cannot be the same as bottom latitude: 0.0 == 0.0"],
      [box(0, 10, 10, 0), "top corner is below bottom corner: 0.0 vs. 10.0"],
      [box(10, 10, 10, 0), "left corner and right corner are flipped: 10.0 vs. 0.0"],
    ];
    for (const [body, message] of cases) {
      const res = await api(derrick, "/api/search/v2/query", { body });
      expect(res.status, message).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.errors).toEqual([{ pointer: "/body/spatialFilter/byBoundingBox", message }]);
    }
  });

  it("search - a null entry in sort.order or sort.field answers OSDU's sort message, not a type error", async ({ derrick }) => {
    // OSDU's acceptance test (Query.feature, invalid sort field): {"field":["id"],"order":[null]}.
    for (const [sort, pointer, message] of [
      [{ field: ["id"], order: [null] }, "/body/sort/order/0", "Not a valid order option. It can only be either 'ASC' or 'DESC'"],
      [{ field: [null], order: ["ASC"] }, "/body/sort/field/0", "'sort.field' list can not have null or empty values"],
    ] as const) {
      for (const route of ["/query", "/query_with_cursor"]) {
        const res = await api(derrick, `/api/search/v2${route}`, { body: { kind: WELL, sort } });
        expect(res.status, `${route} ${pointer}`).toBe(400);
        const problem = await expectProblem(res, 400);
        expect(problem.message).toBe("Invalid parameters were given on search request");
        expect(problem.errors, `${route} ${pointer}`).toEqual([{ pointer, message }]);
      }
    }
  });

  it("search - a kind list with an empty entry is 400 'Not a valid record kind format', naming the kind as given (OSDU)", async ({
    derrick,
  }) => {
    // OSDU's acceptance test (Query.feature): "A,,B" → "Not a valid record kind format. Found: A,,B".
    for (const [kind, found] of [
      [`${WELL},,${WELLBORE}`, `${WELL},,${WELLBORE}`],
      [`,${WELL}`, `,${WELL}`],
      [`${WELL}, ,${WELLBORE}`, `${WELL}, ,${WELLBORE}`],
      [`${WELL},abc`, `${WELL},abc`],
      [[WELL, "abc"], `[${WELL}, abc]`],
    ] as const) {
      const res = await api(derrick, "/api/search/v2/query", { body: { kind } });
      expect(res.status, JSON.stringify(kind)).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.message).toBe("Invalid parameters were given on search request");
      expect(problem.errors, JSON.stringify(kind)).toEqual([
        { pointer: "/body/kind", message: `Not a valid record kind format. Found: ${found}` },
      ]);
    }
    // A trailing comma is dropped, as Java's String.split drops trailing empty strings.
    expect((await searchOk(derrick, { kind: `${WELL},` })).totalCount).toBe(3);
  });

  it("search - byWithinPolygon is applied as OSDU's query builder does (not at all), but its points are range-checked as OSDU's validator does", async ({
    derrick,
  }) => {
    const within = (points: Array<{ latitude: number; longitude: number }>) => ({
      kind: WELL,
      spatialFilter: { field: "data.Location", byWithinPolygon: { points } },
    });
    for (const [points, pointer, message] of [
      [
        [{ latitude: 0, longitude: 200 }],
        "/body/spatialFilter/byWithinPolygon/points/0/longitude",
        "'longitude' value is out of the range [-180, 180]",
      ],
      [
        [
          { latitude: 0, longitude: 0 },
          { latitude: -95, longitude: 0 },
        ],
        "/body/spatialFilter/byWithinPolygon/points/1/latitude",
        "'latitude' value is out of the range [-90, 90]",
      ],
    ] as const) {
      const res = await api(derrick, "/api/search/v2/query", { body: within([...points]) });
      expect(res.status, pointer).toBe(400);
      expect((await expectProblem(res, 400)).errors!).toEqual([{ pointer, message }]);
    }
    expect((await searchOk(derrick, within([{ latitude: 10.75, longitude: -8.6 }]))).totalCount).toBe(3);
  });

  it("search - a spatialFilter with a field and no criteria filters nothing (OSDU's query builder adds no geo query), it is not a 400", async ({
    derrick,
  }) => {
    const all = ids(await searchOk(derrick, { kind: "*:*:*:*" }));
    for (const spatialFilter of [
      { field: "data.Location" },
      { field: "data.Location", byBoundingBox: null, byDistance: null, byGeoPolygon: null, byIntersection: null, byWithinPolygon: null },
    ]) {
      expect(ids(await searchOk(derrick, { kind: "*:*:*:*", spatialFilter })), JSON.stringify(spatialFilter)).toEqual(all);
    }
    // The field is still required.
    expect((await api(derrick, "/api/search/v2/query", { body: { kind: WELL, spatialFilter: { field: " " } } })).status).toBe(400);
  });

  it("search - JSON null in an optional field means absent, and a null or empty cursor is a first call (OSDU)", async ({ derrick }) => {
    const nulls = {
      query: null,
      offset: null,
      limit: null,
      sort: null,
      queryAsOwner: null,
      trackTotalCount: null,
      spatialFilter: null,
      aggregateBy: null,
      returnedFields: null,
      highlightedFields: null,
      suggestPhrase: null,
    };
    expect(await searchOk(derrick, { kind: WELL, ...nulls })).toEqual(await searchOk(derrick, { kind: WELL }));
    for (const cursor of [null, ""]) {
      const res = await api(derrick, "/api/search/v2/query_with_cursor", {
        body: { kind: WELL, cursor, query: null, limit: null, sort: null, returnedFields: null },
      });
      expect(res.status, String(cursor)).toBe(200);
      expect(await res.json()).toMatchObject({ totalCount: 3, cursor: expect.stringMatching(/^[0-9A-F]{32}$/) });
    }
    const box = { topLeft: { latitude: 59, longitude: 2 }, bottomRight: { latitude: 58, longitude: 3.5 } };
    const spatial = {
      field: "data.Location",
      byBoundingBox: box,
      byDistance: null,
      byGeoPolygon: null,
      byIntersection: null,
      byWithinPolygon: null,
    };
    expect(ids(await searchOk(derrick, { spatialFilter: spatial, sort: { field: ["id"], order: ["ASC"], filter: null } }))).toEqual([
      W1,
      W3,
    ]);
  });

  it("search - wrong types are 400 naming the field; unknown fields are ignored, as OSDU ignores them", async ({ derrick }) => {
    expect(await searchOk(derrick, { kind: WELL, size: 10, from: 2 })).toEqual(await searchOk(derrick, { kind: WELL }));
    for (const [body, pointer] of [
      [{ kind: 5 }, "/body/kind"],
      [{ kind: WELL, limit: "ten" }, "/body/limit"],
    ] as const) {
      const res = await api(derrick, "/api/search/v2/query", { body });
      expect(res.status).toBe(400);
      expect((await expectProblem(res, 400)).errors!.map((e) => e.pointer)).toContain(pointer);
    }
  });

  it("search - a body the schema refuses or that is not JSON answers OSDU's message, 'Invalid parameters were given on search request', on both query routes", async ({
    derrick,
  }) => {
    // OSDU's acceptance test (Query.feature): a number as kind is "Bad Request" / "Invalid parameters were given on search request".
    for (const route of ["/query", "/query_with_cursor"]) {
      for (const [body, pointer] of [
        [{ kind: 123456789 }, "/body/kind"],
        [{ kind: WELL, limit: "ten" }, "/body/limit"],
        [
          {
            kind: WELL,
            spatialFilter: {
              field: "data.Location",
              byBoundingBox: { topLeft: { longitude: 0 }, bottomRight: { latitude: 0, longitude: 1 } },
            },
          },
          "/body/spatialFilter/byBoundingBox/topLeft/latitude",
        ],
      ] as const) {
        const res = await api(derrick, `/api/search/v2${route}`, { body });
        expect(res.status, `${route} ${pointer}`).toBe(400);
        const problem = await expectProblem(res, 400);
        expect(problem, `${route} ${pointer}`).toMatchObject({
          code: 400,
          reason: "Bad Request",
          message: "Invalid parameters were given on search request",
        });
        expect(problem.errors!.map((e) => e.pointer)).toContain(pointer);
      }
      const token = await tokenOf(derrick, "writer");
      const unreadable = await fetch(`${derrick.url}/api/search/v2${route}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "data-partition-id": "opendes", "content-type": "application/json" },
        body: "{not json",
      });
      expect(unreadable.status).toBe(400);
      expect(await unreadable.json(), route).toMatchObject({
        code: 400,
        reason: "Bad Request",
        message: "Invalid parameters were given on search request",
      });
    }
  });

  it("search - field paths, sort fields and aggregateBy beyond their lengths are 400 naming the entry, on both query routes", async ({
    derrick,
  }) => {
    const path = `data.${"x".repeat(FIELD_PATH_MAX_LENGTH)}`;
    const expression = `nested(data.A, ${"y".repeat(FIELD_EXPRESSION_MAX_LENGTH)})`;
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["/query", { returnedFields: ["id", path] }, "/body/returnedFields/1"],
      ["/query", { highlightedFields: [path] }, "/body/highlightedFields/0"],
      [
        "/query",
        { spatialFilter: { field: path, byDistance: { point: { latitude: 0, longitude: 0 }, distance: 1 } } },
        "/body/spatialFilter/field",
      ],
      ["/query", { sort: { field: [expression], order: ["ASC"] } }, "/body/sort/field/0"],
      ["/query", { aggregateBy: expression }, "/body/aggregateBy"],
      ["/query_with_cursor", { highlightedFields: [path] }, "/body/highlightedFields/0"],
      ["/query_with_cursor", { sort: { field: [expression], order: ["ASC"] } }, "/body/sort/field/0"],
    ];
    for (const [route, body, pointer] of cases) {
      const res = await api(derrick, `/api/search/v2${route}`, { body: { kind: WELL, ...body } });
      expect(res.status, pointer).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.reason).toBe("Bad Request");
      expect(problem.errors, pointer).toContainEqual({ pointer, message: expect.stringMatching(/length less or equal to/) });
    }
  });

  it("search - a malformed query is 400 Malformed query with the position", async ({ derrick }) => {
    const res = await api(derrick, "/api/search/v2/query", { body: { kind: WELL, query: 'data.Name:"abc' } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      reason: "Malformed query",
      position: 10,
      message: expect.stringContaining("unbalanced double quotes"),
    });
    const leading = await api(derrick, "/api/search/v2/query", { body: { kind: WELL, query: "data.Name:*ell" } });
    expect(leading.status).toBe(400);
    expect(await leading.json()).toMatchObject({ position: 10 });
  });

  it("search - an operator where a term belongs (a AND AND b, NOT NOT a, field:OR) is 400 Malformed query with its position, as Lucene's parser refuses it", async ({
    derrick,
  }) => {
    for (const [query, position] of [
      ["Ocean AND AND Drilling", 10],
      ["NOT NOT Ocean", 4],
      ["Ocean OR || Drilling", 9],
      ["data.Basin:OR", 11],
      ["Ocean AND (NOT AND Drilling)", 15],
    ] as const) {
      const res = await api(derrick, "/api/search/v2/query", { body: { kind: WELL, query } });
      expect(res.status, query).toBe(400);
      expect(await res.json(), query).toMatchObject({ reason: "Malformed query", position });
    }
    // Lowercase and escaped operators are ordinary words.
    expect(ids(await searchOk(derrick, { query: "Ocean and Alpha" }))).toEqual([W1]);
    expect((await api(derrick, "/api/search/v2/query", { body: { kind: WELL, query: "Ocean \\AND" } })).status).toBe(200);
  });

  it("storage - PUT needs users.datalake.editors and ids in the request's partition", async ({ derrick }) => {
    const denied = await api(derrick, "/api/storage/v2/records", {
      as: "north",
      method: "PUT",
      body: [{ kind: WELL, acl: NORTH_ACL, data: {} }],
    });
    expect(denied.status).toBe(403);
    const wrongPartition = await api(derrick, "/api/storage/v2/records", {
      method: "PUT",
      body: [{ id: "other:well:1", kind: WELL, acl: NORTH_ACL, data: {} }],
    });
    expect(wrongPartition.status).toBe(400);
    expect((await expectProblem(wrongPartition, 400)).errors![0]!.pointer).toBe("/body/0/id");
    const badKind = await api(derrick, "/api/storage/v2/records", { method: "PUT", body: [{ kind: "well", acl: NORTH_ACL, data: {} }] });
    expect(badKind.status).toBe(400);
    // Unknown fields are ignored, as OSDU's Record ignores them: test/search/osdu-clients.test.ts.
  });

  it("storage - a record put is 201 with ids and versions, readable by its viewers and searchable within a second", async ({ derrick }) => {
    const started = Date.now();
    const created = await putRecords(derrick, [{ kind: WELL, acl: SOUTH_ACL, data: { FacilityName: "Freshly Generated" } }]);
    expect(created.recordCount).toBe(1);
    const id = created.recordIds[0]!;
    expect(id).toMatch(/^opendes:master-data--Well:[0-9a-f]{32}$/);
    expect(created.recordIdVersions[0]).toMatch(new RegExp(`^${id}:\\d+$`));
    await eventually(async () => (await searchOk(derrick, { query: "freshly" })).totalCount === 1, {
      timeoutMs: 1000,
      intervalMs: 10,
      what: "searchable within one second",
    });
    expect(Date.now() - started).toBeLessThan(1500);
    const read = await api(derrick, `/api/storage/v2/records/${id}`, { as: "south" });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ id, kind: WELL, data: { FacilityName: "Freshly Generated" }, createUser: "writer" });
    expect((await api(derrick, `/api/storage/v2/records/${id}`, { as: "north" })).status).toBe(403);
    expect((await api(derrick, "/api/storage/v2/records/opendes:well:nothing", { as: "south" })).status).toBe(404);
  });

  it("storage - an update and a delete are reflected in search results", async ({ derrick }) => {
    const id = "opendes:well:changing";
    const first = await putRecords(derrick, [{ id, kind: WELL, acl: SOUTH_ACL, data: { FacilityName: "Before Change", Depth: 10 } }]);
    await untilFound(derrick, "data.FacilityName:before", 1, "first version indexed");
    const second = await putRecords(derrick, [{ id, kind: WELL, acl: SOUTH_ACL, data: { FacilityName: "After Change", Depth: 20 } }]);
    expect(Number(second.recordIdVersions[0]!.split(":").pop())).toBeGreaterThan(Number(first.recordIdVersions[0]!.split(":").pop()));
    await untilFound(derrick, "data.FacilityName:after", 1, "second version indexed");
    expect((await searchOk(derrick, { query: "data.FacilityName:before" })).totalCount).toBe(0);
    expect((await searchOk(derrick, { query: "data.Depth:20" })).totalCount).toBe(1);
    const read = (await (await api(derrick, `/api/storage/v2/records/${id}`)).json()) as Record<string, unknown>;
    expect(read).toMatchObject({ modifyUser: "writer", createUser: "writer" });

    expect((await api(derrick, `/api/storage/v2/records/${id}:delete`, { as: "north", method: "POST" })).status).toBe(403);
    expect((await api(derrick, `/api/storage/v2/records/${W1}:delete`, { as: "southOwner", method: "POST" })).status).toBe(403);
    expect((await api(derrick, `/api/storage/v2/records/${id}:delete`, { method: "POST" })).status).toBe(204);
    expect((await api(derrick, `/api/storage/v2/records/${id}`)).status).toBe(404);
    await untilFound(derrick, "data.FacilityName:after", 0, "delete reflected");
  });

  it("storage - GET answers as OSDU: 403 Access denied for a record the caller may not read, 404 Record not found for a missing or deleted one; the 403 tells nothing of the record", async ({
    derrick,
  }) => {
    // OSDU's storage (QueryServiceImpl) answers these two statuses, so a caller holding a storage
    // role learns whether an id exists, as in OSDU; what a 403 must not carry is anything of the record.
    const id = "opendes:well:north-secret";
    const gone = "opendes:well:north-gone";
    const missing = "opendes:well:north-never";
    const put = await putRecords(derrick, [
      {
        id,
        kind: WELL,
        acl: NORTH_ACL,
        legal: { legaltags: ["opendes-secret-tag"], otherRelevantDataCountries: ["NO"] },
        data: { FacilityName: "Hidden Treasure", Code: "XYZZY-42" },
      },
      { id: gone, kind: WELL, acl: NORTH_ACL, data: { FacilityName: "Soon Deleted" } },
    ]);
    expect((await api(derrick, `/api/storage/v2/records/${gone}:delete`, { method: "POST" })).status).toBe(204);
    expect((await api(derrick, `/api/storage/v2/records/${id}`, { as: "north" })).status).toBe(200);

    const forbidden = await api(derrick, `/api/storage/v2/records/${id}`, { as: "south" });
    expect(forbidden.status).toBe(403);
    const text = await forbidden.text();
    expect(JSON.parse(text)).toEqual({
      type: "urn:derrick:problem:access-denied",
      title: "Access denied",
      status: 403,
      // What would allow it, by the ACL's field names: never its groups.
      detail:
        "The user is not authorized to perform this action: reading this record needs one of the groups in its acl.viewers or acl.owners, or users.data.root",
      // The path the caller asked for (its own input), nothing read from the record.
      instance: `/api/storage/v2/records/${id}`,
      code: 403,
      reason: "Access denied",
      message:
        "The user is not authorized to perform this action: reading this record needs one of the groups in its acl.viewers or acl.owners, or users.data.root",
    });
    const version = put.recordIdVersions[0]!.split(":").pop()!;
    for (const part of ["Hidden Treasure", "XYZZY", "data.north", "opendes-secret-tag", WELL, "writer", version])
      expect(text).not.toContain(part);
    expect(forbidden.headers.get("etag")).toBeNull();
    expect(forbidden.headers.get("last-modified")).toBeNull();

    // Missing and deleted answer alike, whoever asks (OSDU looks at the record's state before its ACL).
    for (const [absent, as] of [
      [missing, "south"],
      [gone, "south"],
      [gone, "north"],
    ] as const) {
      const res = await api(derrick, `/api/storage/v2/records/${absent}`, { as });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 404, reason: "Record not found", message: `The record '${absent}' was not found` });
    }
    // Without a storage role nothing tells an existing record from a missing one.
    const noRole = await Promise.all(
      [id, missing].map(async (which) => {
        const res = await api(derrick, `/api/storage/v2/records/${which}`, { as: "norole" });
        // `instance` is the path asked for; the rest must be the same.
        const { instance: _path, ...body } = (await res.json()) as Record<string, unknown>;
        return { status: res.status, body };
      }),
    );
    expect(noRole[0]!.status).toBe(403);
    expect(noRole[1]).toEqual(noRole[0]);
    // Delete: the same statuses (OSDU's deleteRecord), the 404 with OSDU's delete message.
    const deleteMissing = await api(derrick, `/api/storage/v2/records/${missing}:delete`, { method: "POST" });
    expect(deleteMissing.status).toBe(404);
    expect(await deleteMissing.json()).toMatchObject({ reason: "Record not found", message: `Record with id '${missing}' does not exist` });
    const deleteForbidden = await api(derrick, `/api/storage/v2/records/${id}:delete`, { as: "southOwner", method: "POST" });
    expect(deleteForbidden.status).toBe(403);
    expect(await deleteForbidden.text()).not.toContain("Hidden Treasure");
  });

  it("storage - an existing record is replaced only by an owner of its current ACL (OSDU 403 User Unauthorized); users.data.root may replace any", async ({
    derrick,
  }) => {
    const id = "opendes:well:north-owned";
    await putRecords(derrick, [{ id, kind: WELL, acl: NORTH_ACL, data: { FacilityName: "North Owned" } }]);
    // southOwner is an editor but owns nothing in NORTH_ACL: neither the takeover (ACL included) nor the new record beside it is written.
    const fresh = "opendes:well:south-fresh";
    const takeover = await api(derrick, "/api/storage/v2/records", {
      as: "southOwner",
      method: "PUT",
      body: [
        { id: fresh, kind: WELL, acl: SOUTH_ACL, data: {} },
        { id, kind: WELL, acl: SOUTH_ACL, data: { FacilityName: "Taken Over" } },
      ],
    });
    expect(takeover.status).toBe(403);
    expect(await takeover.json()).toMatchObject({
      code: 403,
      reason: "User Unauthorized",
      message: expect.stringMatching(/^User is not authorized to update records\. /),
    });
    expect(await (await api(derrick, `/api/storage/v2/records/${id}`)).json()).toMatchObject({
      acl: NORTH_ACL,
      data: { FacilityName: "North Owned" },
    });
    expect((await api(derrick, `/api/storage/v2/records/${fresh}`)).status).toBe(404);
    // Its own records it creates and replaces; users.data.root replaces a record it does not own.
    await putRecords(derrick, [{ id: fresh, kind: WELL, acl: SOUTH_ACL, data: { Step: 1 } }], "southOwner");
    await putRecords(derrick, [{ id: fresh, kind: WELL, acl: SOUTH_ACL, data: { Step: 2 } }], "southOwner");
    await putRecords(derrick, [{ id, kind: WELL, acl: NORTH_ACL, data: { FacilityName: "Root Edited" } }], "rootEditor");
    expect(await (await api(derrick, `/api/storage/v2/records/${id}`)).json()).toMatchObject({
      data: { FacilityName: "Root Edited" },
      modifyUser: "rootEditor",
    });
  });

  it("storage - a write is conditioned on the stream sequence its owner check read: an ACL changed in between is checked again", async ({
    derrick,
  }) => {
    const store = await openRecordStore(derrick.nc);
    const id = "opendes:well:raced";
    const record = (acl: typeof NORTH_ACL, data: Record<string, unknown>): StoredRecord => ({
      id,
      kind: WELL,
      acl,
      data,
      version: 1,
      createUser: "test",
      createTime: "2026-01-01T00:00:00Z",
    });
    // The store: a write expecting a sequence the subject has moved past is refused.
    const unseen = await store.read("opendes", id);
    expect(unseen).toEqual({ record: undefined, seq: 0 });
    await store.put("opendes", record(SOUTH_ACL, { Step: 1 }));
    await expect(store.put("opendes", record(SOUTH_ACL, { Step: 2 }), unseen.seq)).rejects.toBeInstanceOf(RecordChanged);
    // The handler: southOwner's check passes on the south-owned version; before its write lands, the
    // record's owner hands it to north. The write must not go through over a version it did not check.
    let handedOver = false;
    const racing = {
      ...store,
      read: async (partition: string, recordId: string) => {
        const read = await store.read(partition, recordId);
        if (!handedOver) {
          handedOver = true;
          await store.put(partition, record(NORTH_ACL, { Step: "north" }));
        }
        return read;
      },
    };
    const ctx = {
      requestId: "race",
      log: createLogger("silent"),
      partition: "opendes",
      principal: {
        clientId: "southOwner",
        subject: "southOwner",
        groups: ["users.datalake.editors", "data.south.owners"],
        kind: "service" as const,
      },
    };
    const attempt = putRecordsHandler({ body: [{ id, kind: WELL, acl: SOUTH_ACL, data: { Step: "south" } }] }, ctx, { records: racing });
    await expect(attempt).rejects.toMatchObject({ status: 403, title: "User Unauthorized" } satisfies Partial<DerrickError>);
    expect(await store.read("opendes", id)).toMatchObject({ record: { acl: NORTH_ACL, data: { Step: "north" } } });
  });

  it("records - a record published straight on NATS (derrick.records.<partition>.<sha1(id)>) is searchable", async ({ derrick }) => {
    const id = "opendes:well:from-nats";
    const js = jetstream(derrick.nc);
    const record = { id, kind: WELL, acl: NORTH_ACL, data: { FacilityName: "Published Directly" } };
    await js.publish(subjects.records("opendes", recordKey(id)), JSON.stringify(record));
    // A subject key that is not the id's SHA-1 is skipped, not indexed under a wrong key.
    await js.publish(
      subjects.records("opendes", "0000"),
      JSON.stringify({ ...record, id: "opendes:well:mismatch", data: { FacilityName: "Published Wrongly" } }),
    );
    await untilFound(derrick, "published", 1, "NATS record indexed", { as: "north" });
    expect(ids(await searchOk(derrick, { query: "published" }, "north"))).toEqual([id]);
  });

  it("search - a record key named __proto__ is stored, indexed and returned like any other key, with or without returnedFields; no prototype changes", async ({
    derrick,
  }) => {
    const before = Object.getOwnPropertyNames(Object.prototype).sort();
    const id = "opendes:well:proto-key";
    // Built by JSON.parse, as a request body is: `__proto__` is an own key (an object literal would set the prototype instead).
    const own = (json: string) => JSON.parse(json) as Record<string, any>;
    const data = own(
      `{"FacilityName": "Prototype Keyed", "__proto__": {"Polluted": "protovalue", "Depth": 7}, "Nested": {"__proto__": "inner", "Other": 1}}`,
    );
    await putRecords(derrick, [{ id, kind: WELL, acl: NORTH_ACL, data }]);
    await untilFound(derrick, "protovalue", 1, "__proto__ record indexed");
    const hasOwn = (value: unknown, key: string) => value !== null && typeof value === "object" && Object.hasOwn(value, key);

    // Indexed under its path like any key: a field term and a highlight find it.
    const fielded = await searchOk(derrick, {
      query: "data.__proto__.Polluted:protovalue",
      highlightedFields: ["data.__proto__.Polluted"],
    });
    expect(fielded.results.map((r) => r.id)).toEqual([id]);
    expect(fielded.results[0]!.highlight).toEqual({ "data.__proto__.Polluted": ["<em>protovalue</em>"] });
    expect(fielded.totalCount).toBe(1);

    // Without returnedFields: the whole record, its __proto__ keys included.
    const full = (await searchOk(derrick, { query: "protovalue" })).results[0]!;
    expect(full.data).toEqual(data);
    expect(hasOwn(full.data, "__proto__")).toBe(true);
    expect(hasOwn(full.data.Nested, "__proto__")).toBe(true);

    // With returnedFields: the key itself, a path below it, a wildcard over it, its parent.
    const picked = async (returnedFields: string[]) => (await searchOk(derrick, { query: "protovalue", returnedFields })).results;
    expect(await picked(["id", "data.__proto__"])).toEqual([
      own(`{"id": "${id}", "data": {"__proto__": {"Polluted": "protovalue", "Depth": 7}}}`),
    ]);
    expect(hasOwn((await picked(["data.__proto__"]))[0]!.data, "__proto__")).toBe(true);
    expect(await picked(["data.__proto__.Polluted", "data.Nested.__proto__"])).toEqual([
      own(`{"data": {"__proto__": {"Polluted": "protovalue"}, "Nested": {"__proto__": "inner"}}}`),
    ]);
    expect(await picked(["data.*"])).toEqual([{ data }]);
    expect(await picked(["data"])).toEqual([{ data }]);
    const cursorPage = await api(derrick, "/api/search/v2/query_with_cursor", {
      body: { kind: WELL, query: "protovalue", returnedFields: ["data.__proto__"] },
    });
    expect(((await cursorPage.json()) as Page).results).toEqual([own(`{"data": {"__proto__": {"Polluted": "protovalue", "Depth": 7}}}`)]);

    // Storage GET returns it as stored.
    const read = (await (await api(derrick, `/api/storage/v2/records/${id}`)).json()) as Record<string, any>;
    expect(read.data).toEqual(data);
    expect(hasOwn(read.data, "__proto__")).toBe(true);

    // A record without such a key gives nothing for it: no inherited property is read as a value.
    expect(
      (await searchOk(derrick, { query: "id:opendes\\:well\\:w1", returnedFields: ["id", "data.__proto__", "data.constructor"] })).results,
    ).toEqual([{ id: W1 }]);
    // `constructor` is no key of these elements: NOT _exists_ holds for each (it read Object's constructor before).
    expect(
      ids(
        await searchOk(derrick, {
          kind: WELL,
          query: "nested(data.VerticalMeasurements, (VerticalMeasurementID:TD AND NOT _exists_:constructor))",
        }),
      ),
    ).toEqual([W1, W2]);

    // Nothing reached a prototype, in the edge or the actors (they run in this process).
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
    expect(({} as Record<string, unknown>).Polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).Depth).toBeUndefined();
  });
});
