import { describe, expect } from "vitest";
import { Svcm } from "@nats-io/services";
import type { NatsConnection } from "@nats-io/nats-core";
import { Kvm } from "@nats-io/kv";
import { openBucket, startDerrick, startSlowLink, type TestDerrick } from "../harness/index.ts";
import { BUCKETS, catalogStore } from "../../actors/projects/store.ts";
import { CatalogKind } from "../../subjects/projects.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { serviceName } from "../../subjects/index.ts";
import * as op from "../../subjects/projects.ts";
import { createLogger } from "../../platform/logger.ts";
import { KeyView, UNKNOWN, readThrough } from "../../actors/projects/views.ts";
import type { Operation } from "../../subjects/operation.ts";
import { drillingPlanValues, putProject } from "./fixtures.ts";
import { contentOf, requestContent, taskIn } from "./helpers.ts";

// Process A: the edge, a projects actor and the content worker; process B (below): a second projects actor. The edge's
// requests go to either by the service's queue group, so a read often lands on the process that did not write. B is
// behind a slow link: its watches' large entries are held back by JetStream's flow control while requests pass at once.
const test = derrickTest({ actors: ["identity", "projects", "content-worker"] }).extend(
  "other",
  { scope: "file" },
  async ({ nats }, { onCleanup }): Promise<TestDerrick> => {
    const link = await startSlowLink(nats, { pieceBytes: 16 * 1024, pauseMs: 2 });
    const other = await startDerrick({ url: link.url }, { actors: ["projects"], edge: false });
    onCleanup(async () => {
      await other.cleanup();
      await link.close();
    });
    return other;
  },
);

/** How many requests of `operation` each projects process answered. */
async function answeredBy(nc: NatsConnection, operation: Operation): Promise<number[]> {
  const counts: number[] = [];
  for await (const stats of await new Svcm(nc).client({ strategy: "timer", maxWait: 300 }).stats(serviceName("projects"))) {
    counts.push(stats.endpoints?.find((e) => e.name === operation.endpoint)?.num_requests ?? 0);
  }
  return counts;
}

const ROUNDS = 30;

describe("views - read-your-writes across processes", () => {
  test("views - every project read, in either process, sees the write acknowledged just before it", async ({ derrick, other }) => {
    // Values of a few hundred KB: each write is a large entry for the watches.
    const values = drillingPlanValues(4000);
    expect((await putProject(derrick, "p-rw", { members: [], values })).status).toBe(201);
    for (let i = 0; i < ROUNDS; i++) {
      const name = `round ${i}`;
      const put = await putProject(derrick, "p-rw", { name, members: i % 2 ? ["alpha"] : [], values });
      expect(put.status).toBe(200);
      const read = await derrick.call("/v1/projects/p-rw", { as: "admin" });
      expect(await json<{ name: string }>(read)).toMatchObject({ name });
      // Membership decides alpha's access, so a stale view answers 403 or 200 where it should not.
      expect((await derrick.call("/v1/projects/p-rw")).status, `round ${i}`).toBe(i % 2 ? 200 : 403);
      const member = await derrick.call(`/v1/projects/p-rw/members/alpha`, { as: "admin", method: i % 2 ? "DELETE" : "PUT" });
      expect(member.status).toBe(204);
      expect((await derrick.call("/v1/projects/p-rw")).status, `round ${i}, after the member change`).toBe(i % 2 ? 403 : 200);
    }
    expect((await derrick.call("/v1/projects/p-rw", { as: "admin", method: "DELETE" })).status).toBe(204);
    expect((await derrick.call("/v1/projects/p-rw", { as: "admin" })).status).toBe(404);
    // Both processes answered reads: otherwise this test could not see a view behind another process's write.
    const counts = await answeredBy(other.nc, op.projectsProjectGet);
    expect(counts).toHaveLength(2);
    for (const count of counts) expect(count).toBeGreaterThan(ROUNDS / 4);
  });

  test("views - a content and its parts are read at once after their task reads succeeded, in either process", async ({
    derrick,
    other,
  }) => {
    expect((await putProject(derrick, "p-rw-content", { values: drillingPlanValues(6000) })).status).toBe(201);
    for (let i = 0; i < 6; i++) {
      const accepted = await requestContent(derrick, "p-rw-content", "display-items", { ids: ["well-name", "trajectory-survey"] });
      expect((await taskIn(derrick, "p-rw-content", accepted.taskId)).state).toBe("succeeded");
      const content = await contentOf(derrick, "p-rw-content", "display-items", accepted.contentId);
      expect(content.parts?.length).toBeGreaterThanOrEqual(2);
      for (const partId of content.parts!) {
        const part = await derrick.call(`/v1/projects/p-rw-content/display-items/content-parts/${partId}`);
        expect(part.status, `part ${partId} of round ${i}`).toBe(200);
      }
    }
    const counts = await answeredBy(other.nc, op.projectsContentPart);
    expect(counts).toHaveLength(2);
    for (const count of counts) expect(count).toBeGreaterThan(0);
  });

  test("views - a catalog addition is listed at once by either process", async ({ derrick, other, nc }) => {
    const kv = await openBucket(nc, BUCKETS.catalog);
    for (let i = 0; i < 10; i++) {
      const id = `view-item-${i}`;
      // A large entry just before (written past the API's limits): the watches get the addition behind it.
      const filler = {
        id: "view-filler",
        name: "filler",
        description: "x".repeat(400_000),
        category: "fillers",
        dataType: "string" as const,
      };
      await catalogStore(kv).put(CatalogKind.displayItems, { ...filler, objectTypes: ["well"] });
      const put = await derrick.call(`/v1/display-items/${id}`, {
        as: "admin",
        method: "PUT",
        body: JSON.stringify({ name: `View item ${i}`, description: "", category: "views", dataType: "string", objectTypes: ["well"] }),
      });
      expect(put.status, await put.clone().text()).toBe(201);
      const listed = await json<{ items: Array<{ id: string }> }>(await derrick.call("/v1/display-items?category=views&limit=500"));
      expect(listed.items.map((item) => item.id)).toContain(id);
    }
    const counts = await answeredBy(other.nc, op.projectsCatalogList);
    expect(counts).toHaveLength(2);
    for (const count of counts) expect(count).toBeGreaterThan(0);
  });
});

describe("views - bounds", () => {
  const silent = createLogger("silent");

  test("views - an entry is answered from memory until its bucket's max age is near, then read from the bucket, then dropped", async ({
    nc,
  }) => {
    const kv = await new Kvm(nc).create("view_expiry", { history: 1 });
    let now = Date.now();
    const view = new KeyView<{ n: number }>(kv, nc, { what: "expiry", maxBytes: 1 << 20, ttlMs: 60_000, now: () => now }, silent);
    await view.start();
    try {
      await kv.put("a.1", JSON.stringify({ n: 1 }));
      expect(await view.fresh()).toBe(true);
      expect(view.get("a.1")).toMatchObject({ value: { n: 1 } });
      expect(view.get("a.2")).toBeUndefined();
      now += 59_500;
      // Within a second of its max age: the server may drop it any moment, so the bucket is asked.
      expect(view.get("a.1")).toBe(UNKNOWN);
      expect(await readThrough(view, "a.1", async () => ({ value: { n: 99 }, revision: 0 }))).toEqual({ value: { n: 99 }, revision: 0 });
      now += 1_000;
      expect(view.get("a.1")).toBeUndefined();
      expect(view.size.entries).toBe(0);
    } finally {
      await view.stop();
    }
  });

  test("views - a view over its byte bound drops the oldest writes, and a key it dropped is read from the bucket", async ({ nc }) => {
    const kv = await new Kvm(nc).create("view_bound", { history: 1 });
    const view = new KeyView<{ pad: string }>(kv, nc, { what: "bound", maxBytes: 3_000 }, silent);
    await view.start();
    try {
      for (const key of ["k.1", "k.2", "k.3", "k.4"]) await kv.put(key, JSON.stringify({ pad: "x".repeat(900) }));
      expect(await view.fresh()).toBe(true);
      expect(view.size.bytes).toBeLessThanOrEqual(3_000);
      expect(view.get("k.1")).toBe(UNKNOWN);
      expect(view.get("k.4")).toMatchObject({ value: { pad: "x".repeat(900) } });
      // Once a key was dropped, one not held may exist: the bucket answers.
      expect(view.get("k.none")).toBe(UNKNOWN);
      const fromBucket = await readThrough(view, "k.1", async () => {
        const entry = await kv.get("k.1");
        return entry ? { value: entry.json<{ pad: string }>(), revision: entry.revision } : undefined;
      });
      expect(fromBucket?.value.pad).toHaveLength(900);
    } finally {
      await view.stop();
    }
  });
});
