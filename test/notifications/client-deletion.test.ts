/**
 * A deleted client leaves no subscriptions behind: `derrick apps delete` and a client dropped from
 * DERRICK_CLIENTS remove its subscriptions in every partition (through `client.forget`, answered by
 * the notifications actor), also when no notifications actor runs at the time of deletion, and a new
 * client cannot take the id while the old one's tokens are valid. The identity and notifications
 * actors run in separate processes' worth of connections so one can stop while the other runs.
 */
import { afterAll, describe, expect } from "vitest";
import { clientToken, eventually, startDerrick, TEST_CLIENTS, testClient, type TestDerrick, type TestNats } from "../harness/index.ts";
import { natsTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import { subjects } from "../../subjects/index.ts";
import type { AppCredentials } from "../../subjects/identity.ts";
import type { Subscription } from "../../subjects/notifications.ts";
import { DELIVERY_ENV, subscriptionStore } from "./helpers.ts";
import { forgetClient } from "../../actors/notifications/handlers.ts";
import { SubscriptionStore, type SubscriptionRecord } from "../../actors/notifications/store.ts";
import { openRegistry } from "../../actors/identity/registry.ts";
import { FORGET_GRACE_MS, forgetDeletedClients } from "../../actors/identity/handlers.ts";

const CALLBACK = "https://hooks.example.com/derrick";

// The identity side restarts within a test: its derricks are started by the tests, not by a fixture.
const withRestarts = natsTest();
const withRegistry = natsTest().extend("registry", { scope: "file" }, async ({ nc }) => openRegistry(nc));

describe("notifications of deleted clients", () => {
  const it = withRestarts;
  let front: TestDerrick; // edge, system, identity
  let notifier: TestDerrick | undefined; // the notifications actor alone
  const startNotifier = async (nats: TestNats) =>
    (notifier = await startDerrick(nats, { edge: false, actors: ["notifications"], env: DELIVERY_ENV }));
  const stopNotifier = async () => {
    await notifier?.cleanup();
    notifier = undefined;
  };

  it.beforeAll(async ({ nats }) => {
    front = await startDerrick(nats, { actors: ["system", "identity"], env: DELIVERY_ENV });
    await startNotifier(nats);
  });
  afterAll(async () => {
    await stopNotifier();
    await front?.cleanup();
  });

  const createClient = async (client_id: string) =>
    (await front.bus.request<AppCredentials>(subjects.identity["apps.create"](), { client_id, groups: ["users.datalake.viewers"] })).body;
  const deleteClient = (client_id: string) => front.bus.request(subjects.identity["apps.delete"](), { client_id });

  /** Subscribes `client` to `type` in `partition` over HTTP; answers the subscription id. */
  async function subscribe(
    client: { client_id: string; client_secret: string; appkey: string },
    type: string,
    partition: string,
  ): Promise<string> {
    const res = await fetch(`${front.url}/v1/notifications/subscriptions/types/${type}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${await clientToken(front.url, client)}`,
        appkey: client.appkey,
        "slb-partition-id": partition,
        "content-type": "application/json",
      },
      body: JSON.stringify({ subscriber: "tests", callback_uri: CALLBACK }),
    });
    if (res.status !== 200) throw new Error(`subscribe: ${res.status} ${await res.text()}`);
    return (await json<Subscription>(res)).subscription_id;
  }

  /** The client's subscriptions as stored, read from the bucket (whichever actor runs). */
  const storedOf = async (client_id: string) =>
    (await (await subscriptionStore(front)).listOfClient(client_id)).map((r) => r.subscription_id).sort();

  it("notifications - deleting a client removes its subscriptions in every partition, and its id cannot be taken again while its tokens are valid", async () => {
    const doomed = await createClient("doomed");
    const ids = [await subscribe(doomed, "PlanShared", "opendes"), await subscribe(doomed, "ProjectCreated", "other")].sort();
    const kept = await subscribe(TEST_CLIENTS.beta, "PlanShared", "opendes");
    expect(await storedOf("doomed")).toEqual(ids);

    expect((await deleteClient("doomed")).status).toBe(204);
    // Gone when the deletion answers (the notifications actor runs); other clients' stay.
    expect(await storedOf("doomed")).toEqual([]);
    const store = await subscriptionStore(front);
    for (const id of ids) expect(await store.get(id)).toBeUndefined();
    expect(await store.get(kept)).toBeDefined();

    // A new client with the same id would be named by the old one's tokens (and find what it left).
    await expect(createClient("doomed")).rejects.toMatchObject({ status: 409 });
  });

  it("notifications - a client deleted while no notifications actor runs loses its subscriptions once one is back", async ({ nats }) => {
    const orphan = await createClient("orphan");
    const ids = [await subscribe(orphan, "PlanShared", "opendes"), await subscribe(orphan, "PlanShared", "other")].sort();
    await stopNotifier();

    expect((await deleteClient("orphan")).status).toBe(204);
    expect(await storedOf("orphan")).toEqual(ids);
    // Its id stays taken until the subscriptions are gone.
    await expect(createClient("orphan")).rejects.toMatchObject({ status: 409 });

    await startNotifier(nats);
    await eventually(async () => (await storedOf("orphan")).length === 0, {
      timeoutMs: 15_000,
      intervalMs: 200,
      what: "the orphaned subscriptions to be removed",
    });
  });

  it("notifications - a client dropped from DERRICK_CLIENTS loses its subscriptions at the next start", async ({ nats }) => {
    const seeded = testClient("seeded-gone", ["users.datalake.viewers"]);
    await front.cleanup();
    front = await startDerrick(nats, {
      actors: ["system", "identity"],
      env: { ...DELIVERY_ENV, DERRICK_CLIENTS: JSON.stringify([...Object.values(TEST_CLIENTS), seeded]) },
    });
    const ids = [await subscribe(seeded, "MasterPlanChanged", "opendes"), await subscribe(seeded, "MasterPlanChanged", "other")].sort();
    expect(await storedOf("seeded-gone")).toEqual(ids);

    await front.cleanup();
    front = await startDerrick(nats, { actors: ["system", "identity"], env: DELIVERY_ENV });
    await eventually(async () => (await storedOf("seeded-gone")).length === 0, {
      timeoutMs: 10_000,
      intervalMs: 200,
      what: "the dropped client's subscriptions to be removed",
    });
  });
});

describe("forgetting deleted clients, step by step", () => {
  const it = withRegistry;
  it("notifications - client.forget removes only the client's subscriptions made before the cutoff, in every partition", async ({ nc }) => {
    const store = await SubscriptionStore.open(nc);
    const record = (id: string, client_id: string, partition: string, created_at: string): SubscriptionRecord => ({
      subscription_id: id,
      client_id,
      partition,
      subscription_type: "PlanShared",
      subscriber: "tests",
      callback_uri: CALLBACK,
      updated_at: created_at,
      created_at,
      secret: "whsec_dGVzdA==",
    });
    await store.create(record("sub_old1", "reborn", "opendes", "2026-01-01T00:00:00.000Z"));
    await store.create(record("sub_old2", "reborn", "other", "2026-01-01T00:00:00.000Z"));
    await store.create(record("sub_new", "reborn", "third", "2026-01-02T00:00:00.000Z"));
    await store.create(record("sub_other", "reborn-not", "opendes", "2026-01-01T00:00:00.000Z"));
    expect(await forgetClient({ client_id: "reborn", created_before: "2026-01-01T12:00:00.000Z" }, { store })).toEqual({ removed: 2 });
    expect((await store.listOfClient("reborn")).map((r) => r.subscription_id)).toEqual(["sub_new"]);
    expect(await store.get("sub_other")).toBeDefined();
    // Idempotent: asked again, nothing more goes.
    expect(await forgetClient({ client_id: "reborn", created_before: "2026-01-01T12:00:00.000Z" }, { store })).toEqual({ removed: 0 });
  });

  it("notifications - a deleted client is asked for until the notifications actor answered after the grace, and its record is dropped once its id is reusable", async ({
    registry,
  }) => {
    const deletedAt = Date.parse("2026-03-01T00:00:00.000Z");
    await registry.putDeletedClient({
      client_id: "step",
      deleted_at: new Date(deletedAt).toISOString(),
      reusable_at: new Date(deletedAt + 3_600_000).toISOString(),
    });
    const asked: string[] = [];
    let answering = false;
    const forget = async (request: { client_id: string; created_before: string }) => {
      if (!answering) throw new Error("no responders");
      asked.push(`${request.client_id} ${request.created_before}`);
    };
    const pass = (at: number) => forgetDeletedClients({ registry, forget, now: () => at });
    const step = async () => (await registry.listDeletedClients()).find((d) => d.value.client_id === "step")?.value;

    // Nobody answers: pending, and nothing recorded as done.
    expect(await pass(deletedAt + 1_000)).toMatchObject({ pending: 1, failed: [{ client_id: "step" }] });
    answering = true;
    // Answered within the grace: the client might still make one through a cached appkey, so not done yet.
    expect(await pass(deletedAt + 2_000)).toEqual({ pending: 1, failed: [] });
    expect((await step())?.forgotten_at).toBeUndefined();
    // Answered after it: done.
    expect(await pass(deletedAt + FORGET_GRACE_MS + 1_000)).toEqual({ pending: 0, failed: [] });
    const cutoff = new Date(deletedAt + FORGET_GRACE_MS).toISOString();
    expect(asked).toEqual([`step ${cutoff}`, `step ${cutoff}`]);
    expect((await step())?.forgotten_at).toBeDefined();
    // Nothing more is asked; the record goes once the id is reusable.
    await pass(deletedAt + 60 * 60_000 - 1);
    expect(asked).toHaveLength(2);
    expect(await step()).toBeDefined();
    await pass(deletedAt + 60 * 60_000);
    expect(await step()).toBeUndefined();
  });
});
