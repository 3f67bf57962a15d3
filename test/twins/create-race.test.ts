/**
 * nats-server 2.9 crashes (nil store) when a `STREAM.MSG.GET` reaches a stream another process is
 * creating, or re-creating after a delete: the stream is registered before its store exists. Direct
 * gets are served only once the store exists, so the twins store reads with them.
 */
import { describe, expect } from "vitest";
import { natsTest } from "../harness/fixture.ts";
import { kvTwinStores } from "../../actors/twins/store.ts";
import { twinKey, type TwinAddress } from "../../subjects/twins.ts";

const it = natsTest();

describe("twin reads on nats-server 2.9", () => {
  it("twins - a process reading a twin another process made uses direct gets, never STREAM.MSG.GET (which crashes the server while a stream is being made)", async ({
    nats,
    connection,
  }) => {
    const [a, b] = await Promise.all([connection("creator"), connection("reader")]);
    const seen: string[] = [];
    const spy = a.subscribe("$JS.API.>", { callback: (_e, msg) => void seen.push(msg.subject) });
    await a.flush();
    const address: TwinAddress = { organization: "acme", environment: "reads", twinId: "t1" };
    const small = { maxTwins: 0, maxBytes: 64 * 1024, views: 10 };
    const created = await kvTwinStores(a, undefined, small).open(address, true);
    await created!.put(twinKey("g", "desired", "x"), "1");
    const read = await (await kvTwinStores(b, undefined, small).open(address, false))!.get(twinKey("g", "desired", "x"));
    expect(read?.value).toBe("1");
    await a.flush();
    spy.unsubscribe();
    expect(seen.filter((s) => s.startsWith("$JS.API.STREAM.MSG.GET."))).toEqual([]);
    expect(seen.filter((s) => s.startsWith("$JS.API.DIRECT.GET.")).length).toBeGreaterThan(0);
    expect(nats.process.exitCode).toBeNull();
  });
});
