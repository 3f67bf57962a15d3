import { describe, expect } from "vitest";
import { derrickTest } from "../harness/fixture.ts";
import { putTwin, twinState } from "../twins/helpers.ts";
import type { CatalogPage } from "../../subjects/projects.ts";
import { createLogger } from "../../platform/logger.ts";
import { serveActor, endpoint } from "../../actors/runtime/service.ts";
import { DerrickError, Header, reply } from "../../subjects/index.ts";
import { Bus } from "../../platform/transport/index.ts";
import { headers as natsHeaders } from "@nats-io/nats-core";

const silent = createLogger("silent");

const it = derrickTest({ actors: ["identity", "projects", "twins"], nats: { extraConfig: "max_payload: 100KB" } }).extend(
  "nc",
  { scope: "file" },
  async ({ connection }) => connection("chunked-replies-test"),
);

/**
 * A reply larger than the server's max_payload goes in several messages (Derrick-Chunk) and comes
 * back whole: within the documented limits a catalog page or a twin can be larger than an external
 * server's 1 MB. The server here takes 100 KB per message, so a few hundred KB make several chunks.
 */
describe("replies larger than one NATS message", () => {
  it("runtime - a large reply keeps its body, status and headers across chunks; a small one stays one message", async ({ nc }) => {
    expect(nc.info?.max_payload).toBe(100 * 1024);
    const big = { rows: Array.from({ length: 4000 }, (_, i) => ({ i, text: `row ${i} ${"é".repeat(40)}` })) };
    const actor = await serveActor(
      nc,
      {
        name: "chunky",
        version: "0.0.0",
        description: "large replies",
        endpoints: [
          endpoint({ name: "big", subject: "derrick.test.chunky.big", handler: () => reply(big, 201, { location: "/things/1" }) }),
          endpoint({ name: "plain", subject: "derrick.test.chunky.plain", handler: () => big }),
          endpoint({ name: "small", subject: "derrick.test.chunky.small", handler: () => ({ ok: true }) }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const seen: number[] = [];
    const spy = nc.subscribe("_INBOX.>", { callback: (_e, m) => void seen.push(m.data.length) });
    const bus = new Bus(nc, { timeoutMs: 5000 });
    try {
      const answer = await bus.request<typeof big>("derrick.test.chunky.big", undefined);
      expect(answer.raw.length).toBeGreaterThan(3 * 100 * 1024);
      expect(answer.status).toBe(201);
      expect(answer.headers).toEqual({ location: "/things/1" });
      expect(answer.body).toEqual(big);
      expect(seen.length).toBeGreaterThanOrEqual(4);
      expect(Math.max(...seen)).toBeLessThanOrEqual(100 * 1024);
      const plain = await bus.request<typeof big>("derrick.test.chunky.plain", undefined);
      expect(plain.status).toBe(200);
      expect(plain.body).toEqual(big);
      seen.length = 0;
      expect((await bus.request("derrick.test.chunky.small", undefined)).body).toEqual({ ok: true });
      expect(seen).toHaveLength(1);
    } finally {
      spy.unsubscribe();
      await actor.stop();
    }
  });

  it("runtime - chunks that do not make one reply are a 502, not a truncated body", async ({ nc }) => {
    // A foreign responder that sends the second chunk first.
    const sub = nc.subscribe("derrick.test.chunky.broken", {
      callback: (_e, m) => {
        const h = natsHeaders();
        h.set(Header.chunk, "2/2");
        m.respond(new TextEncoder().encode('"}'), { headers: h });
      },
    });
    const bus = new Bus(nc, { timeoutMs: 2000 });
    try {
      const error = await bus.request("derrick.test.chunky.broken", undefined).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DerrickError);
      expect((error as DerrickError).status).toBe(502);
    } finally {
      sub.unsubscribe();
    }
  });

  it("catalog - a page of 500-item size the contract allows passes max_payload through the edge whole", async ({ derrick }) => {
    const objectTypes = Array.from({ length: 32 }, (_, i) => `${"o".repeat(120)}${i}`);
    for (let i = 0; i < 40; i++) {
      const res = await derrick.call(`/v1/display-items/big-${String(i).padStart(3, "0")}`, {
        as: "admin",
        method: "PUT",
        body: JSON.stringify({ name: "n".repeat(200), description: "d".repeat(2000), dataType: "string", category: "well", objectTypes }),
      });
      expect(res.status, await res.clone().text()).toBe(201);
    }
    const res = await derrick.call("/v1/display-items?limit=500");
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(2 * 100 * 1024);
    const page = JSON.parse(text) as CatalogPage;
    expect(page.items.filter((item) => item.id.startsWith("big-"))).toHaveLength(40);
    expect(page.items).toHaveLength(Math.min(500, page.total));
  });

  it("twins - a twin whose groups together pass max_payload is read whole", async ({ derrick }) => {
    const groups = ["g1", "g2", "g3", "g4", "g5", "g6"];
    // Each PUT within this edge's body limit (max_payload less the envelope), all six over max_payload.
    for (const group of groups) {
      const twins = Array.from({ length: 5 }, (_, i) => ({ name: `p${i}`, value: `${group}-${i}-`.padEnd(5000, "v") }));
      const put = await putTwin(derrick, "dev-wide", { group, twins });
      expect(put.status, await put.clone().text()).toBe(200);
    }
    const state = await twinState(derrick, "dev-wide");
    expect(Object.keys(state.desired).sort()).toEqual(groups);
    expect(state.desired.g6!.p4!.value).toBe("g6-4-".padEnd(5000, "v"));
  });
});
