/**
 * The request path's own pieces: the Bus' single reply inbox and the raw header reader that stands in
 * for nats.js' header decoding on the actor side. Both lean on nats.js shapes that are not its public
 * API, so these tests also check the fast paths are really taken.
 */
import { describe, expect } from "vitest";
import fc from "fast-check";
import { MsgHdrsImpl, type Msg, type NatsConnection } from "@nats-io/nats-core";
import { Svcm, type ServiceMsg } from "@nats-io/services";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestNats } from "../harness/index.ts";
import { startNatsServer } from "../../platform/nats-server.ts";
import { connectNats } from "../../platform/nats.ts";
import { DerrickError, Header, type RequestMeta } from "../../subjects/index.ts";
import { natsTest } from "../harness/fixture.ts";
import {
  Bus,
  decodeRequestMeta,
  encodeRequestMeta,
  parseHeaderBlock,
  rawHeaderBlock,
  readRequestMeta,
} from "../../platform/transport/index.ts";

const encoder = new TextEncoder();
const meta: RequestMeta = {
  partition: "opendes",
  principal: { clientId: "alpha", subject: "Ünïcode user", groups: ["data.default.viewers", "users"], kind: "service" },
  requestId: "req-1",
  deadline: 1_900_000_000_000,
  traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
};

const it = natsTest();

describe("header block reader", () => {
  it("headers - the raw reader answers what nats.js' decoder answers, for any header block", () => {
    const key = fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/);
    const value = fc.oneof(fc.stringMatching(/^[ -~]{0,40}$/), fc.constantFrom("", "  padded  ", "a:b:c", "Ünïcode ✓", '{"json":[1,2]}'));
    const separator = fc.constantFrom(":", ": ", ":   ");
    const status = fc.constantFrom("NATS/1.0", "NATS/1.0 503", "NATS/1.0 503 No Responders", "NATS/1.0 408 Request Timeout");
    fc.assert(
      fc.property(status, fc.array(fc.tuple(key, separator, value), { maxLength: 8 }), (first, lines) => {
        const block = encoder.encode(`${first}\r\n${lines.map(([k, sep, v]) => `${k}${sep}${v}`).join("\r\n")}\r\n\r\n`);
        const reference = MsgHdrsImpl.decode(block);
        const fields = parseHeaderBlock(block);
        for (const k of reference.keys()) expect(fields.get(k)).toBe(reference.get(k));
        expect([...fields.keys()].sort()).toEqual(reference.keys().sort());
      }),
    );
  });

  it("headers - request metadata survives encode and raw read, line breaks in free text are dropped", () => {
    const block = (encodeRequestMeta(meta) as MsgHdrsImpl).encode();
    const fields = parseHeaderBlock(block);
    expect(decodeRequestMeta(MsgHdrsImpl.decode(block))).toEqual(meta);
    expect(fields.get(Header.principal)).toBe(JSON.stringify(meta.principal));
    const hostile = encodeRequestMeta({ requestId: "a\r\nDerrick-Partition: other", traceparent: "x\ny" });
    expect(hostile.keys()).toEqual([]);
  });

  it("headers - a principal is decoded once per distinct JSON and frozen; what is no object passes as before", () => {
    const once = (principal: string) => decodeRequestMeta(MsgHdrsImpl.fromRecord({ [Header.principal]: [principal] })).principal;
    const json = JSON.stringify(meta.principal);
    const first = once(json)!;
    expect(first).toEqual(meta.principal);
    expect(once(json)).toBe(first);
    expect(Object.isFrozen(first) && Object.isFrozen(first.groups)).toBe(true);
    expect(() => first.groups.push("data.root")).toThrow(TypeError);
    expect(once(JSON.stringify({ ...meta.principal, groups: ["users"] }))).not.toBe(first);
    expect(once("null")).toBeNull();
    expect(once("7")).toBe(7);
    // The meta of the edge's request takes gzip only as `gzip`.
    expect(decodeRequestMeta(encodeRequestMeta({ acceptEncoding: "gzip" })).acceptEncoding).toBe("gzip");
    expect(decodeRequestMeta(MsgHdrsImpl.fromRecord({ [Header.acceptEncoding]: ["br"] })).acceptEncoding).toBeUndefined();
  });
});

describe("bus and actor side on a real server", () => {
  /** A Bus on `nc` with a request to `subject` sent and waiting: the subscriber there never answers. */
  const requestLeftWaiting = async (nc: NatsConnection, subject: string) => {
    nc.subscribe(subject, { callback: () => undefined });
    const bus = new Bus(nc, { timeoutMs: 30_000 });
    const waiting = bus.request(subject, {}).catch((e: unknown) => e);
    await nc.flush();
    return { bus, waiting };
  };

  it("headers - messages from the server take the raw path, plain and through @nats-io/services", async ({ nats }) => {
    const nc = await connectNats(nats.url, "headers-test");
    try {
      const seen: { plain?: Msg; service?: ServiceMsg } = {};
      nc.subscribe("test.headers.plain", { callback: (_e, m) => void ((seen.plain = m), m.respond()) });
      const service = await new Svcm(nc).add({ name: "headers-test", version: "1.0.0" });
      service.addEndpoint("h", { subject: "test.headers.svc", handler: (_e, m) => void ((seen.service = m), m.respond()) });
      const bus = new Bus(nc, { timeoutMs: 2_000 });
      await bus.request("test.headers.plain", { a: 1 }, meta);
      await bus.request("test.headers.svc", undefined, meta);
      for (const msg of [seen.plain!, seen.service!]) {
        expect(rawHeaderBlock(msg)).toBeInstanceOf(Uint8Array);
        expect(readRequestMeta(msg)).toEqual(decodeRequestMeta(msg.headers));
        expect(readRequestMeta(msg)).toMatchObject({ ...meta, deadline: meta.deadline });
      }
      // a message without headers reads as no metadata
      nc.subscribe("test.headers.none", { callback: (_e, m) => void ((seen.plain = m), m.respond(encoder.encode("{}"))) });
      await nc.request("test.headers.none", encoder.encode("{}"));
      expect(rawHeaderBlock(seen.plain)).toBeNull();
      expect(readRequestMeta(seen.plain!)).toEqual({});
      await service.stop();
    } finally {
      await nc.close();
    }
  });

  it("bus - reply headers that are no object of strings (anyone may answer on an inbox) pass as none; a content coding is read in any case", async ({
    nats,
  }) => {
    const nc = await connectNats(nats.url, "bus-odd-headers");
    try {
      const sent = ["null", "[1]", '{"a":1}', '"text"', '{"x-ok":"1"}', '{"content-encoding":" GZIP "}'];
      nc.subscribe("test.bus.odd", {
        callback: (_e, m) => {
          const raw = sent[Number(m.string())]!;
          const body = raw.includes("GZIP") ? Bun.gzipSync(encoder.encode('{"z":1}')) : encoder.encode('{"ok":true}');
          m.respond(body, { headers: MsgHdrsImpl.fromRecord({ [Header.replyHeaders]: [raw] }) });
        },
      });
      const bus = new Bus(nc, { timeoutMs: 2_000 });
      const replies = await Promise.all(sent.map((_, i) => bus.request<Record<string, unknown>>("test.bus.odd", i)));
      expect(replies.slice(0, 4).map((r) => r.headers)).toEqual([{}, {}, {}, {}]);
      expect(replies.slice(0, 4).map((r) => r.body)).toEqual([{ ok: true }, { ok: true }, { ok: true }, { ok: true }]);
      expect(replies[4]!.headers).toEqual({ "x-ok": "1" });
      expect(Object.isFrozen(replies[4]!.headers)).toBe(true);
      expect(replies[5]!.body).toEqual({ z: 1 });
    } finally {
      await nc.close();
    }
  });

  it("bus - a reply arriving after its timeout settles nothing, even while another request waits", async ({ nats }) => {
    const nc = await connectNats(nats.url, "bus-late");
    try {
      let calls = 0;
      nc.subscribe("test.bus.late", {
        callback: (_e, m) => {
          const n = ++calls;
          // reply 1 lands at ~300 ms, while request 2 (sent at ~150 ms) still waits for its own at ~400 ms
          setTimeout(() => m.respond(encoder.encode(JSON.stringify({ n }))), n === 1 ? 300 : 250);
        },
      });
      const bus = new Bus(nc, { timeoutMs: 100 });
      const late = await bus.request("test.bus.late", {}).catch((e: unknown) => e);
      expect(late).toBeInstanceOf(DerrickError);
      expect((late as DerrickError).status).toBe(504);
      await new Promise((r) => setTimeout(r, 50));
      const next = await bus.request<{ n: number }>("test.bus.late", {}, {}, 1_000);
      expect(next.body).toEqual({ n: 2 });
      expect((bus as unknown as { pending: Map<string, unknown> }).pending.size).toBe(0);
    } finally {
      await nc.close();
    }
  });

  it("bus - requests waiting when the connection closes fail at once with 504 (sent, outcome unknown), not at their timeout", async ({
    nats,
  }) => {
    const nc = await connectNats(nats.url, "bus-close");
    const started = Date.now();
    const { waiting } = await requestLeftWaiting(nc, "test.bus.never");
    await nc.close();
    const error = await waiting;
    expect(error).toBeInstanceOf(DerrickError);
    expect((error as DerrickError).status).toBe(504);
    expect((error as DerrickError).headers["Retry-After"]).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("bus - requests waiting when the Bus itself is closed fail with 504 (sent, outcome unknown), new ones with 503", async ({ nats }) => {
    const nc = await connectNats(nats.url, "bus-own-close");
    try {
      const { bus, waiting } = await requestLeftWaiting(nc, "test.bus.never-own");
      bus.close();
      const error = await waiting;
      expect(error).toBeInstanceOf(DerrickError);
      // Sent: a Retry-After would invite the caller to repeat what may have been done.
      expect((error as DerrickError).status).toBe(504);
      expect((error as DerrickError).headers["Retry-After"]).toBeUndefined();
      const refused = await bus.request("test.bus.never-own", {}).catch((e: unknown) => e);
      expect((refused as DerrickError).status).toBe(503);
    } finally {
      await nc.close();
    }
  });

  it("bus - a dropped connection fails waiting requests at once with 504 (they were sent: a retry could repeat them), and new ones with 503 until it is back", async () => {
    const own = await startTestNats();
    const nc = await connectNats(own.url, "bus-drop");
    try {
      const { bus, waiting } = await requestLeftWaiting(nc, "test.bus.never");
      const started = Date.now();
      await own.stop();
      const error = await waiting;
      expect((error as DerrickError).status).toBe(504);
      expect((error as DerrickError).message).toMatch(/unknown/);
      expect(Date.now() - started).toBeLessThan(10_000);
      const during = await bus.request("test.bus.never", {}).catch((e: unknown) => e);
      expect((during as DerrickError).status).toBe(503);
      expect((during as DerrickError).message).toMatch(/down/);
    } finally {
      await nc.close();
      await own.cleanup();
    }
  });

  it("bus - a user the server refuses the reply inbox gets 503 at once, and the refusal is reported", async () => {
    const dir = mkdtempSync(join(tmpdir(), "derrick-bus-perm-"));
    const server = await startNatsServer({
      dir,
      port: -1,
      authorization: `authorization: ${JSON.stringify({ users: [{ user: "svc", password: "secret-pass", permissions: { publish: ">", subscribe: { allow: [">"], deny: ["_INBOX.>"] } } }] })}`,
    });
    const nc = await connectNats(server.url, "bus-perm", undefined, { user: "svc", pass: "secret-pass" });
    try {
      nc.subscribe("test.bus.echo", { callback: (_e, m) => void m.respond(m.data) });
      const refused: Error[] = [];
      const bus = new Bus(nc, { timeoutMs: 20_000, onInboxError: (e) => void refused.push(e) });
      await nc.flush().catch(() => undefined);
      const started = Date.now();
      const first = await bus.request("test.bus.echo", {}).catch((e: unknown) => e);
      const second = await bus.request("test.bus.echo", {}).catch((e: unknown) => e);
      expect((first as DerrickError).status).toBe(503);
      expect((second as DerrickError).status).toBe(503);
      expect((second as DerrickError).message).toMatch(/refused/);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(refused.length).toBe(1);
    } finally {
      await nc.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
