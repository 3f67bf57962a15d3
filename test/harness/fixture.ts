/**
 * Vitest fixtures for "a derrick on a real nats-server": one server, one derrick and a plain connection
 * per test file (scope "file": a file's tests share them, stopped after its last test). A test takes
 * what it uses from its context: `it("…", async ({ derrick, nats, nc }) => …)`; unused ones never start.
 * Each call of natsTest/derrickTest has servers of its own, so a file's describe blocks can differ.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { startDerrick, type TestDerrick } from "./derrick.ts";
import { startTestNats, type TestNats } from "./nats.ts";
import { startTestRedis, type TestRedis } from "./redis.ts";

export type NatsOptions = Parameters<typeof startTestNats>[0];
type StartOptions = NonNullable<Parameters<typeof startDerrick>[1]>;

export type DerrickTestOptions = Omit<StartOptions, "env"> & {
  /** Settings of the derrick; a function of the file's redis-server starts one for it. */
  env?: Record<string, string> | ((servers: { redis: TestRedis }) => Record<string, string>);
  /** Options of the file's nats-server (max_payload, a small file store). */
  nats?: NatsOptions;
  /** Runs on the file's nats-server before derrick boots (to leave what an older version made). */
  prepare?: (nats: TestNats) => Promise<void>;
};

/**
 * A nats-server (`nats`), a client connection to it (`nc`) with its JetStream manager (`jsm`), a way to
 * open more (`connection()`), a redis-server (`redis`) and a data directory (`dataDir`), each made
 * when a test or another fixture first uses it.
 */
export function natsTest(options: NatsOptions = {}) {
  return (
    test
      // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this pattern; there are none.
      .extend("nats", { scope: "file" }, async ({}, { onCleanup }) => {
        const nats = await startTestNats(options);
        onCleanup(() => nats.cleanup());
        return nats;
      })
      .extend("nc", { scope: "file" }, async ({ nats }, { onCleanup }) => {
        const nc = await connect({ servers: nats.url });
        onCleanup(() => nc.close());
        return nc;
      })
      .extend("jsm", { scope: "file" }, async ({ nc }) => jetstreamManager(nc))
      .extend("connection", { scope: "file" }, async ({ nats }, { onCleanup }) => {
        const opened: NatsConnection[] = [];
        onCleanup(async () => {
          for (const nc of opened) await nc.close().catch(() => undefined);
        });
        /** Opens another client connection (a second process's view), closed after the file's last test. */
        return async (name?: string) => {
          const nc = await connect({ servers: nats.url, ...(name ? { name } : {}) });
          opened.push(nc);
          return nc;
        };
      })
      // biome-ignore lint/correctness/noEmptyPattern: as above.
      .extend("redis", { scope: "file" }, async ({}, { onCleanup }) => {
        const redis = await startTestRedis();
        onCleanup(() => redis.cleanup());
        return redis;
      })
      /** A data directory the tests' own derricks share across restarts; removed after the file. */
      // biome-ignore lint/correctness/noEmptyPattern: as above.
      .extend("dataDir", { scope: "file" }, async ({}, { onCleanup }) => {
        const dir = mkdtempSync(join(tmpdir(), "derrick-test-data-"));
        onCleanup(() => rmSync(dir, { recursive: true, force: true }));
        return dir;
      })
  );
}

/**
 * natsTest plus `derrick`: the edge and `options.actors` booted on the file's nats-server with the
 * test clients seeded. It boots in a beforeAll of the calling scope, so the hook timeout (not the
 * first test's) bounds the boot and a failed boot fails there.
 */
export function derrickTest(options: DerrickTestOptions = {}) {
  const { env, nats: natsOptions, prepare, ...rest } = options;
  const boot = async (nats: TestNats, settings: Record<string, string> | undefined, onCleanup: (fn: () => Promise<void>) => void) => {
    await prepare?.(nats);
    const derrick = await startDerrick(nats, { ...rest, ...(settings ? { env: settings } : {}) });
    onCleanup(() => derrick.cleanup());
    return derrick;
  };
  const base = natsTest(natsOptions);
  const extended =
    typeof env === "function"
      ? base.extend(
          "derrick",
          { scope: "file" },
          async ({ nats, redis }, { onCleanup }): Promise<TestDerrick> => boot(nats, env({ redis }), onCleanup),
        )
      : base.extend("derrick", { scope: "file" }, async ({ nats }, { onCleanup }): Promise<TestDerrick> => boot(nats, env, onCleanup));
  extended.beforeAll(async ({ derrick }) => void derrick);
  return extended;
}
