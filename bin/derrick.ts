#!/usr/bin/env bun
/** derrick's command line: `derrick help` prints the commands (USAGE below). */
import "../platform/production-env.ts";
import { storagePolicy } from "../actors/runtime/storage.ts";
import { parseArgs } from "node:util";
import { join, resolve } from "node:path";
import {
  ACTOR_NAMES,
  ConfigError,
  loadConfig,
  maskedConfig,
  parseDuration,
  RECOMMENDED_RUNTIME_ENV,
  unsetRuntimeVariables,
  withoutCredentials,
  type ActorName,
  type Config,
} from "../config/index.ts";
import { createLogger, type Logger } from "../platform/logger.ts";
import { runningServerUrl, startNatsServer, type NatsServer } from "../platform/nats-server.ts";
import { connectNats, type NatsAuth } from "../platform/nats.ts";
import { accountsBlock, ensureNatsUsers, migrateStoreToDerrickAccount, readNatsUsers } from "../platform/nats-users.ts";
import { devicesCommand } from "./devices.ts";
import { demoClient, demoWelcome, readDemoClient } from "./demo-client.ts";
import { DerrickError } from "../subjects/index.ts";
import { Bus } from "../platform/transport/index.ts";
import { identityAppsCreate, identityAppsDelete, identityAppsList, identityKeysList, identityKeysRevoke } from "../subjects/identity.ts";
import { systemStatus } from "../subjects/system.ts";
import { statusTable } from "./status-table.ts";
import { loadSigningKey, mintToken } from "../actors/identity/index.ts";
import { boot, listenForStop, type StopRequest } from "./boot.ts";
import { runMigrateCli } from "../sdk/migrate.ts";
import { ensureTwinBucket } from "../actors/twins/store.ts";
import type { NatsConnection } from "@nats-io/nats-core";
import { DEMO_PATHS, seedDemo } from "../actors/reporting/index.ts";

const USAGE = `usage: derrick <command>
  start                          edge + actors (ACTORS), with an embedded nats-server when NATS_URL is unset
  edge                           the HTTP edge alone (needs NATS_URL)
  actor [names…]                 actors alone (default: ACTORS; needs NATS_URL)
  apps create [--id ID] [--groups a,b] [--json] | list [--json] | delete <client_id>
  keys list [--json] | revoke <kid>
  devices add <organization> <environment> <twinId> --name <AppName> [--subscribe s1,s2] [--publish p1,p2] [--json]
  devices list [--json] | remove <AppName>
  token --user NAME [--client ID] [--groups a,b] [--ttl 1h]
  sdk migrate --config old.json --routes routes.json|routes.txt [--out new.json] [--prefix slbapps] [--nats nats://host:4222]
  seed [--partition P]           load the reporting demo data set into a running derrick
  status [--json] [--watch [S]]  the fleet: actor processes and their load, streams, consumers, replica lag, dead letters
  demo [--env]                   the demo client of this data dir (--env: as shell exports)
  config                         print the effective configuration, secrets masked
  help                           this text
actors: ${ACTOR_NAMES.join(", ")}
configuration: environment variables, see README.md`;

/** A command line derrick cannot act on: printed with the command's usage, exit 2 (like a bad configuration). */
class UsageError extends Error {
  override name = "UsageError";
}

/** parseArgs's own refusals (unknown option, missing value, stray positional) are usage errors too. */
function isUsageError(error: unknown): boolean {
  return error instanceof UsageError || String((error as { code?: unknown })?.code ?? "").startsWith("ERR_PARSE_ARGS_");
}

/** Commands that take no arguments refuse any, rather than starting the whole system on a typo (`start --nats-url …`). */
function noArguments(command: string, rest: string[]): void {
  if (rest.length)
    throw new UsageError(
      `\`derrick ${command}\` takes no arguments (got ${rest.map((a) => JSON.stringify(a)).join(" ")}); it is configured by environment variables, see README.md`,
    );
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // Help and offline commands need no configuration: `derrick help` works while the environment is wrong.
  switch (command) {
    case "help":
    case "--help":
    case "-h":
      console.log(USAGE);
      return 0;
    case undefined:
      console.error(USAGE);
      return 0;
    case "sdk":
      // `derrick sdk migrate …`: offline file conversion, no NATS needed.
      if (rest[0] === "migrate") return runMigrateCli(rest.slice(1));
      console.error("usage: derrick sdk migrate --config old.json --routes routes.json|routes.txt [--out new.json]");
      return 2;
  }
  if (!COMMANDS.has(command)) {
    console.error(USAGE);
    return 2;
  }
  let cfg: Config;
  try {
    cfg = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`derrick: configuration error: ${error.message}`);
      return 2;
    }
    throw error;
  }
  const log = createLogger(cfg.logLevel);
  switch (command) {
    case "start": {
      noArguments(command, rest);
      // A first try needs a client: one that can do everything, only where nobody else can reach it.
      const demo = cfg.actors.includes("identity") ? demoClient(cfg) : undefined;
      return serve(demo ? Object.freeze({ ...cfg, demoClient: demo }) : cfg, log, {
        edge: true,
        actors: cfg.actors,
        embedded: !cfg.natsUrl,
      });
    }
    case "edge":
      noArguments(command, rest);
      return serve(cfg, log, { edge: true, actors: [], embedded: false });
    case "actor":
    case "actors": {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true, options: {} });
      const names = positionals.length ? positionals : cfg.actors;
      const unknown = names.filter((n) => !(ACTOR_NAMES as readonly string[]).includes(n));
      if (unknown.length) {
        console.error(`derrick: unknown actor(s) ${unknown.join(", ")}; known: ${ACTOR_NAMES.join(", ")}`);
        return 2;
      }
      return serve(cfg, log, { edge: false, actors: names as ActorName[], embedded: false });
    }
    case "apps":
      return apps(cfg, rest);
    case "keys":
      return keys(cfg, rest);
    case "devices":
      return devicesCommand(cfg, rest, (twin) =>
        withBus(cfg, (bus) => ensureTwinBucket(bus.nc, twin, storagePolicy(cfg), cfg.twins.maxBytes)),
      );
    case "token":
      return token(cfg, rest);
    case "seed":
      return seed(cfg, rest);
    case "status":
      return status(cfg, rest);
    case "demo":
      return demo(cfg, rest);
    case "config":
      noArguments(command, rest);
      console.log(JSON.stringify(maskedConfig(cfg), null, 2));
      return 0;
    default:
      console.error(USAGE);
      return 2;
  }
}

/** The commands that read the configuration (help and `sdk` are answered before it is read). */
const COMMANDS = new Set(["demo", "start", "edge", "actor", "actors", "apps", "keys", "devices", "token", "seed", "status", "config"]);

async function serve(cfg: Config, log: Logger, plan: { edge: boolean; actors: readonly ActorName[]; embedded: boolean }): Promise<number> {
  // From here on a signal or an uncaught error starts the graceful stop (once the process is up).
  // With the embedded server, SIGHUP restarts it with the device accounts (`derrick devices`, onHangup below);
  // otherwise it drains and stops as SIGTERM does, since its default would end the process without draining.
  const stop = listenForStop(log, { stopOnHangup: !(plan.embedded && !cfg.natsUrl) });
  // `derrick devices add|remove` sends SIGHUP (see onHangup below). Caught from here on, so one that
  // comes during start-up waits for it and one during shutdown is ignored; never the default exit.
  let hangup: () => void = () => void (hangupBeforeUp = true);
  let hangupBeforeUp = false;
  const onSighup = () => hangup();
  if (plan.embedded && !cfg.natsUrl) process.on("SIGHUP", onSighup);
  let server: NatsServer | undefined;
  let embedded: { start(): Promise<NatsServer> } | undefined;
  let natsUrl = cfg.natsUrl;
  if (!natsUrl) {
    if (!plan.embedded) {
      console.error(
        "derrick: NATS_URL is not set; `derrick edge` and `derrick actor` join an existing NATS server (use `derrick start` for everything in one process)",
      );
      return 2;
    }
    // Anonymous connections are refused: derrick's processes use the internal user, devices their own.
    const natsDir = resolve(join(cfg.dataDir, "nats"));
    if (migrateStoreToDerrickAccount(natsDir))
      log.info({ store: natsDir }, "moved the JetStream store of the single-account layout into account DERRICK");
    // The accounts are read from the users file at each (re)start: `derrick devices` changes them.
    const startEmbedded = () =>
      startNatsServer({
        dir: natsDir,
        port: cfg.natsPort,
        authorization: accountsBlock(ensureNatsUsers(cfg.dataDir)),
        ownProcessGroup: true,
      }).catch((error: Error) => {
        if (!/address already in use/.test(error.message)) throw error;
        throw new Error(
          `the embedded nats-server cannot listen on 127.0.0.1:${cfg.natsPort}: another process holds that port. Set DERRICK_NATS_PORT to a free port, or NATS_URL to join the server there (${error.message})`,
        );
      });
    embedded = { start: startEmbedded };
    server = await startEmbedded();
    natsUrl = server.url;
    log.info({ url: natsUrl, store: join(cfg.dataDir, "nats") }, "embedded nats-server started");
    if (cfg.natsUser)
      log.warn(
        "NATS_USER is set but NATS_URL is not: the embedded server is used with its internal user, NATS_USER and NATS_PASSWORD are ignored",
      );
  }
  let running;
  try {
    running = await bootedUnlessStopped(
      boot({ cfg, natsUrl, natsAuth: natsAuthFor(cfg), log, edge: plan.edge, actors: plan.actors }),
      stop.requested,
    );
  } catch (error) {
    await server?.stop();
    throw error;
  }
  if (!running) {
    // Stopped while start-up still waited (an actor waiting for something unreachable): nothing was
    // serving yet that could be drained, so stop without it rather than ignore the signal.
    await server?.stop();
    log.warn({ waitedMs: STARTUP_STOP_GRACE_MS }, "stopped during start-up, which had not finished");
    return (await stop.requested).exitCode;
  }
  if (server) await ensureDeviceBuckets(cfg, running.nc, log);
  // Before "derrick is up": whoever waits for that line has this one too.
  const unsetRuntime = unsetRuntimeVariables(process.env);
  if (unsetRuntime.length)
    log.warn(
      { unset: unsetRuntime, recommended: RECOMMENDED_RUNTIME_ENV },
      `allocator variables unset or empty: ${unsetRuntime.join(", ")}; page faults slow large replies and search builds (docs/operations.md#the-memory-allocator; npm start sets them)`,
    );
  log.info({ actors: plan.actors, edge: running.edge?.url }, "derrick is up");
  if (cfg.demoClient && running.edge) process.stdout.write(demoWelcome(cfg.demoClient, running.edge.url, cfg.partitions[0]!));
  // The embedded server gone on its own (killed, OOM): nothing would start it again and every request
  // would answer 503 for ever, so stop as after an uncaught error and let a supervisor restart both.
  let stopping = false;
  let restarting: Promise<void> | undefined;
  let lost!: (request: StopRequest) => void;
  const serverLost = new Promise<StopRequest>((resolve) => (lost = resolve));
  const watchServer = (watched: NatsServer) => {
    // The server has a process group of its own (a Ctrl-C reaches only derrick, which drains first):
    // whatever way this process ends, the server goes with it.
    const child = watched.process;
    const killOnExit = () => void child.kill("SIGTERM");
    process.once("exit", killOnExit);
    child.once("exit", (code, signal) => {
      process.off("exit", killOnExit);
      if (stopping || restarting || server !== watched) return;
      log.fatal({ code, signal }, "the embedded nats-server exited: stopping");
      lost({ reason: "embedded nats-server exited", exitCode: 1 });
    });
  };
  if (server) watchServer(server);
  // `derrick devices add|remove` rewrote the accounts: nats-server 2.9 wires a new account's imports
  // only at start, so the server restarts (clients reconnect; JetStream keeps everything).
  let hangupWhileRestarting = false;
  const onHangup = () => {
    if (!embedded || stopping) return;
    // A change made during a restart may have missed it: one more restart after it.
    if (restarting) return void (hangupWhileRestarting = true);
    restarting = (async () => {
      log.info("restarting the embedded nats-server with the rewritten accounts");
      await server!.stop();
      server = await embedded!.start();
      watchServer(server);
      log.info({ url: server.url }, "embedded nats-server restarted");
    })()
      .then(() => void ensureDeviceBuckets(cfg, running.nc, log))
      .catch(
        (error: unknown) => (
          log.fatal({ err: error }, "the embedded nats-server did not restart: stopping"),
          lost({ reason: "embedded nats-server exited", exitCode: 1 })
        ),
      )
      .finally(() => {
        restarting = undefined;
        if (hangupWhileRestarting) {
          hangupWhileRestarting = false;
          onHangup();
        }
      });
  };
  hangup = onHangup;
  if (hangupBeforeUp) onHangup();
  const { reason, exitCode } = await Promise.race([stop.requested, serverLost]);
  stopping = true;
  await restarting;
  await running.stop();
  await server?.stop();
  log.info({ reason, exitCode }, "stopped");
  return exitCode;
}

/** How long a stop requested during start-up waits for it to finish (then to drain as usual) before giving up on it. */
const STARTUP_STOP_GRACE_MS = 5_000;

/** The booted system; or undefined when a stop was requested and start-up did not finish within the grace. */
async function bootedUnlessStopped<T>(booting: Promise<T>, requested: Promise<StopRequest>): Promise<T | undefined> {
  const givenUp = requested.then(() => new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), STARTUP_STOP_GRACE_MS)));
  return Promise.race([booting, givenUp]);
}

/** The twin bucket of every registered device (devices may open their bucket, not create it). */
async function ensureDeviceBuckets(cfg: Config, nc: NatsConnection, log: Logger): Promise<void> {
  for (const device of Object.values(readNatsUsers(cfg.dataDir)?.devices ?? {})) {
    await ensureTwinBucket(nc, device.twin, storagePolicy(cfg), cfg.twins.maxBytes).catch((error: Error) =>
      log.warn({ err: error, device: device.user }, "cannot create a device's twin bucket; it is created on the twin's first write"),
    );
  }
}

/**
 * NATS_USER/NATS_PASSWORD for NATS_URL, else the embedded server's internal user from the data dir:
 * the embedded server knows no other (its users are derrick's own and device users), so NATS_USER
 * without NATS_URL is not used for it.
 */
function natsAuthFor(cfg: Config): NatsAuth | undefined {
  if (cfg.natsUser && cfg.natsUrl) return { user: cfg.natsUser, pass: cfg.natsPassword ?? "" };
  const internal = readNatsUsers(cfg.dataDir)?.internal;
  return internal ? { user: internal.user, pass: internal.password } : undefined;
}

async function withBus<T>(cfg: Config, work: (bus: Bus) => Promise<T>): Promise<T> {
  // The embedded server that `derrick start` runs on this data dir, whatever port it was given.
  const url = cfg.natsUrl ?? runningServerUrl(resolve(join(cfg.dataDir, "nats"))) ?? `nats://127.0.0.1:${cfg.natsPort}`;
  const nc = await connectNats(url, "derrick-cli", undefined, natsAuthFor(cfg)).catch((error: Error) => {
    throw new Error(
      `cannot reach NATS at ${url.split(",").map(withoutCredentials).join(",")} (${error.message}); is derrick running, or NATS_URL set?`,
    );
  });
  try {
    return await work(new Bus(nc, { timeoutMs: cfg.requestTimeoutMs }));
  } finally {
    await nc.close();
  }
}

async function apps(cfg: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { id: { type: "string" }, groups: { type: "string" }, json: { type: "boolean" } },
  });
  const [action, target] = positionals;
  const usage = "usage: derrick apps create [--id ID] [--groups a,b] [--json] | list [--json] | delete <client_id>";
  // Checked before connecting: a wrong command line is told so even when NATS is down.
  if (
    !((action === "create" || action === "list") && positionals.length === 1) &&
    !(action === "delete" && target && positionals.length === 2)
  ) {
    console.error(usage);
    return 2;
  }
  return withBus(cfg, async (bus) => {
    if (action === "create") {
      const groups = values.groups
        ?.split(",")
        .map((g) => g.trim())
        .filter(Boolean);
      const reply = await bus.request(identityAppsCreate, {
        ...(values.id ? { client_id: values.id } : {}),
        ...(groups ? { groups } : {}),
      });
      if (values.json) console.log(JSON.stringify(reply.body));
      else
        console.log(
          `client_id:     ${reply.body.client_id}\nclient_secret: ${reply.body.client_secret}\nappkey:        ${reply.body.appkey}\ngroups:        ${reply.body.groups.join(",")}\n(the secret and appkey are shown only now)`,
        );
      return 0;
    }
    if (action === "list") {
      const reply = await bus.request(identityAppsList, undefined);
      if (values.json) console.log(JSON.stringify(reply.body));
      else for (const app of reply.body.apps) console.log(`${app.client_id}\t${app.groups.join(",")}\t${app.created_at}`);
      return 0;
    }
    await bus.request(identityAppsDelete, { client_id: target! }); // checked above;
    return 0;
  });
}

/** The embedded issuer's signing keys: list them, or revoke one (its issuer switches to a new key at once). */
async function keys(cfg: Config, args: string[]): Promise<number> {
  // A key id is a JWK thumbprint (base64url): one in 32 begins with "-", which parseArgs would take for
  // an option ("Unknown option '-8…'"). So revoke's argument is taken as written (after an optional "--").
  const revoking = args[0] === "revoke";
  const { values, positionals } = revoking
    ? { values: { json: false }, positionals: ["revoke", ...args.slice(args[1] === "--" ? 2 : 1)] }
    : parseArgs({ args, allowPositionals: true, options: { json: { type: "boolean" } } });
  const [action, kid] = positionals;
  if (action !== "list" && !(action === "revoke" && kid)) {
    console.error("usage: derrick keys list [--json] | revoke <kid>");
    return 2;
  }
  return withBus(cfg, async (bus) => {
    if (action === "revoke") {
      await bus.request(identityKeysRevoke, { kid: kid! }); // checked above;
      console.log(`revoked ${kid}: withdrawn from the JWKS; edges refuse its tokens within DERRICK_AUTH_JWKS_MAX_AGE`);
      return 0;
    }
    const reply = await bus.request(identityKeysList, undefined);
    if (values.json) console.log(JSON.stringify(reply.body));
    else for (const key of reply.body.keys) console.log(`${key.kid}\t${key.seen_at ?? "-"}`);
    return 0;
  });
}

async function token(cfg: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { user: { type: "string" }, client: { type: "string" }, groups: { type: "string" }, ttl: { type: "string" } },
  });
  if (!values.user) {
    console.error("usage: derrick token --user NAME [--client ID] [--groups a,b] [--ttl 1h]");
    return 2;
  }
  if (cfg.auth.issuer) {
    console.error(`derrick: tokens come from ${cfg.auth.issuer}; \`derrick token\` mints only with the embedded issuer`);
    return 2;
  }
  let ttl = cfg.auth.tokenTtlSeconds;
  if (values.ttl) {
    try {
      ttl = Math.round(parseDuration(values.ttl) / 1000);
    } catch (error) {
      throw new UsageError(`--ttl: ${(error as Error).message}`);
    }
    // The bounds of DERRICK_TOKEN_TTL's upper end; below a second the token would be expired when printed.
    if (ttl < 1 || ttl > 86_400) throw new UsageError(`--ttl: "${values.ttl}" must be between 1s and 1d`);
  }
  // Only the key an identity actor uses (and publishes): a key made here would sign tokens every edge refuses.
  const key = await loadSigningKey(cfg.dataDir);
  if (!key) {
    console.error(
      `derrick: no signing key in ${join(cfg.dataDir, "issuer")}: \`derrick token\` signs with the embedded issuer's key, kept in the DERRICK_DATA_DIR of a process running the identity actor (start derrick first, or point DERRICK_DATA_DIR there)`,
    );
    return 2;
  }
  const clientId = values.client ?? cfg.clients?.[0]?.client_id ?? values.user;
  const groups =
    values.groups
      ?.split(",")
      .map((g) => g.trim())
      .filter(Boolean) ?? [];
  console.log(await mintToken(key, { sub: values.user, client_id: clientId, groups }, cfg.auth.audience, ttl));
  return 0;
}

/** `derrick seed [--partition P]`: the reporting demo data set, loaded over NATS into a running derrick. */
async function seed(cfg: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { partition: { type: "string" } } });
  const partition = values.partition ?? cfg.partitions[0]!;
  if (!cfg.partitions.includes(partition)) {
    console.error(`derrick: partition ${partition} is not served (DERRICK_PARTITIONS: ${cfg.partitions.join(", ")})`);
    return 2;
  }
  return withBus(cfg, async (bus) => {
    for (const { item, status } of await seedDemo(bus, partition))
      console.log(`${status} PUT /assessments/v1/${item.collection}/${item.id}`);
    console.log(`\nreporting demo loaded into partition ${partition}; try:\n${DEMO_PATHS.map((p) => `  ${p}`).join("\n")}`);
    return 0;
  });
}

/** `derrick status [--json] [--watch [seconds]]`: the fleet as the system actor gathers it (bin/status-table.ts prints it). */
async function status(cfg: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { json: { type: "boolean" }, watch: { type: "string" } } });
  const every = values.watch === undefined ? 0 : Number(values.watch || 2);
  if (!(every >= 0) || (values.watch !== undefined && every < 0.5))
    throw new UsageError(`--watch takes seconds between refreshes, at least 0.5 (got ${JSON.stringify(values.watch)})`);
  return withBus(cfg, async (bus) => {
    for (;;) {
      const fleet = (await bus.request(systemStatus, undefined)).body;
      if (values.json) console.log(JSON.stringify(fleet));
      else console.log(`${every ? "\x1b[2J\x1b[H" : ""}${statusTable(fleet)}`);
      if (!every) return 0;
      await new Promise((resolve) => setTimeout(resolve, every * 1000));
    }
  });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (isUsageError(error)) {
      console.error(`derrick: ${(error as Error).message}\nderrick help lists the commands and their options`);
      process.exit(2);
    }
    if (error instanceof DerrickError) console.error(`derrick: ${error.status} ${error.detail}`);
    else console.error(`derrick: ${(error as Error).message ?? error}`);
    process.exit(1);
  },
);

/** `derrick demo [--env]`: the demo client a first start created in this data dir (bin/demo-client.ts). */
function demo(cfg: Config, args: string[]): number {
  const { values } = parseArgs({ args, options: { env: { type: "boolean" } } });
  const client = readDemoClient(cfg.dataDir);
  if (!client) {
    console.error(
      `derrick: no demo client in ${cfg.dataDir}: \`derrick start\` makes one when DERRICK_CLIENTS is unset (loopback, derrick's own issuer)`,
    );
    return 1;
  }
  const base = `http://${cfg.http.host.includes(":") ? `[${cfg.http.host}]` : cfg.http.host}:${cfg.http.port}`;
  const nats = cfg.natsUrl ?? runningServerUrl(resolve(join(cfg.dataDir, "nats"))) ?? `nats://127.0.0.1:${cfg.natsPort}`;
  // NATS_ADDRESS is what the device SDK reads for its server.
  const vars = {
    DERRICK: base,
    CLIENT_ID: client.client_id,
    CLIENT_SECRET: client.client_secret,
    APPKEY: client.appkey,
    PARTITION: cfg.partitions[0]!,
    NATS_ADDRESS: nats,
  };
  if (values.env) for (const [name, value] of Object.entries(vars)) console.log(`export ${name}='${value}'`);
  else console.log(JSON.stringify(vars, null, 2));
  return 0;
}
