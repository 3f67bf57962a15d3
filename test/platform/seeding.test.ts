/**
 * DERRICK_CLIENTS is the truth for seeded clients: a rotated appkey or a removed client stops
 * working at the next start, clients made with `derrick apps create` are left alone. Handlers run
 * against the registry bucket of a real nats-server.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../harness/index.ts";
import { openRegistry, type Registry } from "../../actors/identity/registry.ts";
import { createApp, seedClients, verifyAppkey } from "../../actors/identity/handlers.ts";

describe("seeding DERRICK_CLIENTS", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let registry: Registry;
  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    registry = await openRegistry(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.cleanup();
  });

  const deps = () => ({ registry, tokenTtlSeconds: 3600 });
  const accepts = async (client_id: string, appkey: string) =>
    verifyAppkey({ client_id, appkey }, { registry }).then(
      () => true,
      (error: { status?: number }) => (error.status === 401 ? false : Promise.reject(error)),
    );

  it("seeding - a rotated appkey and a client dropped from the list stop working; clients made by `apps create` stay", async () => {
    const first = [
      { client_id: "rota", client_secret: "secret-rota-1", appkey: "appkey-rota-1" },
      { client_id: "gone", client_secret: "secret-gone-1", appkey: "appkey-gone-1" },
    ];
    expect(await seedClients(first, deps())).toEqual({ written: 2, removed: [] });
    const made = await createApp({ client_id: "by-cli" }, { registry });
    expect(await accepts("rota", "appkey-rota-1")).toBe(true);
    expect(await accepts("gone", "appkey-gone-1")).toBe(true);

    // Unchanged list: nothing rewritten, nothing removed.
    expect(await seedClients(first, deps())).toEqual({ written: 0, removed: [] });

    const second = [{ client_id: "rota", client_secret: "secret-rota-1", appkey: "appkey-rota-2" }];
    expect(await seedClients(second, deps())).toEqual({ written: 0, removed: ["gone"] });
    expect(await accepts("rota", "appkey-rota-2")).toBe(true);
    expect(await accepts("rota", "appkey-rota-1")).toBe(false);
    expect(await accepts("gone", "appkey-gone-1")).toBe(false);
    expect(await registry.getClient("gone")).toBeUndefined();
    expect(await accepts("by-cli", made.appkey)).toBe(true);
    expect((await registry.listClients()).map((c) => c.client_id).sort()).toEqual(["by-cli", "rota"]);

    // A client renamed with its appkey: the appkey moves to the new name, it is not dropped.
    const renamed = [{ client_id: "rota-2", client_secret: "secret-rota-1", appkey: "appkey-rota-2" }];
    expect(await seedClients(renamed, deps())).toEqual({ written: 1, removed: ["rota"] });
    expect(await accepts("rota-2", "appkey-rota-2")).toBe(true);
    expect(await accepts("rota", "appkey-rota-2")).toBe(false);

    // An empty list removes every seeded client, still not the one made by the CLI.
    expect(await seedClients([], deps())).toEqual({ written: 0, removed: ["rota-2"] });
    expect(await accepts("rota-2", "appkey-rota-2")).toBe(false);
    expect(await accepts("by-cli", made.appkey)).toBe(true);
  });
});
