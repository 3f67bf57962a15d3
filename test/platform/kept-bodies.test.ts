import { describe, expect } from "vitest";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/nats-core";
import { gunzipSync } from "node:zlib";
import { natsTest } from "../harness/fixture.ts";
import { createLogger } from "../../platform/logger.ts";
import { serveActor, endpoint } from "../../actors/runtime/service.ts";
import { MIN_TAGGED_BYTES } from "../../actors/runtime/body-tags.ts";
import { DerrickError, EncodedJson, Header, reply } from "../../subjects/index.ts";
import { Bus } from "../../platform/transport/index.ts";

const silent = createLogger("silent");
const it = natsTest({ extraConfig: "max_payload: 100KB" });
const encoder = new TextEncoder();
const jsonBytes = (value: unknown) => encoder.encode(JSON.stringify(value));
/** Byte for byte (the Bus may hand out a Buffer, a Uint8Array to vitest's equality). */
const bytesOf = (raw: Uint8Array) => [...raw];
const rows = (n: number, word: string) => ({ rows: Array.from({ length: n }, (_, i) => ({ i, word })) });

/** The bytes a connection received while `work` ran. */
async function bytesIn(nc: NatsConnection, work: () => Promise<unknown>): Promise<number> {
  await nc.flush();
  const before = nc.stats().inBytes;
  await work();
  await nc.flush();
  return nc.stats().inBytes - before;
}

/**
 * A held reply body (bytes a cache keeps) is tagged; the Bus keeps it and offers the tag with the next request like it,
 * and the actor then sends the reply without the bytes. Each case checks what crossed NATS and what the caller got.
 */
describe("held bodies not sent twice", () => {
  it("bus - the second read of a held body carries no body bytes and answers the same bytes, status and headers", async ({
    connection,
  }) => {
    const [actorNc, busNc] = [await connection("kept-actor"), await connection("kept-bus")];
    let held = new EncodedJson(jsonBytes(rows(200, "first")), true);
    const offered: (string | undefined)[] = [];
    const actor = await serveActor(
      actorNc,
      {
        name: "kept",
        version: "0.0.0",
        description: "held bodies",
        endpoints: [
          endpoint({
            name: "read",
            subject: "derrick.test.kept.read",
            handler: (_input, ctx) => {
              offered.push(ctx.headers?.get(Header.haveBody) || undefined);
              return reply(held, 200, { "x-derrick-cache": "hit" });
            },
          }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    try {
      expect(held.bytes.length).toBeGreaterThan(4 * MIN_TAGGED_BYTES);
      const first = await bus.request("derrick.test.kept.read", { id: "a" });
      expect(bytesOf(first.raw)).toEqual(bytesOf(held.bytes));
      let second: Awaited<ReturnType<typeof bus.request>> | undefined;
      const received = await bytesIn(busNc, async () => (second = await bus.request("derrick.test.kept.read", { id: "a" })));
      expect(received).toBeLessThan(held.bytes.length / 4);
      expect(bytesOf(second!.raw)).toEqual(bytesOf(held.bytes));
      expect(second!.status).toBe(200);
      expect(second!.headers).toEqual(first.headers);
      expect(second!.headers).toMatchObject({ "x-derrick-cache": "hit" });
      expect(second!.body).toEqual(rows(200, "first"));
      expect(offered[0]).toBeUndefined();
      expect(offered[1]).toMatch(/^\w{8,}$/);

      // Other bytes held for the same request: the tag no longer matches and the new body comes whole.
      held = new EncodedJson(jsonBytes(rows(200, "second")), true);
      const changed = await bus.request("derrick.test.kept.read", { id: "a" });
      expect(changed.body).toEqual(rows(200, "second"));
      expect(offered[2]).toBe(offered[1]);
      const again = await bus.request("derrick.test.kept.read", { id: "a" });
      expect(bytesOf(again.raw)).toEqual(bytesOf(held.bytes));
      expect(offered[3]).not.toBe(offered[1]);

      // Another request is another key: nothing is offered for it.
      await bus.request("derrick.test.kept.read", { id: "b" });
      expect(offered[4]).toBeUndefined();

      // Bytes no cache keeps carry no tag, and end what the Bus kept for the request.
      held = new EncodedJson(jsonBytes(rows(200, "third")));
      expect((await bus.request("derrick.test.kept.read", { id: "a" })).body).toEqual(rows(200, "third"));
      expect((await bus.request("derrick.test.kept.read", { id: "a" })).body).toEqual(rows(200, "third"));
      expect(offered[6]).toBeUndefined();
    } finally {
      await actor.stop();
    }
  });

  it("bus - callers that see different bodies for one request each get their own, every time", async ({ connection }) => {
    const [actorNc, busNc] = [await connection("kept-actor-2"), await connection("kept-bus-2")];
    const views = { alice: new EncodedJson(jsonBytes(rows(100, "alice")), true), bob: new EncodedJson(jsonBytes(rows(100, "bob")), true) };
    const actor = await serveActor(
      actorNc,
      {
        name: "kept2",
        version: "0.0.0",
        description: "a body per caller",
        endpoints: [
          endpoint({
            name: "mine",
            subject: "derrick.test.kept.mine",
            handler: (_input, ctx) => views[ctx.principal!.subject as keyof typeof views],
          }),
        ],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    const as = (subject: "alice" | "bob") => ({ principal: { clientId: subject, subject, groups: [], kind: "user" as const } });
    try {
      for (const who of ["alice", "alice", "bob", "alice", "bob", "bob"] as const) {
        const answer = await bus.request("derrick.test.kept.mine", undefined, as(who));
        expect(bytesOf(answer.raw), who).toEqual(bytesOf(views[who].bytes));
      }
    } finally {
      await actor.stop();
    }
  });

  it("bus - gzip and plain forms are tagged apart, and a held body larger than one NATS message comes back whole, then as a name", async ({
    connection,
  }) => {
    const [actorNc, busNc] = [await connection("kept-actor-3"), await connection("kept-bus-3")];
    // Varied text so that gzip leaves more than 100 KB: the first reply goes in chunks either way.
    const large = { rows: Array.from({ length: 6000 }, (_, i) => ({ i, text: (i * 2654435761).toString(36).repeat(8) })) };
    const held = new EncodedJson(jsonBytes(large), true);
    const actor = await serveActor(
      actorNc,
      {
        name: "kept3",
        version: "0.0.0",
        description: "a large held body",
        endpoints: [endpoint({ name: "large", subject: "derrick.test.kept.large", handler: () => held })],
      },
      { log: silent, concurrency: 4 },
    );
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    try {
      expect(held.bytes.length).toBeGreaterThan(3 * 100 * 1024);
      for (const acceptEncoding of [undefined, "gzip" as const]) {
        const first = await bus.request("derrick.test.kept.large", undefined, { acceptEncoding });
        const plain = (raw: Uint8Array) => (acceptEncoding ? gunzipSync(raw) : raw);
        expect(bytesOf(plain(first.raw))).toEqual(bytesOf(held.bytes));
        expect(first.headers["Content-Encoding"]).toBe(acceptEncoding);
        let second: Awaited<ReturnType<typeof bus.request>> | undefined;
        const received = await bytesIn(
          busNc,
          async () => (second = await bus.request("derrick.test.kept.large", undefined, { acceptEncoding })),
        );
        expect(received, String(acceptEncoding)).toBeLessThan(1024);
        expect(bytesOf(second!.raw)).toEqual(bytesOf(first.raw));
        expect(second!.body).toEqual(large);
      }
    } finally {
      await actor.stop();
    }
  });

  it("bus - a reply naming a body this Bus does not hold is a 502; a Bus that keeps none offers none", async ({ connection }) => {
    const nc = await connection("kept-foreign");
    const offers: (string | undefined)[] = [];
    // A foreign responder: names a body whatever was offered, and tags what it sends.
    const sub = nc.subscribe("derrick.test.kept.foreign", {
      callback: (_e, m) => {
        offers.push(m.headers?.get(Header.haveBody) || undefined);
        const h = natsHeaders();
        if (m.data.length) h.set(Header.sameBody, "not-held");
        else h.set(Header.bodyTag, "tag-1");
        m.respond(m.data.length ? undefined : jsonBytes(rows(100, "x")), { headers: h });
      },
    });
    try {
      const bus = new Bus(nc, { timeoutMs: 2000 });
      const error = await bus.request("derrick.test.kept.foreign", { name: "it" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DerrickError);
      expect((error as DerrickError).status).toBe(502);

      const keeping = new Bus(nc, { timeoutMs: 2000 });
      const keepsNone = new Bus(nc, { timeoutMs: 2000, keptBodies: false });
      for (const b of [keeping, keeping, keepsNone, keepsNone]) await b.request("derrick.test.kept.foreign", undefined);
      expect(offers.slice(1)).toEqual([undefined, "tag-1", undefined, undefined]);
    } finally {
      sub.unsubscribe();
    }
  });
});
