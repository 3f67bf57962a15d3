import { describe, expect, test } from "vitest";
import { createHash } from "node:crypto";
import { headers as natsHeaders, type NatsConnection } from "@nats-io/nats-core";
import { gunzipSync } from "node:zlib";
import { natsTest } from "../harness/fixture.ts";
import { createLogger } from "../../platform/logger.ts";
import { serveActor, endpoint } from "../../actors/runtime/service.ts";
import { bodyTag, MIN_TAGGED_BYTES, offers } from "../../actors/runtime/body-tags.ts";
import { DerrickError, EncodedJson, Header, reply, type RequestMeta } from "../../subjects/index.ts";
import { BODIES_PER_REQUEST, Bus, bodyTagOf, type BusReply } from "../../platform/transport/index.ts";

const silent = createLogger("silent");
const it = natsTest({ extraConfig: "max_payload: 100KB" });
const encoder = new TextEncoder();
const jsonBytes = (value: unknown) => encoder.encode(JSON.stringify(value));
/** Byte for byte (the Bus may hand out a Buffer or a Uint8Array). */
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
const rows = (n: number, word: string) => ({ rows: Array.from({ length: n }, (_, i) => ({ i, word })) });
const held = (value: unknown) => new EncodedJson(jsonBytes(value), true);

/** What a connection received (bytes, messages) while `work` ran. */
async function received(nc: NatsConnection, work: () => Promise<unknown>): Promise<{ bytes: number; msgs: number }> {
  await nc.flush();
  const before = nc.stats();
  await work();
  await nc.flush();
  const after = nc.stats();
  return { bytes: after.inBytes - before.inBytes, msgs: after.inMsgs - before.inMsgs };
}

/** One actor on its own connection answering `subject` with `answer` (the offered tags are recorded). */
type Asked = { haveBody?: string; who?: string };

async function serveHeld(nc: NatsConnection, name: string, subject: string, answer: (input: unknown, asked: Asked) => unknown) {
  return serveActor(
    nc,
    {
      name,
      version: "0.0.0",
      description: "held bodies",
      endpoints: [
        endpoint({
          name: "read",
          subject,
          handler: (input, ctx) => answer(input, { haveBody: ctx.headers?.get(Header.haveBody) || undefined, who: ctx.principal?.subject }),
        }),
      ],
    },
    { log: silent, concurrency: 8 },
  );
}

describe("body tags", () => {
  test("runtime - held bytes are tagged from their second send, with the SHA-256 of their bytes; small ones never", () => {
    const bytes = jsonBytes(rows(100, "tag"));
    expect(bodyTag(bytes)).toBeUndefined();
    const tag = bodyTag(bytes);
    expect(tag).toBe(createHash("sha256").update(bytes).digest("base64url").slice(0, 22));
    expect(bodyTag(bytes)).toBe(tag);
    expect(bodyTagOf(new Uint8Array(bytes))).toBe(tag);
    const small = jsonBytes({ ok: true });
    expect(bodyTag(small)).toBeUndefined();
    expect(bodyTag(small)).toBeUndefined();
    expect(MIN_TAGGED_BYTES).toBeGreaterThan(small.length);
  });

  test("runtime - a tag is offered as itself or in a comma-separated list, never as part of another", () => {
    expect(offers("abc", "abc")).toBe(true);
    expect(offers("x1,abc, y2", "abc")).toBe(true);
    expect(offers("xabc,abcx", "abc")).toBe(false);
    expect(offers(undefined, "abc")).toBe(false);
    expect(offers("", "abc")).toBe(false);
  });
});

/**
 * A held reply body (bytes a cache keeps) is tagged; the Bus keeps it and offers the tag with the next request like it,
 * and the actor then sends the reply without the bytes. Each case checks what crossed NATS and what the caller got.
 */
describe("held bodies not sent twice", () => {
  it("bus - a held body read again crosses NATS once more, then as a name: the same bytes, with each reply's own status and headers", async ({
    connection,
  }) => {
    const [actorNc, busNc] = [await connection("kept-actor"), await connection("kept-bus")];
    let body = held(rows(200, "first"));
    let cache = "miss";
    const offered: (string | undefined)[] = [];
    const actor = await serveHeld(actorNc, "kept", "derrick.test.kept.read", (_input, meta) => {
      offered.push(meta.haveBody);
      return reply(body, 200, { "x-derrick-cache": cache });
    });
    const bodiesNamed: boolean[] = [];
    const bus = new Bus(busNc, { timeoutMs: 5000, onReplyBody: (_bytes, wasNamed) => void bodiesNamed.push(wasNamed) });
    const read = (id = "a") => bus.request("derrick.test.kept.read", { id });
    try {
      expect(body.bytes.length).toBeGreaterThan(4 * MIN_TAGGED_BYTES);
      // The actor tags from its second send; the Bus keeps from a request's second tagged reply; then named only.
      for (let i = 0; i < 3; i++) expect(same((await read()).raw, body.bytes)).toBe(true);
      expect(offered).toEqual([undefined, undefined, undefined]);
      cache = "hit";
      let named: BusReply<unknown> | undefined;
      const took = await received(busNc, async () => (named = await read()));
      expect(took.bytes).toBeLessThan(body.bytes.length / 4);
      expect(offered[3]).toBe(bodyTagOf(body.bytes));
      expect(bodiesNamed).toEqual([false, false, false, true]);
      expect(same(named!.raw, body.bytes)).toBe(true);
      expect(named!.status).toBe(200);
      // The reply's own headers, not those kept with the body.
      expect(named!.headers).toMatchObject({ "x-derrick-cache": "hit" });
      expect(named!.body).toEqual(rows(200, "first"));

      // Other bytes held for the same request: to a caller that keeps bodies they come tagged at once, then named.
      body = held(rows(200, "second"));
      expect((await read()).body).toEqual(rows(200, "second"));
      const again = await received(busNc, async () => expect((await read()).body).toEqual(rows(200, "second")));
      expect(again.bytes).toBeLessThan(body.bytes.length / 4);
      expect(offered.at(-1)?.split(",")).toEqual([bodyTagOf(body.bytes), offered[3]]);

      // Another request is another key: nothing is offered for it; nor for a request too long to be a key, nor what a
      // caller puts in the metadata itself.
      await read("b");
      expect(offered.at(-1)).toBeUndefined();
      for (let i = 0; i < 4; i++) await read("x".repeat(5000));
      expect(offered.slice(-4)).toEqual([undefined, undefined, undefined, undefined]);
      await bus.request("derrick.test.kept.read", { id: "c" }, { haveBody: bodyTagOf(body.bytes) });
      expect(offered.at(-1)).toBeUndefined();

      // Bytes no cache keeps carry no tag: sent every time, whatever is offered.
      body = new EncodedJson(jsonBytes(rows(200, "third")));
      for (let i = 0; i < 3; i++) {
        const whole = await received(busNc, async () => expect((await read()).body).toEqual(rows(200, "third")));
        expect(whole.bytes).toBeGreaterThan(body.bytes.length);
      }
    } finally {
      bus.close();
      await actor.stop();
    }
  });

  it("bus - replicas holding equal bytes share a tag, replicas or callers answering differently are each kept: every body right, most named", async ({
    connection,
  }) => {
    const [a, b, busNc] = [await connection("kept-replica-a"), await connection("kept-replica-b"), await connection("kept-bus-2")];
    const equal = rows(100, "equal");
    // Each replica holds its own bytes object; for `mine`, each caller sees other bytes.
    const views = { alice: held(rows(100, "alice")), bob: held(rows(100, "bob")) };
    const answer = (replica: string) => {
      const own = held(equal);
      const byReplica = held({ ...rows(100, "replica"), replica });
      return (input: unknown, asked: Asked) => {
        const kind = (input as { kind: string }).kind;
        if (kind === "equal") return own;
        if (kind === "replica") return byReplica;
        return views[asked.who as keyof typeof views];
      };
    };
    const actors = [
      await serveHeld(a, "kept2", "derrick.test.kept.shared", answer("a")),
      await serveHeld(b, "kept2", "derrick.test.kept.shared", answer("b")),
    ];
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    const as = (subject: string): RequestMeta => ({ principal: { clientId: subject, subject, groups: [], kind: "user" } });
    try {
      for (const kind of ["equal", "replica"]) {
        const warm = async () => {
          for (let i = 0; i < 30; i++) await bus.request("derrick.test.kept.shared", { kind });
        };
        await warm();
        let bodies = 0;
        const took = await received(busNc, async () => {
          for (let i = 0; i < 20; i++) {
            const answer = await bus.request<{ rows: unknown[]; replica?: string }>("derrick.test.kept.shared", { kind });
            expect(answer.body.rows, kind).toHaveLength(100);
            if (kind === "replica") expect(["a", "b"], kind).toContain(answer.body.replica);
            bodies += answer.raw.length;
          }
        });
        expect(took.bytes, kind).toBeLessThan(bodies / 4);
      }
      // Two callers, one request, other bytes each: both kept (up to BODIES_PER_REQUEST), each named to its own caller.
      const mine = async (who: "alice" | "bob") => {
        const answer = await bus.request("derrick.test.kept.shared", { kind: "mine" }, as(who));
        expect(same(answer.raw, views[who].bytes), who).toBe(true);
        return answer.raw.length;
      };
      for (const who of ["alice", "alice", "alice", "bob", "bob", "bob"] as const) await mine(who);
      let bodies = 0;
      const took = await received(busNc, async () => {
        for (const who of ["alice", "bob", "alice", "bob", "bob", "alice"] as const) bodies += await mine(who);
      });
      expect(took.bytes).toBeLessThan(bodies / 4);
    } finally {
      bus.close();
      for (const actor of actors) await actor.stop();
    }
  });

  it("bus - a reply in flight is answered from the bodies kept when it was sent, though newer ones replaced them since", async ({
    connection,
  }) => {
    const [actorNc, busNc] = [await connection("kept-actor-4"), await connection("kept-bus-4")];
    const first = held(rows(100, "first"));
    let current = first;
    let holdNext = false;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => (started = resolve));
    const actor = await serveHeld(actorNc, "kept4", "derrick.test.kept.slow", async () => {
      // What a handler answers is fixed when it starts; the one asked to hold waits at the gate.
      const answer = current;
      if (holdNext) {
        holdNext = false;
        started();
        await gate;
      }
      return answer;
    });
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    const read = () => bus.request("derrick.test.kept.slow", { id: "one key" });
    try {
      for (let i = 0; i < 3; i++) await read();
      holdNext = true;
      const inFlight = read();
      await waiting;
      // Meanwhile more bodies than the Bus keeps per request replace the first there.
      for (let n = 0; n < BODIES_PER_REQUEST; n++) {
        current = held(rows(100, `newer ${n}`));
        for (let i = 0; i < 2; i++) await read();
      }
      release();
      expect(same((await inFlight).raw, first.bytes)).toBe(true);
    } finally {
      release();
      bus.close();
      await actor.stop();
    }
  });

  it("bus - gzip and plain forms are tagged apart, and a held body larger than one NATS message comes in chunks, then as a name", async ({
    connection,
  }) => {
    const [actorNc, busNc] = [await connection("kept-actor-3"), await connection("kept-bus-3")];
    // Hashes as text: gzip leaves about half, still several messages of the server's 100 KB.
    const large = { rows: Array.from({ length: 6000 }, (_, i) => createHash("sha256").update(String(i)).digest("hex")) };
    const body = held(large);
    const actor = await serveHeld(actorNc, "kept3", "derrick.test.kept.large", () => body);
    const bus = new Bus(busNc, { timeoutMs: 5000 });
    try {
      for (const acceptEncoding of [undefined, "gzip" as const]) {
        const plain = (raw: Uint8Array) => (acceptEncoding ? gunzipSync(raw) : raw);
        const sends: BusReply<unknown>[] = [];
        const whole = await received(busNc, async () => {
          for (let i = 0; i < 3; i++) sends.push(await bus.request("derrick.test.kept.large", undefined, { acceptEncoding }));
        });
        expect(whole.msgs, String(acceptEncoding)).toBeGreaterThanOrEqual(3 * 2);
        for (const send of sends) expect(same(plain(send.raw), body.bytes)).toBe(true);
        expect(sends[2]!.headers["Content-Encoding"]).toBe(acceptEncoding);
        let third: BusReply<unknown> | undefined;
        const named = await received(
          busNc,
          async () => (third = await bus.request("derrick.test.kept.large", undefined, { acceptEncoding })),
        );
        expect(named, String(acceptEncoding)).toMatchObject({ msgs: 1 });
        expect(named.bytes).toBeLessThan(1024);
        expect(same(third!.raw, sends[2]!.raw)).toBe(true);
        expect(third!.body).toEqual(large);
      }
      // A body over a request's share of the bound (a sixteenth of it) is never kept: it would push most others out.
      const small = new Bus(busNc, { timeoutMs: 5000, keptBodies: { entries: 10, bytes: 1024 * 1024 } });
      try {
        const each = await received(busNc, async () => {
          for (let i = 0; i < 4; i++) expect((await small.request("derrick.test.kept.large", undefined)).body).toEqual(large);
        });
        expect(each.bytes).toBeGreaterThan(4 * body.bytes.length);
      } finally {
        small.close();
      }
    } finally {
      bus.close();
      await actor.stop();
    }
  });

  it("bus - a tag that is not its bytes' is not kept, nor does it displace the kept bytes; a name of a body not held is a 502; a Bus that keeps none offers none", async ({
    connection,
  }) => {
    const nc = await connection("kept-foreign");
    const offers: (string | undefined)[] = [];
    const honest = jsonBytes(rows(100, "honest"));
    const forged = jsonBytes(rows(100, "forged"));
    let mode: "true" | "forge" | "name" = "true";
    // A foreign responder: tags what it sends with the honest bytes' tag (truly or not), or names a body nobody kept.
    const sub = nc.subscribe("derrick.test.kept.foreign", {
      callback: (_e, m) => {
        offers.push(m.headers?.get(Header.haveBody) || undefined);
        const h = natsHeaders();
        if (mode === "name") {
          h.set(Header.sameBody, "not-held");
          m.respond(undefined, { headers: h });
          return;
        }
        h.set(Header.bodyTag, bodyTagOf(honest));
        m.respond(mode === "forge" ? forged : honest, { headers: h });
      },
    });
    const buses: Bus[] = [];
    const busOf = (options: { keptBodies?: false } = {}) => {
      const bus = new Bus(nc, { timeoutMs: 2000, ...options });
      buses.push(bus);
      return bus;
    };
    const ask = async (bus: Bus) => (await bus.request("derrick.test.kept.foreign", undefined)).raw;
    try {
      mode = "name";
      const error = await ask(busOf()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DerrickError);
      expect((error as DerrickError).status).toBe(502);

      mode = "forge";
      const forging = busOf();
      for (let i = 0; i < 3; i++) expect(same(await ask(forging), forged)).toBe(true);
      expect(offers.slice(-3)).toEqual([undefined, undefined, undefined]);

      mode = "true";
      const keeping = busOf();
      const keepsNone = busOf({ keptBodies: false });
      offers.length = 0;
      for (const b of [keeping, keeping, keeping, keepsNone, keepsNone, keepsNone]) expect(same(await ask(b), honest)).toBe(true);
      expect(offers).toEqual([undefined, undefined, bodyTagOf(honest), undefined, undefined, undefined]);
      // Forged bytes under the tag kept: the kept bytes are what the tag names, and stay kept.
      mode = "forge";
      expect(same(await ask(keeping), honest)).toBe(true);
      mode = "true";
      expect(same(await ask(keeping), honest)).toBe(true);
      expect(offers.slice(-2)).toEqual([bodyTagOf(honest), bodyTagOf(honest)]);
    } finally {
      sub.unsubscribe();
      for (const bus of buses) bus.close();
    }
  });
});
