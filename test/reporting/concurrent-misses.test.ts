/**
 * Misses of one aggregation at once share one computation, unless an entity write was acknowledged after it began
 * (handlers.ts `shared`). Two actor processes are stood for by two stores on their own connections; the reader has
 * the result memory an actor runs, which hears the entities' writes.
 */
import { describe, expect } from "vitest";
import { natsTest } from "../harness/fixture.ts";
import { eventually } from "../harness/poll.ts";
import { demoBody } from "./helpers.ts";
import { assessmentStore, BUCKETS, entityKey, openStores, type AssessmentStore } from "../../actors/reporting/store.ts";
import { ResultMemory, RESULT_MEMORY } from "../../actors/reporting/result-memory.ts";
import { prospectAggregate, putEntity, type ReportingDeps } from "../../actors/reporting/handlers.ts";
import { loadDemo } from "../../subjects/reporting-demo.ts";
import { EDITORS_GROUP } from "../../subjects/reporting.ts";
import { EncodedJson, republishedWrites } from "../../subjects/index.ts";
import type { RequestContext } from "../../actors/runtime/context.ts";
import { createLogger } from "../../platform/logger.ts";

const ctx: RequestContext = {
  principal: { clientId: "editor", subject: "editor", groups: [EDITORS_GROUP], kind: "service" } as RequestContext["principal"],
  partition: "opendes",
  requestId: "r",
  log: createLogger("silent"),
};
const it = natsTest();

type Aggregate = { segments: Array<{ segmentAnalysisId: string; pg: number }> };
const bodyOf = (body: unknown): Aggregate =>
  body instanceof EncodedJson ? JSON.parse(new TextDecoder().decode(body.bytes)) : (body as Aggregate);
const pgOf = (body: unknown, segmentId: string) => bodyOf(body).segments.find((s) => s.segmentAnalysisId === segmentId)!.pg;

describe("concurrent misses of one aggregation", () => {
  it("reporting - misses at once compute once; a miss after an entity write was acknowledged computes anew, not the computation under way", async ({
    connection,
  }) => {
    const writer: ReportingDeps = { store: assessmentStore(await openStores(await connection("writer"))) };
    await loadDemo(
      async (item) => (await putEntity({ collection: item.collection, id: item.id, body: structuredClone(item.body) }, ctx, writer)).status,
    );
    const readerNc = await connection("reader");
    const stores = await openStores(readerNc);
    const results = new ResultMemory(
      stores.cache,
      readerNc,
      createLogger("silent"),
      RESULT_MEMORY,
      republishedWrites(BUCKETS.entities).dest,
    );
    await results.start();
    const store: AssessmentStore = assessmentStore(stores, { results });
    // Counts the computations (each stores its result), and can hold one before it stores.
    let computed = 0;
    let hold: Promise<void> | undefined;
    let holding: () => void = () => undefined;
    const remember = store.remember.bind(store);
    store.remember = async (...args) => {
      computed++;
      const held = hold;
      hold = undefined;
      if (held) {
        holding();
        await held;
      }
      return remember(...args);
    };
    const reader: ReportingDeps = { store };
    const inputs = [entityKey("opendes", "prospectanalyses", "pa-alpha-oil")];
    try {
      // Eight at once: one computation. Tried again if the notes did not vouch at that moment (a look is due each second).
      await eventually(
        async () => {
          await store.invalidate(inputs);
          await store.cached("warm-up");
          const before = computed;
          const answers = await Promise.all(Array.from({ length: 8 }, () => prospectAggregate({ id: "pa-alpha-oil" }, ctx, reader)));
          expect(new Set(answers.map((a) => JSON.stringify(bodyOf(a.body)))).size).toBe(1);
          return computed - before === 1;
        },
        { what: "eight misses at once computed once" },
      );

      // A computes from the inputs as they are, and is held before it stores; meanwhile a segment changes.
      await store.invalidate(inputs);
      let computing: () => void = () => undefined;
      const heldAt = new Promise<void>((resolve) => (computing = resolve));
      let release: () => void = () => undefined;
      hold = new Promise<void>((resolve) => (release = resolve));
      holding = computing;
      const first = prospectAggregate({ id: "pa-alpha-oil" }, ctx, reader);
      await heldAt;
      const changed = demoBody("seg-alpha-rogn");
      changed.riskFactors = changed.riskFactors.map((f: { name: string; probability: number }) => ({
        ...f,
        probability: f.probability / 2,
      }));
      await putEntity({ collection: "segmentanalyses", id: "seg-alpha-rogn", body: changed }, ctx, writer);
      // The client that wrote asks next: its request reaches the reader after the write's republish (one connection, in order).
      await readerNc.flush();
      const second = await prospectAggregate({ id: "pa-alpha-oil" }, ctx, reader);
      release();
      // Had it shared A's computation, it would answer the segment as it was before the write it was told of.
      expect(pgOf(second.body, "seg-alpha-rogn")).toBeLessThan(pgOf((await first).body, "seg-alpha-rogn"));
    } finally {
      await results.stop();
    }
  });
});
