/**
 * Query semantics where a reviewer found derrick and OSDU-on-Elasticsearch apart: nested() with a
 * negation, field terms on numbers and dates, `version` as a number, `acl.*` as keywords, date math,
 * projection into arrays and the highlight member. Through the edge, on records put through storage.
 */
import { describe, expect } from "vitest";
import { eventually, type TestDerrick } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import { NORTH_ACL, SOUTH_ACL, WELL, api, ids, putRecords, searchOk, searchTest, type Page } from "./helpers.ts";

const R1 = "opendes:well:sem-1";
const R2 = "opendes:well:sem-2";
const R3 = "opendes:well:sem-3";
const HOUR = 3_600_000;

const it = searchTest();

describe("search query semantics (as OSDU on Elasticsearch)", () => {
  let versions: Record<string, number>;
  it.beforeAll(async ({ derrick }) => {
    const put = await putRecords(derrick, [
      {
        id: R1,
        kind: WELL,
        acl: NORTH_ACL,
        data: {
          FacilityName: "Ocean Drilling Alpha",
          Depth: 100.5,
          Neg: -5,
          SpudDate: "2017-03-01T10:00:00Z",
          Reviewed: new Date(Date.now() - HOUR).toISOString(),
          Items: [
            { name: "a1", val: 1 },
            { name: "b2", val: 2 },
          ],
        },
      },
      {
        id: R2,
        kind: WELL,
        acl: NORTH_ACL,
        data: {
          FacilityName: "Drilling Bravo",
          Depth: 5,
          Neg: 5,
          SpudDate: "2018-06-15T00:00:00Z",
          Reviewed: "2020-01-01T00:00:00Z",
          Items: [{ name: "a1", val: 2 }],
        },
      },
      { id: R3, kind: WELL, acl: SOUTH_ACL, data: { FacilityName: "Spillpath", Depth: 800, SpudDate: "2019-01-10", Label: "5 stars" } },
    ]);
    versions = Object.fromEntries(
      put.recordIdVersions.map((v) => [v.slice(0, v.lastIndexOf(":")), Number(v.slice(v.lastIndexOf(":") + 1))]),
    );
    await eventually(async () => (await searchOk(derrick, {})).totalCount === 3, { what: "records indexed" });
  });

  const expectIds = async (derrick: TestDerrick, query: string, expected: string[]) => {
    const page = await searchOk(derrick, { query });
    expect(ids(page), query).toEqual(expected);
    expect(page.totalCount, query).toBe(expected.length);
  };

  it("nested - a NOT inside nested() is about the element: a record with another element holding the value still matches", async ({
    derrick,
  }) => {
    await expectIds(derrick, "nested(data.Items, (name:a1 AND NOT val:2))", [R1]);
    await expectIds(derrick, "nested(data.Items, (NOT name:a1))", [R1]);
    await expectIds(derrick, "nested(data.Items, (name:a1 AND val:2))", [R2]);
    await expectIds(derrick, "nested(data.Items, (name:a1 AND NOT val:1)) AND data.FacilityName:bravo", [R2]);
  });

  it("terms - a field term that reads as a number matches numbers by value, and still the words of strings", async ({ derrick }) => {
    await expectIds(derrick, "data.Depth:5", [R2]);
    await expectIds(derrick, "data.Depth:100.5", [R1]);
    await expectIds(derrick, 'data.Depth:"100.5"', [R1]);
    await expectIds(derrick, "data.Neg:\\-5", [R1]);
    await expectIds(derrick, "data.Neg:5", [R2]);
    await expectIds(derrick, "data.Label:5", [R3]);
    // Inside nested() the same rule: val:1 is the element whose value is 1.
    await expectIds(derrick, "nested(data.Items, (val:1))", [R1]);
  });

  it("terms - a date term covers its whole day (ES date fields), beside the words of strings", async ({ derrick }) => {
    await expectIds(derrick, "data.SpudDate:2017-03-01", [R1]);
    await expectIds(derrick, 'data.SpudDate:"2019-01-10"', [R3]);
    await expectIds(derrick, "data.SpudDate:2017-03-02", []);
  });

  it("version - is a number (OSDU maps it as long): terms and ranges compare numbers", async ({ derrick }) => {
    await expectIds(derrick, `version:${versions[R2]}`, [R2]);
    await expectIds(derrick, "version:>999", [R1, R2, R3]);
    await expectIds(derrick, "version:[1 TO 9]", []);
    const sorted = await searchOk(derrick, { sort: { field: ["version"], order: ["DESC"] }, returnedFields: ["id"] });
    expect(sorted.results.map((r) => r.id)).toEqual([R1, R2, R3].sort((a, b) => versions[b]! - versions[a]!));
  });

  it("acl - acl.viewers and acl.owners are keyword fields that queries match exactly (access control unchanged)", async ({ derrick }) => {
    await expectIds(derrick, 'acl.viewers:"data.north.viewers@opendes.example.com"', [R1, R2]);
    await expectIds(derrick, 'acl.owners:"data.south.owners@opendes.example.com"', [R3]);
    await expectIds(derrick, "acl.owners:data.south.owners*", [R3]);
    await expectIds(derrick, "_exists_:acl.viewers", [R1, R2, R3]);
    expect(ids(await searchOk(derrick, { query: 'acl.owners:"data.south.owners@opendes.example.com"' }, "north"))).toEqual([]);
  });

  it("dates - ranges take ES date math (now, now-1d, now/d, date||+1M); malformed date math is 400 with its position", async ({
    derrick,
  }) => {
    await expectIds(derrick, "data.Reviewed:[now-1d TO now]", [R1]);
    await expectIds(derrick, "data.Reviewed:>now-2h", [R1]);
    await expectIds(derrick, "data.Reviewed:<now-1d/d", [R2]);
    await expectIds(derrick, "data.SpudDate:[2017-02-01||+1M/d TO 2017-03-01||/d]", [R1]);
    await expectIds(derrick, "createTime:<now-1d", []);
    await expectIds(derrick, "createTime:[now-1h TO *]", [R1, R2, R3]);
    const res = await api(derrick, "/api/search/v2/query", { body: { kind: WELL, query: "data.Reviewed:[now-1x TO now]" } });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ reason: "Malformed query", position: 15, message: expect.stringContaining("now-1x") });
  });

  it("unknown fields - a range, keyword, wildcard or comparison on a field no record holds is 200 with nothing (ES: unmapped field), not a 500", async ({
    derrick,
  }) => {
    for (const query of [
      "data.NoSuchField:[1 TO 2]",
      "data.NoSuchField:>1",
      "data.NoSuchField:[a TO b]",
      "data.NoSuchField.keyword:x",
      "data.NoSuchField.keywordLower:ab*",
      "data.NoSuchField:x*y",
      "data.SpudDate.year:[2017 TO 2018]",
    ]) {
      await expectIds(derrick, query, []);
    }
    await expectIds(derrick, "data.NoSuchField:[1 TO 2] OR data.Depth:5", [R2]);
    await expectIds(derrick, "NOT data.NoSuchField.keyword:x AND data.Depth:5", [R2]);
  });

  it("returnedFields - a path into an array of objects keeps that field of every element (ES _source includes)", async ({ derrick }) => {
    const page = await searchOk(derrick, { query: `id:${R1.replaceAll(":", "\\:")}`, returnedFields: ["id", "data.Items.name"] });
    expect(page.results).toEqual([{ id: R1, data: { Items: [{ name: "a1" }, { name: "b2" }] } }]);
    const wildcard = await searchOk(derrick, {
      query: `id:${R2.replaceAll(":", "\\:")}`,
      returnedFields: ["data.It*.val", "data.Nothing"],
    });
    expect(wildcard.results).toEqual([{ data: { Items: [{ val: 2 }] } }]);
  });

  it("highlight - a fragment of a long value never cuts a highlighted term or its <em> tags (ES keeps the term whole)", async ({
    derrick,
  }) => {
    // In the partition `other`, so the records the other tests count stay as they are.
    const id = "other:well:sem-long";
    const notes = `${"lorem ".repeat(40)}needle ${"ipsum ".repeat(40)}`;
    const token = `zz${"q".repeat(400)}`;
    const put = await api(derrick, "/api/storage/v2/records", {
      method: "PUT",
      partition: "other",
      body: [{ id, kind: WELL, acl: NORTH_ACL, data: { Notes: notes, Token: `${"dolor ".repeat(20)}${token}` } }],
    });
    expect(put.status).toBe(201);
    const query = async (q: string, field: string) => {
      const res = await api(derrick, "/api/search/v2/query", {
        partition: "other",
        body: { kind: WELL, query: q, highlightedFields: [field], returnedFields: ["id"] },
      });
      return (await json<Page>(res, 200)).results[0]?.highlight?.[field];
    };
    await eventually(async () => (await query("needle", "data.Notes")) !== undefined, { what: "long record indexed" });
    const [fragment] = (await query("needle", "data.Notes"))!;
    expect(fragment).toContain("<em>needle</em>");
    expect(fragment!.length).toBeLessThan(notes.length);
    // A term longer than the fragment size comes whole, its tags closed.
    const [whole] = (await query("zz*", "data.Token"))!;
    expect(whole).toContain(`<em>${token}</em>`);
    expect(whole!.split("<em>").length).toBe(whole!.split("</em>").length);
  });

  it("aggregateBy - nested(path, field) counts the array's elements, as ES's nested aggregation counts nested documents; a plain field counts records", async ({
    derrick,
  }) => {
    // In the partition `other`, so the records the other tests count stay as they are.
    const put = await api(derrick, "/api/storage/v2/records", {
      method: "PUT",
      partition: "other",
      body: [
        {
          id: "other:well:agg-1",
          kind: WELL,
          acl: NORTH_ACL,
          data: { Items: [{ name: "x" }, { name: "x" }, { name: "y" }], Tags: ["t", "t"] },
        },
        { id: "other:well:agg-2", kind: WELL, acl: NORTH_ACL, data: { Items: [{ name: "x" }], Tags: ["t"] } },
      ],
    });
    expect(put.status).toBe(201);
    const aggregate = async (aggregateBy: string) => {
      const res = await api(derrick, "/api/search/v2/query", {
        partition: "other",
        body: { kind: WELL, query: "id:other\\:well\\:agg*", aggregateBy, returnedFields: ["id"] },
      });
      return json<Page>(res, 200);
    };
    await eventually(async () => (await aggregate("data.Tags")).totalCount === 2, { what: "records indexed" });
    expect((await aggregate("nested(data.Items, name)")).aggregations).toEqual([
      { key: "x", count: 3 },
      { key: "y", count: 1 },
    ]);
    expect((await aggregate("data.Tags")).aggregations).toEqual([{ key: "t", count: 2 }]);
  });

  it("highlight - a result has no highlight member when none of its highlighted fields holds a query term", async ({ derrick }) => {
    const page = await searchOk(derrick, {
      query: "data.Depth:5 OR ocean",
      highlightedFields: ["data.FacilityName"],
      sort: { field: ["id"], order: ["ASC"] },
    });
    expect(page.results.map((r) => r.id)).toEqual([R1, R2]);
    expect(page.results[0]!.highlight).toEqual({ "data.FacilityName": ["<em>Ocean</em> Drilling Alpha"] });
    expect(page.results[1]).not.toHaveProperty("highlight");
  });

  it("highlight - a term on a field's .keyword subfield does not highlight the analyzed field (ES require_field_match defaults to true)", async ({
    derrick,
  }) => {
    const exact = await searchOk(derrick, {
      query: 'data.FacilityName.keyword:"Ocean Drilling Alpha"',
      highlightedFields: ["data.FacilityName"],
    });
    expect(exact.results.map((r) => r.id)).toEqual([R1]);
    expect(exact.results[0]).not.toHaveProperty("highlight");
    const lower = await searchOk(derrick, {
      query: 'data.FacilityName.keywordLower:"ocean drilling alpha"',
      highlightedFields: ["data.FacilityName"],
    });
    expect(lower.results.map((r) => r.id)).toEqual([R1]);
    expect(lower.results[0]).not.toHaveProperty("highlight");
    // A term on the field itself still highlights it, next to a .keyword term.
    const both = await searchOk(derrick, {
      query: 'data.FacilityName.keyword:"Ocean Drilling Alpha" AND data.FacilityName:alpha',
      highlightedFields: ["data.FacilityName"],
    });
    expect(both.results[0]!.highlight).toEqual({ "data.FacilityName": ["Ocean Drilling <em>Alpha</em>"] });
  });
});
