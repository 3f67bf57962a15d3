/**
 * Writes that fail half-way must not leave aggregations from older inputs cached. Two actor
 * processes are stood for by two stores on their own connections: the writer's buckets go through
 * a seam that can hold a call or make the cache bucket fail, the reader's are plain. The KV calls
 * themselves are real; only when they fail is decided by the test.
 */
import { describe, expect } from "vitest";
import type { KV } from "@nats-io/kv";
import { natsTest } from "../harness/fixture.ts";
import { assessmentStore, entityKey, openStores, type Stores } from "../../actors/reporting/store.ts";
import { CACHE_HEADER, deleteEntity, prospectAggregate, putEntity, type ReportingDeps } from "../../actors/reporting/handlers.ts";
import { loadDemo } from "../../subjects/reporting-demo.ts";
import { demoBody } from "./helpers.ts";
import { EDITORS_GROUP } from "../../subjects/reporting.ts";
import { DerrickError, EncodedJson, type Reply } from "../../subjects/index.ts";
import type { RequestContext } from "../../actors/runtime/context.ts";
import { createLogger } from "../../platform/logger.ts";

type Hooks = { before?(method: string, key: string): Promise<void> | void; after?(method: string, key: string): void };

/** The bucket with hooks around its key calls (get, put, create, update, delete). */
function seam(kv: KV, hooks: Hooks): KV {
  const keyed = new Set(["get", "put", "create", "update", "delete"]);
  return new Proxy(kv, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      if (!keyed.has(String(prop))) return value.bind(target);
      return async (key: string, ...rest: unknown[]) => {
        await hooks.before?.(String(prop), key);
        const out = await value.apply(target, [key, ...rest]);
        hooks.after?.(String(prop), key);
        return out;
      };
    },
  });
}

const WRITES = new Set(["put", "create", "update", "delete"]);
const ctx: RequestContext = {
  principal: { clientId: "editor", subject: "editor", groups: [EDITORS_GROUP], kind: "service" } as RequestContext["principal"],
  partition: "opendes",
  requestId: "r",
  log: createLogger("silent"),
};

/** The part of a prospect aggregation these tests read. */
type Aggregate = { segments: Array<{ segmentAnalysisId: string; pg: number }> };

const it = natsTest();

describe("reporting writes that fail half-way", () => {
  let plain: Stores;
  let writer: ReportingDeps;
  let reader: ReportingDeps;
  /** While set, every call to the writer's cache bucket fails (a KV timeout, a partition). */
  let cacheDown = false;
  /** Called before the writer's entity writes; may hold or fail them. */
  let beforeEntityWrite: (key: string) => Promise<void> | void = () => undefined;
  /** Called after the writer's entity writes landed. */
  let afterEntityWrite: (key: string) => void = () => undefined;

  it.beforeAll(async ({ connection }) => {
    plain = await openStores(await connection("writer"));
    const entities = seam(plain.entities, {
      before: (method, key) => (WRITES.has(method) ? beforeEntityWrite(key) : undefined),
      after: (method, key) => (WRITES.has(method) ? afterEntityWrite(key) : undefined),
    });
    const cache = seam(plain.cache, {
      before: () => {
        if (cacheDown) throw new Error("TIMEOUT (injected: cache bucket unavailable)");
      },
    });
    writer = { store: assessmentStore({ entities, cache }) };
    reader = { store: assessmentStore(await openStores(await connection("reader"))) };
    await loadDemo(
      async (item) => (await putEntity({ collection: item.collection, id: item.id, body: structuredClone(item.body) }, ctx, writer)).status,
    );
  });

  const read = async (id: string) => {
    const res: Reply<unknown> = await prospectAggregate({ id }, ctx, reader);
    const body: Aggregate =
      res.body instanceof EncodedJson ? JSON.parse(new TextDecoder().decode(res.body.bytes)) : (res.body as Aggregate);
    return { cache: res.headers[CACHE_HEADER], body };
  };
  const status = (promise: Promise<unknown>) =>
    promise.then(
      () => 200,
      (error) => (error instanceof DerrickError ? error.status : 500),
    );
  const pgOf = (body: Aggregate, segmentId: string) => body.segments.find((s) => s.segmentAnalysisId === segmentId)!.pg;
  const reset = () => {
    cacheDown = false;
    beforeEntityWrite = () => undefined;
    afterEntityWrite = () => undefined;
  };

  it("failures - a DELETE that failed after the entity was gone, retried by its client (404), leaves no aggregation of the deleted analysis served", async () => {
    await read("pa-alpha-oil");
    expect((await read("pa-alpha-oil")).cache).toBe("hit");
    // The cache bucket becomes unavailable the moment the entity delete has landed.
    const target = entityKey("opendes", "prospectanalyses", "pa-alpha-oil");
    afterEntityWrite = (key) => {
      if (key === target) cacheDown = true;
    };
    await status(deleteEntity({ collection: "prospectanalyses", id: "pa-alpha-oil" }, ctx, writer));
    reset();
    expect(await status(deleteEntity({ collection: "prospectanalyses", id: "pa-alpha-oil" }, ctx, writer))).toBe(404);
    // Was: 200 from the cache, the deleted analysis's aggregation, until the id was written again.
    expect(await status(read("pa-alpha-oil"))).toBe(404);
  });

  it("failures - a PUT that lands while another process computes, and whose invalidation then fails, leaves no older aggregation cached; caching resumes by itself", async () => {
    const before = await read("pa-alpha-gas");
    await read("pa-alpha-gas");
    const oldPg = pgOf(before.body, "seg-alpha-gas-lower");
    const changed = demoBody("seg-alpha-gas-lower");
    changed.riskFactors = changed.riskFactors.map((f: { name: string; probability: number }) => ({ ...f, probability: f.probability / 2 }));
    // The writer's segment write is held on the wire; once it lands, the cache bucket is down.
    const target = entityKey("opendes", "segmentanalyses", "seg-alpha-gas-lower");
    let held!: () => void;
    const reached = new Promise<void>((resolve) => (held = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    beforeEntityWrite = async (key) => {
      if (key !== target) return;
      held();
      await gate;
    };
    afterEntityWrite = (key) => {
      if (key === target) cacheDown = true;
    };
    const write = status(putEntity({ collection: "segmentanalyses", id: "seg-alpha-gas-lower", body: changed }, ctx, writer));
    await reached;
    // Meanwhile the other process reads, computing from the segment as it still is (right: the
    // write is not acknowledged); whatever it caches now must not outlive the write.
    for (let i = 0; i < 2; i++) expect(pgOf((await read("pa-alpha-gas")).body, "seg-alpha-gas-lower")).toBeCloseTo(oldPg, 12);
    release();
    await write;
    reset();
    const after = await read("pa-alpha-gas");
    // Was: the older aggregation, from the cache, for good (the write's invalidation had failed).
    expect(after.cache).toBe("miss");
    expect(pgOf(after.body, "seg-alpha-gas-lower")).toBeCloseTo(oldPg / 4, 12);
    // Nobody retried the PUT, and the next read is cached again: the writer's leftover
    // announcement names a revision the segment has left, so the registration dropped it.
    expect((await read("pa-alpha-gas")).cache).toBe("hit");
  });

  it("failures - a DELETE that finds the entity gone still invalidates: results an older version left cached are not served", async () => {
    await read("pa-alpha-gas");
    expect((await read("pa-alpha-gas")).cache).toBe("hit");
    // What an older version left when it died between deleting a segment and invalidating.
    await plain.entities.delete(entityKey("opendes", "segmentanalyses", "seg-alpha-gas-upper"));
    expect((await read("pa-alpha-gas")).cache).toBe("hit");
    expect(await status(deleteEntity({ collection: "segmentanalyses", id: "seg-alpha-gas-upper" }, ctx, writer))).toBe(404);
    // Was: 200 from the cache; the analysis enrolls a deleted segment.
    expect(await status(read("pa-alpha-gas"))).toBe(409);
  });

  it("failures - a write that never landed leaves the aggregations that read its input uncached, never stale, until the input is written again", async () => {
    // The analysis the first test deleted, again.
    await putEntity({ collection: "prospectanalyses", id: "pa-alpha-oil", body: demoBody("pa-alpha-oil") }, ctx, writer);
    const target = entityKey("opendes", "segmentanalyses", "seg-alpha-rogn");
    const pg = pgOf((await read("pa-alpha-oil")).body, "seg-alpha-rogn");
    expect((await read("pa-alpha-oil")).cache).toBe("hit");
    // The process dies after announcing the write, before sending it (or the write times out
    // unsent): the segment is unchanged, and nobody can tell whether the write is still coming.
    beforeEntityWrite = (key) => {
      if (key === target) throw new Error("TIMEOUT (injected: the write was never sent)");
    };
    const changed = demoBody("seg-alpha-rogn");
    changed.riskFactors = [{ name: "reservoir", probability: 0.2 }];
    expect(await status(putEntity({ collection: "segmentanalyses", id: "seg-alpha-rogn", body: changed }, ctx, writer))).toBe(500);
    reset();
    for (let i = 0; i < 2; i++) {
      const res = await read("pa-alpha-oil");
      expect(res.cache).toBe("miss");
      expect(pgOf(res.body, "seg-alpha-rogn")).toBeCloseTo(pg, 12);
    }
    // The client's retry lands: the new segment is read, and cached again.
    expect(await status(putEntity({ collection: "segmentanalyses", id: "seg-alpha-rogn", body: changed }, ctx, writer))).toBe(200);
    const after = await read("pa-alpha-oil");
    expect(after.cache).toBe("miss");
    expect(pgOf(after.body, "seg-alpha-rogn")).not.toBeCloseTo(pg, 6);
    expect((await read("pa-alpha-oil")).cache).toBe("hit");
  });
});
