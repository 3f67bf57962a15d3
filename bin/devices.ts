/**
 * `derrick devices add|list|remove|config`: device apps of the embedded nats-server. Each gets its own
 * NATS account and user, importing only its twin and its subjects from derrick's account; the running
 * derrick restarts its server with them at once. `config` prints the accounts block for an external server.
 */
import { parseArgs } from "node:util";
import { join, resolve } from "node:path";
import type { Config } from "../config/index.ts";
import { addDeviceUser, accountsBlock, ensureNatsUsers, readNatsUsers, removeDeviceUser } from "../platform/nats-users.ts";
import { requestEmbeddedRestart, waitForRestart, writeAuthorization } from "../platform/nats-server.ts";
import { deviceInboxPrefix, twinBucket, type TwinAddress } from "../subjects/twins.ts";
import { isToken } from "../subjects/tokens.ts";

const USAGE = `usage:
  derrick devices add <organization> <environment> <twinId> --name <AppName> [--subscribe s1,s2] [--publish p1,p2] [--json]
  derrick devices list [--json]
  derrick devices remove <AppName>
  derrick devices config      (the nats-server accounts block for these devices, e.g. for an external server)`;

const list = (value: string | undefined) =>
  (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * Rewrites the server's accounts and, when derrick runs, has it restart its embedded server with
 * them (nats-server 2.9 does not wire a new account's imports on a reload); true once restarted.
 */
async function applyUsers(cfg: Config): Promise<boolean> {
  const dir = resolve(join(cfg.dataDir, "nats"));
  writeAuthorization(dir, accountsBlock(ensureNatsUsers(cfg.dataDir)));
  const requested = requestEmbeddedRestart(dir);
  return requested !== undefined && (await waitForRestart(dir, requested.pid));
}

/** The restarted server's JetStream may take a few seconds to answer: tries for up to 15 s. */
async function createBucketSoon(create: () => Promise<void>): Promise<boolean> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await create();
      return true;
    } catch (error) {
      if (Date.now() > deadline) {
        console.error(
          `derrick: the twin bucket was not created now (${(error as Error).message}); derrick creates it at its next start or on the twin's first write`,
        );
        return false;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** `createBucket` makes the twin's bucket over the running server (devices may not create it). */
export async function devicesCommand(cfg: Config, args: string[], createBucket: (twin: TwinAddress) => Promise<void>): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { name: { type: "string" }, subscribe: { type: "string" }, publish: { type: "string" }, json: { type: "boolean" } },
  });
  const [action, ...rest] = positionals;
  if (action === "config") {
    console.log(accountsBlock(ensureNatsUsers(cfg.dataDir)));
    return 0;
  }
  if (cfg.natsUrl) {
    console.error(
      "derrick: device users are managed here only for the embedded nats-server; with NATS_URL, configure your server's accounts (docs/security.md; `derrick devices config` prints them)",
    );
    return 2;
  }
  if (action === "add" && rest.length === 3 && values.name) {
    const [organization, environment, twinId] = rest as [string, string, string];
    for (const [what, value] of [
      ["organization", organization],
      ["environment", environment],
      ["twinId", twinId],
      ["--name", values.name],
    ] as const) {
      if (!isToken(value)) {
        console.error(`derrick: ${what} "${value}" must match [A-Za-z0-9_-]{1,128}`);
        return 2;
      }
    }
    const twin = { organization, environment, twinId };
    const password = await addDeviceUser(cfg.dataDir, {
      name: values.name,
      twin,
      subscribe: list(values.subscribe),
      publish: list(values.publish),
    });
    const reloaded = await applyUsers(cfg);
    // Not running: the bucket is made at the next start.
    const bucketCreated = reloaded ? await createBucketSoon(() => createBucket(twin)) : false;
    const credentials = {
      user: values.name,
      password,
      inboxPrefix: deviceInboxPrefix(values.name),
      bucket: twinBucket(twin),
      reloaded,
      bucketCreated,
    };
    if (values.json) console.log(JSON.stringify(credentials));
    else {
      console.log(
        `user:         ${credentials.user}\npassword:     ${credentials.password}\ninbox prefix: ${credentials.inboxPrefix}\ntwin bucket:  ${credentials.bucket}`,
      );
      console.log(
        reloaded
          ? "(the running derrick has restarted its nats-server with the new device; the password is shown only now)"
          : "(takes effect when derrick starts; the password is shown only now)",
      );
    }
    return 0;
  }
  if (action === "list") {
    const devices = Object.values(readNatsUsers(cfg.dataDir)?.devices ?? {}).map(({ password_hash: _hidden, ...device }) => device);
    if (values.json) console.log(JSON.stringify({ devices }));
    else for (const d of devices) console.log(`${d.user}\t${d.twin.organization}/${d.twin.environment}/${d.twin.twinId}\t${d.created_at}`);
    return 0;
  }
  if (action === "remove" && rest.length === 1) {
    if (!removeDeviceUser(cfg.dataDir, rest[0]!)) {
      console.error(`derrick: no device user ${rest[0]}`);
      return 1;
    }
    await applyUsers(cfg);
    return 0;
  }
  console.error(USAGE);
  return 2;
}
