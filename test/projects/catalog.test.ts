import { afterAll, describe, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { endKvWatches, eventually, startDerrick, type TestDerrick, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem, getJson } from "../harness/json.ts";
import { contentOf, requestContent, taskIn } from "./helpers.ts";
import { BUCKETS, catalogStore } from "../../actors/projects/store.ts";
import { createLogger } from "../../platform/logger.ts";
import { CatalogList, catalogFrom, pageCatalog, readCatalogFile } from "../../actors/projects/catalog.ts";
import { checkValues, computeContent, splitUtf8, summarizeTable, valueProblem } from "../../actors/projects/compute.ts";
import { DerrickError } from "../../subjects/index.ts";
import { CatalogKind, type CatalogItem, type CatalogPage, type Project } from "../../subjects/projects.ts";
import { ADMIN_GROUP, MAX_CATALOG_ITEMS, putCatalogItem, type ProjectsDeps } from "../../actors/projects/handlers.ts";
import type { RequestContext } from "../../actors/runtime/context.ts";

const item = (id: string, category = "well"): CatalogItem => ({
  id,
  name: id,
  description: "",
  dataType: "number",
  category,
  objectTypes: ["well"],
});

describe("catalog and content computation (pure)", () => {
  it("catalog - an addition beyond the catalog's limit is refused; a replacement of a held item is not", async () => {
    const full = new CatalogList(Array.from({ length: MAX_CATALOG_ITEMS }, (_, i) => item(`item-${i}`)));
    const catalog = { [CatalogKind.displayItems]: full, [CatalogKind.keyParameters]: new CatalogList([]) };
    const written: string[] = [];
    const deps = {
      catalog,
      catalogFresh: async () => undefined,
      catalogStore: { put: async (_kind: string, it: CatalogItem) => (written.push(it.id), written.length) },
    } as unknown as ProjectsDeps;
    const ctx = {
      principal: { clientId: "admin", subject: "admin", groups: [ADMIN_GROUP], kind: "service" },
      partition: "opendes",
    } as unknown as RequestContext;
    const put = (itemId: string) => putCatalogItem({ kind: CatalogKind.displayItems, itemId, body: { ...item(itemId) } }, ctx, deps);
    const refused = await put("one-more").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DerrickError);
    expect((refused as DerrickError).status).toBe(409);
    expect((await put("item-7")).status).toBe(200);
    expect(written).toEqual(["item-7"]);
  });

  it("catalog - the shipped file is valid and covers the drilling-plan categories", () => {
    const file = readCatalogFile();
    const categories = new Set([...file.displayItems, ...file.keyParameters].map((i) => i.category));
    for (const c of ["well", "trajectory", "casing", "fluids", "cementing", "schedule", "cost"]) expect(categories).toContain(c);
  });

  it("catalog - paging defaults to 50, caps at 500 and counts the total after the filter", () => {
    const items = Array.from({ length: 120 }, (_, i) => item(`i${i}`, i % 3 === 0 ? "cost" : "well"));
    expect(pageCatalog(items, {})).toMatchObject({ total: 120, offset: 0, limit: 50 });
    expect(pageCatalog(items, {}).items).toHaveLength(50);
    expect(pageCatalog(items, { offset: "110", limit: "20" }).items.map((i) => i.id)).toEqual(
      Array.from({ length: 10 }, (_, i) => `i${110 + i}`),
    );
    expect(pageCatalog(items, { category: "cost", limit: "500" })).toMatchObject({ total: 40, limit: 500 });
    expect(pageCatalog(items, { offset: "500" }).items).toEqual([]);
    for (const [query, pointer] of [
      [{ limit: "501" }, "/query/limit"],
      [{ limit: "0" }, "/query/limit"],
      [{ offset: "-1" }, "/query/offset"],
      [{ limit: "ten" }, "/query/limit"],
    ] as const) {
      try {
        pageCatalog(items, query);
        expect.unreachable();
      } catch (error) {
        expect((error as DerrickError).errors?.[0]?.pointer).toBe(pointer);
      }
    }
  });

  it("catalog - additions keep file order first, replace in place and ignore older revisions", () => {
    const list = new CatalogList([item("b"), item("a")]);
    list.apply(item("z"), 3);
    list.apply(item("c"), 4);
    list.apply({ ...item("a"), name: "A2" }, 5);
    list.apply({ ...item("a"), name: "stale" }, 2);
    expect(list.all().map((i) => `${i.id}:${i.name}`)).toEqual(["b:b", "a:A2", "c:c", "z:z"]);
  });

  it("content - values are checked against the catalog and a table is summarized per numeric column", () => {
    const catalog = catalogFrom(readCatalogFile());
    expect(() => checkValues({ keyParameters: { "casing-string-count": 4.5 } }, catalog)).toThrow(/keyParameters\/casing-string-count/);
    const values = checkValues(
      {
        displayItems: {
          "casing-scheme": [
            { name: "Surface", shoeMd: 1200 },
            { name: "Production", shoeMd: 3550 },
          ],
        },
        keyParameters: { "h2s-expected": true },
      },
      catalog,
    );
    expect(summarizeTable(values.displayItems["casing-scheme"] as Array<Record<string, unknown>>)).toEqual({
      rows: 2,
      columns: { shoeMd: { min: 1200, max: 3550, mean: 2375, count: 2 } },
    });
    const project: Project = { projectId: "p", name: "p", members: [], values, createdAt: "", updatedAt: "" };
    const items = computeContent(project, catalog["key-parameters"], "key-parameters", ["h2s-expected", "total-cost"]);
    expect(items).toEqual([
      { id: "h2s-expected", name: "H2S expected", category: "formation", dataType: "boolean", status: "set", value: true },
      { id: "total-cost", name: "Total well cost", category: "cost", dataType: "number", unit: "USD", status: "missing", value: null },
    ]);
  });

  it("content - a date value must name a day that exists (RFC 3339), not one Date.parse rolls over", () => {
    const spud = readCatalogFile().displayItems.find((i) => i.id === "spud-date")!;
    expect(spud.dataType).toBe("date");
    for (const v of [
      "2026-02-30",
      "2026-04-31",
      "2026-02-31T10:00:00Z",
      "2025-02-29",
      "2026-13-01",
      "2026-00-10",
      "2026-01-01T24:00:00Z",
      "2026-01-01T10:60:00Z",
      "2026-01-01T10:00:00+24:00",
    ]) {
      expect(valueProblem(spud, v), v).toMatch(/RFC 3339/);
    }
    for (const v of [
      "2026-02-28",
      "2028-02-29",
      "2026-04-30T23:59:59.123Z",
      "2026-12-31T00:00:00+05:30",
      "2016-12-31T23:59:60Z",
      "0099-01-01",
    ]) {
      expect(valueProblem(spud, v), v).toBeUndefined();
    }
  });

  it("content - a column or item id named __proto__ is a key like any other", () => {
    const rows = JSON.parse('[{"__proto__": 1, "md": 2}, {"__proto__": 3, "md": 4}]') as Array<Record<string, unknown>>;
    const summary = summarizeTable(rows);
    expect(Object.keys(summary.columns)).toEqual(["__proto__", "md"]);
    // biome-ignore lint/suspicious/noProto: the test is about a key named __proto__
    expect(JSON.parse(JSON.stringify(summary)).columns.__proto__).toEqual({ min: 1, max: 3, mean: 2, count: 2 });
    const catalog = catalogFrom(readCatalogFile());
    catalog["key-parameters"].apply({ ...item("__proto__"), dataType: "table" }, 1);
    const values = checkValues(JSON.parse('{"keyParameters": {"__proto__": [{"md": 1}]}}'), catalog);
    expect(Object.keys(values.keyParameters)).toEqual(["__proto__"]);
    // biome-ignore lint/suspicious/noProto: the test is about a key named __proto__
    expect(JSON.parse(JSON.stringify(values)).keyParameters.__proto__).toEqual([{ md: 1 }]);
  });

  it("content - splitting never cuts a character and the slices join to the original", () => {
    const text = JSON.stringify(Array.from({ length: 3000 }, (_, i) => ({ i, name: `Brønn ${i} 井 🛢️` })));
    const slices = splitUtf8(text, 1000);
    expect(slices.length).toBeGreaterThan(10);
    for (const slice of slices) expect(new TextEncoder().encode(slice).length).toBeLessThanOrEqual(1000);
    expect(slices.join("")).toBe(text);
    expect(splitUtf8("small", 1000)).toEqual(["small"]);
  });
});

const routes = derrickTest({ actors: ["identity", "projects", "content-worker"] });

describe("catalog routes", () => {
  const it = routes;
  let second: TestDerrick | undefined;
  afterAll(async () => {
    await second?.cleanup();
  });

  it("catalog - display items and key parameters page with offset and limit", async ({ derrick }) => {
    const all = await getJson<CatalogPage>(derrick, "/v1/display-items?limit=500");
    expect(all.total).toBe(all.items.length);
    expect(all.items[0]).toMatchObject({ id: "well-name", name: "Well name", dataType: "string", category: "well", objectTypes: ["well"] });
    const first = await getJson<CatalogPage>(derrick, "/v1/display-items?limit=10");
    const second = await getJson<CatalogPage>(derrick, "/v1/display-items?offset=10&limit=10");
    expect(first).toMatchObject({ offset: 0, limit: 10, total: all.total });
    expect([...first.items, ...second.items].map((i) => i.id)).toEqual(all.items.slice(0, 20).map((i) => i.id));
    expect((await getJson<CatalogPage>(derrick, "/v1/key-parameters")).limit).toBe(50);
    expect((await getJson<CatalogPage>(derrick, "/v1/key-parameters?limit=5")).items.every((i) => i.id && i.dataType)).toBe(true);
  });

  it("catalog - the category filter narrows the items and the total", async ({ derrick }) => {
    const cost = await getJson<CatalogPage>(derrick, "/v1/key-parameters?category=cost");
    expect(cost.total).toBeGreaterThan(0);
    expect(cost.items.every((i) => i.category === "cost")).toBe(true);
    expect(cost.items.map((i) => i.id)).toContain("total-cost");
    expect((await getJson<CatalogPage>(derrick, "/v1/display-items?category=trajectory&limit=2")).items).toHaveLength(2);
    expect(await getJson<CatalogPage>(derrick, "/v1/display-items?category=nothing")).toMatchObject({ items: [], total: 0 });
  });

  it("catalog - bad paging gets a 400 naming the parameter; credentials are required", async ({ derrick }) => {
    for (const [query, pointer] of [
      ["limit=501", "/query/limit"],
      ["offset=x", "/query/offset"],
      ["limit=0", "/query/limit"],
    ]) {
      const res = await derrick.call(`/v1/display-items?${query}`);
      expect((await expectProblem(res, 400)).errors![0]!.pointer).toBe(pointer);
    }
    expect((await derrick.call("/v1/display-items", { as: null })).status).toBe(401);
    expect((await derrick.call("/v1/display-items", { headers: { appkey: "beta-appkey-1" } })).status).toBe(401);
    expect((await derrick.call("/v1/display-items", { partition: null })).status).toBe(400);
  });

  it("catalog - an admin extends the catalog and every process serves the new item", async ({ derrick, nats }) => {
    // A second edge + projects actor, already running: it learns of additions through the KV watch.
    second = await startDerrick(nats, { actors: ["projects"] });
    const body = {
      name: "Riser margin",
      description: "Whether the well keeps riser margin.",
      dataType: "boolean",
      category: "well",
      objectTypes: ["well"],
    };
    const putItem = (item: Record<string, unknown>, as: "admin" | "alpha" = "admin", path = "/v1/key-parameters/riser-margin") =>
      derrick.call(path, { as, method: "PUT", body: JSON.stringify(item) });
    expect((await putItem(body, "alpha")).status).toBe(403);
    expect((await putItem({ ...body, dataType: "blob" })).status).toBe(400);
    expect((await putItem({ ...body, id: "other" })).status).toBe(400);
    const created = await putItem(body);
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ id: "riser-margin", dataType: "boolean" });
    expect((await putItem({ ...body, name: "Riser margin kept" })).status).toBe(200);
    // Projects hold values of the item's type: an existing item (shipped or added) keeps its type.
    for (const [path, dataType] of [
      ["/v1/key-parameters/riser-margin", "number"],
      ["/v1/display-items/well-name", "table"],
    ] as const) {
      const retyped = await putItem({ ...body, dataType }, "admin", path);
      expect(retyped.status, path).toBe(409);
      expect((await expectProblem(retyped, 409)).errors![0]!.pointer).toBe("/body/dataType");
    }

    await eventually(
      async () => {
        const listed = await getJson<CatalogPage>(second!, "/v1/key-parameters?category=well&limit=500");
        return listed.items.find((i) => i.id === "riser-margin")?.name === "Riser margin kept";
      },
      { what: "the other process to serve the replacement" },
    );
    // A process started afterwards loads it at start.
    const third = await startDerrick(nats, { actors: ["projects"] });
    try {
      const listed = await getJson<CatalogPage>(third, "/v1/key-parameters?category=well&limit=500");
      expect(listed.items.find((i) => i.id === "riser-margin")).toMatchObject({ name: "Riser margin kept" });
    } finally {
      await third.cleanup();
    }

    // Values and content requests accept it at once.
    const put = await derrick.call("/v1/projects/p-ext", {
      as: "admin",
      method: "PUT",
      body: JSON.stringify({ name: "ext", members: ["alpha"], values: { keyParameters: { "riser-margin": true } } }),
    });
    expect(put.status).toBe(201);
    const { taskId, contentId } = await requestContent(derrick, "p-ext", "key-parameters", { ids: ["riser-margin"] });
    await taskIn(derrick, "p-ext", taskId, { states: ["succeeded"], timeoutMs: 10_000 });
    const content = await contentOf(derrick, "p-ext", "key-parameters", contentId);
    expect(content.items).toEqual([expect.objectContaining({ name: "Riser margin kept", value: true })]);
  });

  it("catalog - a catalog follow whose watch ended by itself, and that met an entry that is no item, still gets the additions made afterwards", async ({
    connection,
  }) => {
    // A connection of its own: the follow's watch is the only one ended.
    const nc = await connection();
    const kv = await openBucket(nc, BUCKETS.catalog);
    const seen: string[] = [];
    const follow = await catalogStore(kv).follow((_kind, added) => void seen.push(added.id), createLogger("silent"));
    try {
      // nats.js gives a quiet watch up after about two minutes without JetStream: here at once.
      expect(endKvWatches(nc)).toBe(1);
      await kv.put("key-parameters.not-json", "{");
      await catalogStore(kv).put(CatalogKind.keyParameters, item("mud-window"));
      await eventually(() => seen.includes("mud-window"), { what: "the addition made after the watch ended" });
    } finally {
      await follow.stop();
    }
  });
  it("catalog - a catalog bucket deleted and made again is followed from its start: its items replace the old bucket's, though their revisions start over", async ({
    connection,
  }) => {
    const nc = await connection();
    const kvm = new Kvm(nc);
    const kv = await kvm.create("catalog_made_again", { history: 1 });
    const catalog = catalogFrom({ displayItems: [], keyParameters: [] });
    for (const name of ["v1", "v2", "v3"]) await catalogStore(kv).put(CatalogKind.displayItems, { ...item("depth"), name });
    const follow = await catalogStore(kv).follow((kind, added, revision) => catalog[kind].apply(added, revision), createLogger("silent"), {
      onRecreated: () => Object.values(catalog).forEach((list) => list.resetAdditions()),
      checkEveryMs: 200,
    });
    try {
      expect(catalog[CatalogKind.displayItems].get("depth")?.name).toBe("v3");
      expect(await (await jetstreamManager(nc)).streams.delete("KV_catalog_made_again")).toBe(true);
      const again = await kvm.create("catalog_made_again", { history: 1 });
      // Revision 1 of the new bucket, below the 3 held from the old one.
      expect(await catalogStore(again).put(CatalogKind.displayItems, { ...item("depth"), name: "fresh" })).toBe(1);
      await eventually(() => catalog[CatalogKind.displayItems].get("depth")?.name === "fresh", { what: "the new bucket's item applied" });
    } finally {
      await follow.stop();
    }
  });
});
