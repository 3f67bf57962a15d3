/**
 * DERRICK_CLIENTS is the truth for seeded clients: a rotated appkey or a removed client stops
 * working at the next start, clients made with `derrick apps create` are left alone. Handlers run
 * against the registry bucket of a real nats-server.
 */
import { describe, expect } from "vitest";
import { natsTest } from "../harness/fixture.ts";
import { openRegistry, type Registry } from "../../actors/identity/registry.ts";
import { createApp, seedClients, verifyAppkey } from "../../actors/identity/handlers.ts";

const it = natsTest().extend("registry", { scope: "file" }, async ({ nc }) => openRegistry(nc));

describe("seeding DERRICK_CLIENTS", () => {
  const deps = (registry: Registry) => ({ registry, tokenTtlSeconds: 3600 });
  const accepts = async (registry: Registry, client_id: string, appkey: string) =>
    verifyAppkey({ client_id, appkey }, { registry }).then(
      () => true,
      (error: { status?: number }) => (error.status === 401 ? false : Promise.reject(error)),
    );

  it("seeding - a rotated appkey and a client dropped from the list stop working; clients made by `apps create` stay", async ({
    registry,
  }) => {
    const first = [
      { client_id: "rota", client_secret: "secret-rota-1", appkey: "appkey-rota-1" },
      { client_id: "gone", client_secret: "secret-gone-1", appkey: "appkey-gone-1" },
    ];
    expect(await seedClients(first, deps(registry))).toEqual({ written: 2, removed: [] });
    const made = await createApp({ client_id: "by-cli" }, { registry });
    expect(await accepts(registry, "rota", "appkey-rota-1")).toBe(true);
    expect(await accepts(registry, "gone", "appkey-gone-1")).toBe(true);

    // Unchanged list: nothing rewritten, nothing removed.
    expect(await seedClients(first, deps(registry))).toEqual({ written: 0, removed: [] });

    const second = [{ client_id: "rota", client_secret: "secret-rota-1", appkey: "appkey-rota-2" }];
    expect(await seedClients(second, deps(registry))).toEqual({ written: 0, removed: ["gone"] });
    expect(await accepts(registry, "rota", "appkey-rota-2")).toBe(true);
    expect(await accepts(registry, "rota", "appkey-rota-1")).toBe(false);
    expect(await accepts(registry, "gone", "appkey-gone-1")).toBe(false);
    expect(await registry.getClient("gone")).toBeUndefined();
    expect(await accepts(registry, "by-cli", made.appkey)).toBe(true);
    expect((await registry.listClients()).map((c) => c.client_id).sort()).toEqual(["by-cli", "rota"]);

    // A client renamed with its appkey: the appkey moves to the new name, it is not dropped.
    const renamed = [{ client_id: "rota-2", client_secret: "secret-rota-1", appkey: "appkey-rota-2" }];
    expect(await seedClients(renamed, deps(registry))).toEqual({ written: 1, removed: ["rota"] });
    expect(await accepts(registry, "rota-2", "appkey-rota-2")).toBe(true);
    expect(await accepts(registry, "rota", "appkey-rota-2")).toBe(false);

    // An empty list removes every seeded client, still not the one made by the CLI.
    expect(await seedClients([], deps(registry))).toEqual({ written: 0, removed: ["rota-2"] });
    expect(await accepts(registry, "rota-2", "appkey-rota-2")).toBe(false);
    expect(await accepts(registry, "by-cli", made.appkey)).toBe(true);
  });
});
