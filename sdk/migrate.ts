/**
 * `derrick sdk migrate`: a 2.0 config (MQTT bus: Server, Port, plain subscription names) plus its
 * routes file (`<source>/<Out> TO <target>/<In>` lines, `nats:<subject>` endpoints) → one 3.0
 * config (the routes file as routes.json `{"Routes": [...]}` or as text lines). App endpoints become
 * subjects `<prefix>.<app>.<Kind>`: the app subscribes to its own inbox subjects (and to `nats:` sources
 * routed to it) and targets the inboxes of its destinations.
 * Routes it cannot express are reported, never guessed.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { INPUT_KINDS, OUTPUT_KINDS, parseAppConfig, SdkConfigError, type InputKind, type OutputKind } from "./config.ts";

export type MigrateOptions = {
  /** Subject prefix of app inboxes (default `slbapps`). */
  prefix?: string;
  /** The 3.0 NATS server; default `nats://<2.0 Server>:4222` (2.0's Port was the MQTT broker's). */
  natsServer?: string;
};

export type MigrateIssue = { route?: string; reason: string };
export type MigrateResult = { config: Record<string, unknown>; unsupported: MigrateIssue[]; notes: string[] };

type Endpoint = { kind: "app"; app: string; port: string } | { kind: "nats"; subject: string };

const SUBJECT_RE = /^[^\s.*>]+(\.[^\s.*>]+)*$/;
const APP_RE = /^\/([A-Za-z0-9_-]+)\/([A-Za-z]+)$/;

function parseEndpoint(text: string): Endpoint | string {
  if (text.startsWith("nats:")) {
    const subject = text.slice(5);
    return SUBJECT_RE.test(subject)
      ? { kind: "nats", subject }
      : `"${subject}" is not a plain NATS subject (wildcards cannot be a route endpoint in 3.0)`;
  }
  const match = APP_RE.exec(text);
  return match ? { kind: "app", app: match[1]!, port: match[2]! } : `"${text}" is neither /<app>/<kind> nor nats:<subject>`;
}

const asObject = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/**
 * The routes of a 2.0 routes file: `{"Routes": [...]}` (routes.json), a bare JSON array, or the text
 * form, one `<source>/<out> TO <target>/<in>` per line (blank lines and `#` comments skipped).
 */
export function routeList(routesDocument: unknown): unknown[] {
  if (typeof routesDocument === "string") {
    const text = routesDocument.replace(/^\uFEFF/, "");
    const start = text.trimStart()[0];
    if (start === "{" || start === "[") {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        throw new SdkConfigError("Routes", `the routes file is neither JSON nor text lines: ${(error as Error).message}`);
      }
      return routeList(parsed);
    }
    return text
      .split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("#"));
  }
  if (Array.isArray(routesDocument)) return routesDocument;
  const routes = asObject(routesDocument).Routes;
  if (!Array.isArray(routes))
    throw new SdkConfigError(
      "Routes",
      'the routes file must be {"Routes": ["<source> TO <target>", ...]}, a JSON array of routes, or one `<source> TO <target>` per line',
    );
  return routes;
}

export function migrateConfig(oldConfig: unknown, routesDocument: unknown, options: MigrateOptions = {}): MigrateResult {
  const prefix = options.prefix ?? "slbapps";
  const root = asObject(oldConfig);
  const name = root.Name;
  if (typeof name !== "string" || name === "") throw new SdkConfigError("Name", "the 2.0 config has no Name");
  const runtimeKey = root.AEA2 !== undefined ? "AEA2" : "Runtime";
  const runtime = asObject(root[runtimeKey]);
  const oldBus = asObject(runtime.BusClient);
  const notes: string[] = [];
  const unsupported: MigrateIssue[] = [];
  const subscriptions = Object.fromEntries(INPUT_KINDS.map((k) => [k, [] as string[]])) as Record<InputKind, string[]>;
  const targets = Object.fromEntries(OUTPUT_KINDS.map((k) => [k, [] as string[]])) as Record<OutputKind, string[]>;
  const add = (list: string[], subject: string) => void (list.includes(subject) || list.push(subject));
  const inbox = (app: string, kind: string) => `${prefix}.${app}.${kind}`;

  // 2.0 subscribed by logical name; each listed input kind keeps the app's own inbox.
  const oldSubs = Array.isArray(oldBus.Subscriptions) ? oldBus.Subscriptions : [];
  for (const sub of oldSubs) {
    if ((INPUT_KINDS as readonly unknown[]).includes(sub)) add(subscriptions[sub as InputKind], inbox(name, sub as string));
    else unsupported.push({ reason: `Subscriptions entry ${JSON.stringify(sub)} is not DataIn, RequestIn or EventIn` });
  }
  for (const flag of ["UseDataIn", "UseRequests"])
    if (oldBus[flag] !== undefined) notes.push(`${runtimeKey}:BusClient:${flag} is deprecated and was dropped`);

  const routes = routeList(routesDocument);
  for (const line of routes) {
    if (typeof line !== "string") {
      unsupported.push({ route: JSON.stringify(line), reason: "a route must be a string" });
      continue;
    }
    const parts = line.trim().split(/\s+TO\s+/);
    if (parts.length !== 2) {
      unsupported.push({ route: line, reason: "expected `<source> TO <target>`" });
      continue;
    }
    const source = parseEndpoint(parts[0]!);
    const target = parseEndpoint(parts[1]!);
    if (typeof source === "string" || typeof target === "string") {
      unsupported.push({ route: line, reason: typeof source === "string" ? source : (target as string) });
      continue;
    }
    if (source.kind === "nats" && target.kind === "nats") {
      unsupported.push({
        route: line,
        reason: "NATS to NATS bridging needs a broker; 3.0 has none (publish to the target subject directly)",
      });
      continue;
    }
    if (source.kind === "app" && !(OUTPUT_KINDS as readonly string[]).includes(source.port)) {
      unsupported.push({ route: line, reason: `the source kind ${source.port} is not an output kind (${OUTPUT_KINDS.join(", ")})` });
      continue;
    }
    if (target.kind === "app" && !(INPUT_KINDS as readonly string[]).includes(target.port)) {
      unsupported.push({ route: line, reason: `the target kind ${target.port} is not an input kind (${INPUT_KINDS.join(", ")})` });
      continue;
    }
    const fromMe = source.kind === "app" && source.app === name;
    const toMe = target.kind === "app" && target.app === name;
    if (!fromMe && !toMe) {
      notes.push(`route "${line}" does not involve ${name}; migrate it with that app's config`);
      continue;
    }
    if (fromMe && toMe) {
      notes.push(`route "${line}" loops back into ${name}; it targets its own inbox`);
    }
    if (toMe && target.kind === "app") {
      // The app listens on its inbox; a nats: source is a subject someone publishes to directly.
      add(subscriptions[target.port as InputKind], source.kind === "nats" ? source.subject : inbox(name, target.port));
    }
    if (fromMe && source.kind === "app") {
      add(targets[source.port as OutputKind], target.kind === "nats" ? target.subject : inbox(target.app, target.port));
    }
  }

  const oldServer = typeof oldBus.Server === "string" && oldBus.Server ? oldBus.Server : "127.0.0.1";
  const server = options.natsServer ?? `nats://${oldServer.replace(/^[a-z]+:\/\//, "").split(":")[0]}:4222`;
  if (!options.natsServer)
    notes.push(
      `BusClient:Server set to ${server}: 2.0's Server/Port (${oldServer}:${String(oldBus.Port ?? 707)}) named the MQTT broker; pass --nats to choose`,
    );
  const { Server: _s, Port: _p, Username, Password, Subscriptions: _sub, UseDataIn: _u, UseRequests: _r, ...keptBus } = oldBus;
  const bus: Record<string, unknown> = {
    ...keptBus,
    Server: server,
    ...(Username !== undefined ? { NatsUser: Username } : {}),
    ...(Password !== undefined ? { NatsPassword: Password } : {}),
    Subscriptions: INPUT_KINDS.filter((k) => subscriptions[k].length).map((k) => ({ [k]: subscriptions[k] })),
    Targets: OUTPUT_KINDS.filter((k) => targets[k].length).map((k) => ({ [k]: targets[k] })),
  };
  const config = { ...root, [runtimeKey]: { ...runtime, BusClient: bus } };
  try {
    parseAppConfig(config);
  } catch (error) {
    notes.push(`the 3.0 config still needs attention: ${(error as Error).message}`);
  }
  return { config, unsupported, notes };
}

function readJson(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new SdkConfigError(what, `cannot read ${path}: ${(error as Error).message}`);
  }
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw new SdkConfigError(what, `cannot read ${path}: ${(error as Error).message}`);
  }
}

/** `derrick sdk migrate --config old.json --routes routes.json [--out new.json] [--prefix p] [--nats url]`. */
export function runMigrateCli(
  args: string[],
  out: (line: string) => void = console.log,
  err: (line: string) => void = console.error,
): number {
  const usage =
    "usage: derrick sdk migrate --config old.json --routes routes.json|routes.txt [--out new.json] [--prefix slbapps] [--nats nats://host:4222]";
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        config: { type: "string" },
        routes: { type: "string" },
        out: { type: "string" },
        prefix: { type: "string" },
        nats: { type: "string" },
      },
    }));
  } catch (error) {
    err(`${(error as Error).message}\n${usage}`);
    return 2;
  }
  if (!values.config || !values.routes) {
    err(usage);
    return 2;
  }
  try {
    const result = migrateConfig(readJson(values.config, "--config"), readText(values.routes, "--routes"), {
      ...(values.prefix ? { prefix: values.prefix } : {}),
      ...(values.nats ? { natsServer: values.nats } : {}),
    });
    const text = `${JSON.stringify(result.config, null, 2)}\n`;
    if (values.out) writeFileSync(values.out, text);
    else out(text.trimEnd());
    for (const note of result.notes) err(`note: ${note}`);
    for (const issue of result.unsupported) err(`cannot express${issue.route ? ` "${issue.route}"` : ""}: ${issue.reason}`);
    return 0;
  } catch (error) {
    err(`derrick sdk migrate: ${(error as Error).message}`);
    return 2;
  }
}
