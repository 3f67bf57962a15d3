import { describe, expect } from "vitest";
import type { NatsConnection } from "@nats-io/nats-core";
import { KvWatchInclude } from "@nats-io/kv";
import { eventually, openBucket } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem, json as readJson } from "../harness/json.ts";
import { openApiDocument } from "../harness/openapi.ts";
import { twinBucket, type TwinGetReply, type TwinPutReply } from "../../subjects/twins.ts";
import { TwinCommitGate, TwinWatchView, toTwinEntry, type TwinEntry } from "../../platform/twin-commit.ts";
import { putTwins } from "../../actors/twins/handlers.ts";
import { kvTwinStores } from "../../actors/twins/store.ts";
import { createLogger } from "../../platform/logger.ts";
import { putTwin as put, twinPath as path, twinState } from "./helpers.ts";

const json = (body: unknown) => JSON.stringify(body);

const rest = derrickTest({ actors: ["identity", "twins"] });
const wideBodies = derrickTest({ actors: ["identity", "twins"], env: { DERRICK_BODY_LIMIT: String(4 * 1024 * 1024) } });

describe("twin properties REST", () => {
  const it = rest;

  it("twins - a PUT stores every property under twin_properties/<group>/desired/<name> and answers versions", async ({ derrick, nc }) => {
    const res = await put(derrick, "dev-1", {
      group: "config",
      twins: [
        { name: "MyApp", value: '{"Name":"MyApp"}' },
        { name: "rate", value: "5" },
      ],
    });
    expect(res.status).toBe(200);
    const body = await readJson<TwinPutReply>(res);
    expect(body.group).toBe("config");
    expect(body.twins.map((t) => t.name)).toEqual(["MyApp", "rate"]);
    for (const twin of body.twins) expect(Number.isInteger(twin.version)).toBe(true);
    const version = Math.max(...body.twins.map((t) => t.version));
    expect(res.headers.get("etag")).toBe(`"${version}"`);
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-1" }));
    const entry = await kv.get("twin_properties/config/desired/rate");
    expect(entry?.string()).toBe("5");
    expect(entry?.revision).toBe(body.twins[1]!.version);
  });

  it("twins - GET returns desired and reported with versions and times, filtered by group with an ETag", async ({ derrick, nc }) => {
    await put(derrick, "dev-2", { group: "g1", twins: [{ name: "a", value: "1" }] });
    const second = await put(derrick, "dev-2", { group: "g2", twins: [{ name: "b", value: "2" }] });
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-2" }));
    await kv.put("twin_properties/g1/reported/a", "1");
    const all = await derrick.call(path("dev-2"), { as: "admin", partition: null });
    expect(all.status).toBe(200);
    expect(all.headers.get("etag")).toBeNull();
    const body = await readJson<TwinGetReply>(all);
    expect(Object.keys(body.desired).sort()).toEqual(["g1", "g2"]);
    expect(body.desired.g1!.a).toMatchObject({ value: "1" });
    expect(body.desired.g1!.a!.updated_at).toMatch(/Z$/);
    expect(body.reported).toMatchObject({ g1: { a: { value: "1" } } });
    const filtered = await derrick.call(`${path("dev-2")}?group=g2`, { as: "admin", partition: null });
    expect(filtered.headers.get("etag")).toBe(second.headers.get("etag"));
    expect(Object.keys((await readJson<TwinGetReply>(filtered)).desired)).toEqual(["g2"]);
    const empty = await derrick.call(path("never-written"), { as: "admin", partition: null });
    expect(await empty.json()).toEqual({ desired: {}, reported: {} });
  });

  it("twins - GETs share one consumer on the twin's stream, the view's watch, instead of one each (each would stay five minutes and slow every later write)", async ({
    derrick,
    jsm,
  }) => {
    await put(derrick, "dev-reads", { group: "g", twins: [{ name: "a", value: "1" }] });
    for (let i = 0; i < 10; i++) expect((await derrick.call(path("dev-reads"), { as: "admin", partition: null })).status).toBe(200);
    const stream = `KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-reads" })}`;
    await eventually(async () => (await jsm.streams.info(stream)).state.consumer_count === 1, {
      timeoutMs: 3_000,
      what: "one consumer left: the view's watch",
    });
  });

  it("twins - writes need twins.writers, reads need a twins group, and a token is required", async ({ derrick }) => {
    expect((await put(derrick, "dev-3", { group: "g", twins: [{ name: "a", value: "1" }] }, { as: "alpha" })).status).toBe(403);
    expect((await derrick.call(path("dev-3"), { as: "beta", partition: null })).status).toBe(403);
    expect((await put(derrick, "dev-3", { group: "g", twins: [{ name: "a", value: "1" }] }, { as: null })).status).toBe(401);
  });

  it("twins - names, groups, empty lists and unknown fields outside the contract are 400 naming the field", async ({ derrick }) => {
    const cases: Array<[unknown, string]> = [
      [{ group: "g", twins: [{ name: "a.b", value: "1" }] }, "/body/twins/0/name"],
      [{ group: "g/x", twins: [{ name: "a", value: "1" }] }, "/body/group"],
      [{ group: "g", twins: [] }, "/body/twins"],
      [{ group: "g", twins: [{ name: "a", value: 1 }] }, "/body/twins/0/value"],
      [{ group: "g", twins: [{ name: "a", value: "1", extra: true }] }, "/body/twins/0/extra"],
      [
        {
          group: "g",
          twins: [
            { name: "a", value: "1" },
            { name: "a", value: "2" },
          ],
        },
        "/body/twins/1/name",
      ],
      [{ group: "__proto__", twins: [{ name: "a", value: "1" }] }, "/body/group"],
      [{ group: "g", twins: [{ name: "constructor", value: "1" }] }, "/body/twins/0/name"],
    ];
    for (const [body, pointer] of cases) {
      const res = await put(derrick, "dev-4", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(problem.errors?.map((e) => e.pointer)).toContain(pointer);
    }
    expect(
      (
        await derrick.call(`/api/twin-properties/v1/acme/prod/bad.twin/twin-properties`, {
          method: "PUT",
          body: json({ group: "g", twins: [{ name: "a", value: "1" }] }),
          as: "admin",
          partition: null,
        })
      ).status,
    ).toBe(400);
    // The DELETE path names its group and name as /params/… like every path field (README: /body, /query, /params, /headers).
    for (const [suffix, pointer] of [
      ["__proto__/a", "/params/group"],
      ["g/constructor", "/params/name"],
    ]) {
      const res = await derrick.call(`${path("dev-4")}/${suffix}`, { method: "DELETE", as: "admin", partition: null });
      expect(res.status, suffix).toBe(400);
      const problem = await expectProblem(res, 400);
      expect(
        problem.errors?.map((e) => e.pointer),
        suffix,
      ).toEqual([pointer]);
    }
  });

  it("twins - keys a device wrote with __proto__ or constructor as group or name are not shown and touch no prototype", async ({
    derrick,
    nc,
  }) => {
    await put(derrick, "dev-proto", { group: "g", twins: [{ name: "a", value: "1" }] });
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-proto" }));
    // A device may write any key into its own bucket; these would set Object.prototype.polluted on a
    // plain-object reply, and Object.polluted through "constructor".
    await kv.put("twin_properties/__proto__/reported/polluted", "yes");
    await kv.put("twin_properties/constructor/reported/polluted", "yes");
    await kv.put("twin_properties/g/reported/__proto__", "yes");
    const state = await twinState(derrick, "dev-proto");
    expect(state.desired).toEqual({ g: { a: expect.objectContaining({ value: "1" }) } });
    expect(state.reported).toEqual({});
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((Object as unknown as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("twins - the commit gate takes a commit record that is none (names no list of twin names, not JSON, an unknown state) as no record, and never throws on it", () => {
    const at = new Date().toISOString();
    const entry = (key: string, value: string, revision: number): TwinEntry => ({
      key,
      value,
      revision,
      operation: "PUT",
      created: new Date(),
    });
    const claim = entry("twin_commits/g", json({ state: "pending", names: ["a"], values: { a: "1" }, version: 0, at }), 1);
    const held = entry("twin_properties/g/desired/a", "1", 2);
    const invalid = [
      { state: "pending", names: 1, version: 0, at },
      { state: "pending", names: [1], version: 0, at },
      { state: "pending", names: ["a b"], version: 0, at },
      { state: "pending", names: ["a"], values: { "a/b": "1" }, version: 0, at },
      { state: "pending", names: ["a"], version: -1, at },
      { state: "held", names: ["a"], version: 0, at },
      null,
    ].map((record) => json(record));
    for (const value of [...invalid, "{not json"]) {
      const gate = new TwinCommitGate();
      expect(gate.feed(claim)).toEqual([]);
      expect(gate.feed(held)).toEqual([]);
      // Like a deleted record: the claim is gone and what it held is visible.
      expect(gate.feed(entry("twin_commits/g", value, 3)), value).toEqual([held]);
      const later = entry("twin_properties/g/desired/a", "2", 4);
      expect(gate.feed(later), value).toEqual([later]);
      // A pending record that is none claims nothing either.
      const fresh = new TwinCommitGate();
      expect(fresh.feed(entry("twin_commits/g", value, 1)), value).toEqual([]);
      expect(fresh.feed(held), value).toEqual([held]);
    }
  });

  it("twins - a commit record a device wrote with names that are no list breaks neither the GET nor the next PUT, which claims the group over it", async ({
    derrick,
    nc,
  }) => {
    await put(derrick, "dev-bad-commit", { group: "g", twins: [{ name: "a", value: "1" }] });
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-bad-commit" }));
    // A device may write any key of its own bucket, its commit records included.
    await kv.put("twin_commits/g", json({ state: "pending", names: 1 }));
    const read = async () => {
      const res = await derrick.call(`${path("dev-bad-commit")}?group=g`, { as: "admin", partition: null });
      expect(res.status).toBe(200);
      return { etag: res.headers.get("etag"), state: await readJson<TwinGetReply>(res) };
    };
    const before = await read();
    expect(before.state.desired.g!.a!.value).toBe("1");
    expect(before.etag).toBe('"0"');
    const next = await put(derrick, "dev-bad-commit", { group: "g", twins: [{ name: "a", value: "2" }] });
    expect(next.status).toBe(200);
    const after = await read();
    expect(after.state.desired.g!.a!.value).toBe("2");
    expect(after.etag).toBe(next.headers.get("etag"));
    expect(JSON.parse((await kv.get("twin_commits/g"))!.string())).toMatchObject({ state: "committed", names: ["a"] });
  });

  it("twins - a value over 64 KiB or a request over the body limit is 413 and nothing is written", async ({ derrick }) => {
    const big = await put(derrick, "dev-5", {
      group: "g",
      twins: [
        { name: "ok", value: "1" },
        { name: "big", value: "x".repeat(64 * 1024 + 1) },
      ],
    });
    expect(big.status).toBe(413);
    // The problem names the offending value like every field error (RFC 9457 body, JSON pointer).
    expect((await expectProblem(big, 413)).errors?.map((e) => e.pointer)).toEqual(["/body/twins/1/value"]);
    const huge = await put(derrick, "dev-5", {
      group: "g",
      twins: Array.from({ length: 20 }, (_, i) => ({ name: `n${i}`, value: "y".repeat(60 * 1024) })),
    });
    expect(huge.status).toBe(413);
    const state = await twinState(derrick, "dev-5");
    expect(state.desired).toEqual({});
  });

  it("twins - If-Match with a stale version is 412; with the current one the PUT lands", async ({ derrick }) => {
    const first = await put(derrick, "dev-6", { group: "g", twins: [{ name: "a", value: "1" }] });
    const etag = first.headers.get("etag")!;
    await put(derrick, "dev-6", { group: "g", twins: [{ name: "a", value: "2" }] });
    expect(
      (await put(derrick, "dev-6", { group: "g", twins: [{ name: "a", value: "3" }] }, { headers: { "if-match": etag } })).status,
    ).toBe(412);
    const current = (await derrick.call(`${path("dev-6")}?group=g`, { as: "admin", partition: null })).headers.get("etag")!;
    const ok = await put(
      derrick,
      "dev-6",
      { group: "g", twins: [{ name: "a", value: "3" }] },
      { headers: { "if-match": current.replaceAll('"', "") } },
    );
    expect(ok.status).toBe(200);
    expect(
      (await put(derrick, "dev-6", { group: "g", twins: [{ name: "a", value: "4" }] }, { headers: { "if-match": "nope" } })).status,
    ).toBe(400);
  });

  it("twins - a PUT refused with 412 on a twin never written creates nothing: no bucket", async ({ derrick, jsm }) => {
    const res = await put(derrick, "dev-never", { group: "g", twins: [{ name: "a", value: "1" }] }, { headers: { "if-match": '"7"' } });
    expect(res.status).toBe(412);
    await expect(jsm.streams.info(`KV_${twinBucket({ organization: "acme", environment: "prod", twinId: "dev-never" })}`)).rejects.toThrow(
      /not found/,
    );
    // "0" is the version of a group with nothing yet: that PUT creates the twin.
    expect(
      (await put(derrick, "dev-never", { group: "g", twins: [{ name: "a", value: "1" }] }, { headers: { "if-match": '"0"' } })).status,
    ).toBe(200);
  });

  it("twins - the OpenAPI document lists 507 (the twin or the deployment is full) among the answers of PUT and DELETE", async ({
    derrick,
  }) => {
    const doc = await openApiDocument(derrick.url);
    const base = "/api/twin-properties/v1/{organization}/{environment}/{twinId}/twin-properties";
    expect(Object.keys(doc.paths[base]!.put!.responses)).toContain("507");
    expect(Object.keys(doc.paths[`${base}/{group}/{name}`]!.delete!.responses)).toContain("507");
  });

  it("twins - DELETE removes one property and answers 204", async ({ derrick }) => {
    await put(derrick, "dev-7", {
      group: "g",
      twins: [
        { name: "a", value: "1" },
        { name: "b", value: "2" },
      ],
    });
    const res = await derrick.call(`${path("dev-7")}/g/a`, { method: "DELETE", as: "admin", partition: null });
    expect(res.status).toBe(204);
    const state = await twinState(derrick, "dev-7");
    expect(Object.keys(state.desired.g!)).toEqual(["b"]);
    expect((await derrick.call(`${path("dev-7")}/g/a`, { method: "DELETE", as: "alpha", partition: null })).status).toBe(403);
  });

  it("twins - a commit gate following a bucket holds one value per claimed name, however often a device rewrites it under a claim nobody commits", async ({
    derrick,
    nc,
  }) => {
    await put(derrick, "dev-held", { group: "seed", twins: [{ name: "s", value: "0" }] });
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: "dev-held" }));
    // The gate as the twin mirror runs it: one for the life of its watch, which sees every write.
    const gate = new TwinCommitGate();
    const heldEntries = () => {
      const held = (gate as unknown as { held: Map<string, Map<string, unknown> | unknown[]> }).held;
      let n = 0;
      for (const group of held.values()) n += Array.isArray(group) ? group.length : group.size;
      return n;
    };
    const watch = await kv.watch({ include: "updates" });
    let last = Number.POSITIVE_INFINITY;
    const released: TwinEntry[] = [];
    const following = (async () => {
      for await (const raw of watch) {
        released.push(...gate.feed(toTwinEntry(raw)));
        if (raw.revision >= last) break;
      }
    })();
    // A device may write any key of its own bucket: a pending claim of its own, then the claimed key over and over.
    await kv.put("twin_commits/g", json({ state: "pending", names: ["a"], version: 0, at: new Date().toISOString() }));
    let written = 0;
    for (let i = 0; i < 200; i++) written = await kv.put("twin_properties/g/desired/a", String(i));
    last = written;
    await kv.put("twin_properties/g/desired/other", "x"); // wakes the loop should it be waiting past `last`
    await following;
    watch.stop();
    expect(released.filter((e) => e.key === "twin_properties/g/desired/a")).toEqual([]);
    expect(heldEntries()).toBe(1);
    // The claim committed: the newest value is released, and nothing stays held.
    const commit = {
      key: "twin_commits/g",
      revision: written + 2,
      operation: "PUT" as const,
      value: json({ state: "committed", names: ["a"], version: written, at: new Date().toISOString() }),
      created: new Date(),
    };
    expect(gate.feed(commit).map((e) => [e.key, e.value])).toEqual([["twin_properties/g/desired/a", "199"]]);
    expect(heldEntries()).toBe(0);
  });

  /**
   * Watches a twin bucket through TwinWatchView, as the SDK and the twin mirror do, recording every
   * state of the names it hands on that is not one PUT's (torn) and the revision holes it received.
   */
  async function watchTwin(nc: NatsConnection, twin: string, names: string[], from?: number) {
    const kv = await openBucket(nc, twinBucket({ organization: "acme", environment: "prod", twinId: twin }));
    const visible = new Map<string, string>();
    const torn: string[] = [];
    let holes = 0;
    let last = 0;
    const view = new TwinWatchView({
      lastSeq: async () => (await kv.status()).streamInfo.state.last_seq,
      emit: (entries) => {
        for (const entry of entries) visible.set(entry.key.split("/").at(-1)!, entry.value);
        if (entries.some((e) => names.includes(e.key.split("/").at(-1)!))) {
          const rounds = new Set(names.map((n) => visible.get(n)));
          if (rounds.size !== 1) torn.push([...rounds].join(","));
        }
      },
    });
    const watch = await kv.watch(from ? { resumeFromRevision: from } : { include: KvWatchInclude.AllHistory });
    void (async () => {
      for await (const raw of watch) {
        if (last > 0 && raw.revision !== last + 1) holes++;
        last = raw.revision;
        await view.feed(toTwinEntry(raw), raw.delta);
      }
    })();
    return {
      visible,
      torn,
      holes: () => holes,
      stop: () => {
        watch.stop();
        view.stop();
      },
    };
  }

  it("twins - a watcher never sees part of one PUT, even with concurrent PUTs to the same group", async ({ derrick, nc }) => {
    await put(derrick, "dev-8", { group: "g", twins: [{ name: "seed", value: "0" }] });
    const names = ["a", "b", "c", "d", "e"];
    const watcher = await watchTwin(nc, "dev-8", names);
    const rounds = Array.from({ length: 12 }, (_, round) =>
      put(derrick, "dev-8", { group: "g", twins: names.map((name) => ({ name, value: `r${round}` })) }),
    );
    const answers = await Promise.all(rounds);
    expect(answers.map((r) => r.status)).toEqual(Array(12).fill(200));
    // The PUT committed last holds the highest version (ETag) of the group.
    const versions = await Promise.all(answers.map(async (r) => Number((r.headers.get("etag") ?? "").replaceAll('"', ""))));
    const lastRound = versions.indexOf(Math.max(...versions));
    await eventually(() => names.every((n) => watcher.visible.get(n) === `r${lastRound}`), { what: "the last PUT's values" });
    watcher.stop();
    expect(watcher.torn).toEqual([]);
  });

  it("twins - a watcher far behind the writers, whose claim records JetStream already removed, still never sees part of one PUT", async ({
    derrick,
    nc,
  }) => {
    const seeded = await put(derrick, "dev-8b", { group: "g", twins: [{ name: "seed", value: "0" }] });
    const from = Number((seeded.headers.get("etag") ?? "").replaceAll('"', "")) + 1;
    const names = ["a", "b", "c", "d", "e"];
    for (let round = 0; round < 6; round++)
      expect((await put(derrick, "dev-8b", { group: "g", twins: names.map((name) => ({ name, value: `r${round}` })) })).status).toBe(200);
    // Resumed where a watcher stalled after the seed: each key and the commit record kept two revisions.
    const watcher = await watchTwin(nc, "dev-8b", names, from);
    await eventually(() => names.every((n) => watcher.visible.get(n) === "r5"), { what: "the last PUT's values" });
    watcher.stop();
    expect(watcher.holes()).toBeGreaterThan(0);
    expect(watcher.torn).toEqual([]);
  });

  it("twins - a commit left pending by a dead writer is rolled forward by the next writer", async ({ derrick, nc }) => {
    const address = { organization: "acme", environment: "prod", twinId: "dev-9" };
    const deps = { stores: kvTwinStores(nc), leaseMs: 50 };
    const ctx = {
      requestId: "t",
      log: createLogger("silent"),
      principal: { clientId: "admin", subject: "admin", groups: ["twins.writers"], kind: "service" as const },
    };
    await putTwins({ ...address, group: "g", twins: [{ name: "a", value: "0" }] }, ctx, deps);
    const kv = await openBucket(nc, twinBucket(address));
    const record = await kv.get("twin_commits/g");
    // A writer claimed the group, wrote one of two keys, and died.
    const pending = {
      state: "pending",
      names: ["a", "b"],
      values: { a: "1", b: "1" },
      version: record!.revision,
      at: new Date(Date.now() - 60_000).toISOString(),
    };
    await kv.update("twin_commits/g", JSON.stringify(pending), record!.revision);
    await kv.put("twin_properties/g/desired/a", "1");
    const hidden = await twinState(derrick, "dev-9");
    expect(hidden.desired.g!.a!.value).toBe("0");
    await putTwins({ ...address, group: "g", twins: [{ name: "c", value: "2" }] }, ctx, deps);
    const state = await twinState(derrick, "dev-9");
    expect(Object.fromEntries(Object.entries(state.desired.g!).map(([k, v]) => [k, v.value]))).toEqual({ a: "1", b: "1", c: "2" });
  });

  it("twins - after the twin's bucket is deleted a GET answers as for a twin never written, and each later PUT lands (200) in a bucket made again", async ({
    derrick,
    jsm,
  }) => {
    const twin = "dev-deleted";
    for (let i = 1; i <= 5; i++)
      expect((await put(derrick, twin, { group: "g", twins: [{ name: "rate", value: String(i) }] })).status).toBe(200);
    const stream = `KV_${twinBucket({ organization: "acme", environment: "prod", twinId: twin })}`;
    await jsm.streams.delete(stream);
    const gone = await derrick.call(`${path(twin)}?group=g`, { as: "admin", partition: null });
    expect(gone.status).toBe(200);
    expect(gone.headers.get("etag")).toBe('"0"');
    expect(await gone.json()).toEqual({ desired: {}, reported: {} });
    // Every PUT: the writer's remembered revisions (above the new bucket's) are no reason for a 409.
    for (let i = 6; i <= 8; i++) {
      const res = await put(derrick, twin, { group: "g", twins: [{ name: "rate", value: String(i) }] });
      expect({ i, status: res.status }).toEqual({ i, status: 200 });
    }
    expect((await jsm.streams.info(stream)).state.messages).toBeGreaterThan(0);
    const state = await twinState(derrick, twin, "g");
    expect(state.desired.g!.rate!.value).toBe("8");
  });
});

describe("twin properties REST with DERRICK_BODY_LIMIT above 1 MiB", () => {
  const it = wideBodies;

  it("twins - a PUT request over 1 MiB is 413 even when its values add up to less and the edge takes larger bodies elsewhere", async ({
    derrick,
  }) => {
    // 16 values of 60,000 '"' each: 960,000 bytes of values, ~1.9 MB of JSON once escaped.
    const twins = Array.from({ length: 16 }, (_, i) => ({ name: `n${i}`, value: '"'.repeat(60_000) }));
    const body = json({ group: "g", twins });
    expect(Buffer.byteLength(body)).toBeGreaterThan(1024 * 1024);
    const res = await derrick.call(path("dev-wide"), { method: "PUT", body, as: "admin", partition: null });
    expect(res.status).toBe(413);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    // Sent chunked (no Content-Length), it is refused all the same.
    const chunked = await derrick.call(path("dev-wide"), {
      method: "PUT",
      body: new Blob([body]).stream(),
      as: "admin",
      partition: null,
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    const state = await twinState(derrick, "dev-wide");
    expect(state.desired).toEqual({});
    // Within 1 MiB the same kind of PUT lands.
    expect(
      (
        await derrick.call(path("dev-wide"), {
          method: "PUT",
          body: json({ group: "g", twins: twins.slice(0, 8) }),
          as: "admin",
          partition: null,
        })
      ).status,
    ).toBe(200);
  });
});
