/**
 * A multi-process derrick on one machine for the chaos suite and the soak: a nats-server child (store
 * kept across restarts, same port) or an external server (a cluster), the edge and actor processes as
 * `bin/derrick.ts` children (two running every actor, or any layout, e.g. one kind per process), a
 * webhook receiver whose behaviour can be switched (ok, 500, hang, reset, slow), and a bounded
 * loopback load generator whose accepted writes are remembered so they can be checked afterwards.
 * Content tasks are requested on one project created at start (the load's client is a member).
 */
import { percentile } from "../../bench/lib.ts";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { ACTOR_NAMES, RECOMMENDED_RUNTIME_ENV, type ActorName } from "../../config/index.ts";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { serviceName } from "../../subjects/index.ts";
import { eventually, freePort, TEST_CLIENTS, testClient } from "../harness/index.ts";

/** The harness's clients, and a searcher: search answers only callers in a data group (here users.data.root). */
const CLIENTS = { ...TEST_CLIENTS, searcher: testClient("searcher", ["users.datalake.viewers", "users.data.root"]) };
export type ChaosClient = keyof typeof CLIENTS;

const ROOT = resolve(import.meta.dirname, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");

export type ReceiverMode = "ok" | "500" | "hang" | "reset" | "slow";

/** A webhook receiver on node:http (so it can reset sockets); counts deliveries per webhook-id. */
export type ChaosReceiver = { url: string; mode: ReceiverMode; deliveries: Map<string, number>; requests: number; stop(): Promise<void> };

export async function startChaosReceiver(): Promise<ChaosReceiver> {
  const hung = new Set<import("node:http").ServerResponse>();
  const receiver: ChaosReceiver = { url: "", mode: "ok", deliveries: new Map(), requests: 0, stop: async () => {} };
  const server: Server = createServer((req, res) => {
    receiver.requests++;
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const id = String(req.headers["webhook-id"] ?? "");
      switch (receiver.mode) {
        case "500":
          res.writeHead(500).end("boom");
          return;
        case "hang":
          hung.add(res); // never answered; the deliverer's timeout must give up
          return;
        case "reset":
          req.socket.destroy();
          return;
        case "slow":
          // Slow but within the delivery timeout: accepted, so it counts.
          setTimeout(() => {
            receiver.deliveries.set(id, (receiver.deliveries.get(id) ?? 0) + 1);
            res.writeHead(204).end();
          }, 300);
          return;
        default:
          receiver.deliveries.set(id, (receiver.deliveries.get(id) ?? 0) + 1);
          res.writeHead(204).end();
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address() as { port: number };
  receiver.url = `http://127.0.0.1:${address.port}/hook`;
  receiver.stop = async () => {
    for (const res of hung) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((done) => server.close(() => done()));
  };
  return receiver;
}

/** Times a process whose start-up failed is started again. */
const MAX_BOOT_RESTARTS = 3;

/** Characters of each process's log kept. */
const LOG_TAIL = 16_000;

type Proc = { name: string; args: string[]; env: Record<string, string>; actors: readonly ActorName[]; child?: ChildProcess; log: string };

/** An actor process of a deployment: its name and the actors it runs (all when absent). */
export type ActorProcess = { name: string; actors?: readonly ActorName[] };

/** `copies` processes of each actor kind, one kind per process, named `<kind>-<n>`. */
export const processPerKind = (copies: number): ActorProcess[] =>
  ACTOR_NAMES.flatMap((kind) => Array.from({ length: copies }, (_, i) => ({ name: `${kind}-${i + 1}`, actors: [kind] })));

/** How a process ended after SIGTERM. */
export type Exit = { code: number | null; signal: string | null; ms: number };

export type Deployment = {
  url: string;
  nats: () => NatsServer;
  receiver: ChaosReceiver;
  subscriptionId: string;
  /** The project content tasks are requested on. */
  contentProject: string;
  /** completedAt of every task seen succeeded: a second completion would change it. */
  taskCompletions: Map<string, string>;
  processes: Proc[];
  /** Processes started again because their start-up failed (`restartFailedStarts`), in order. */
  bootRestarts: string[];
  /** The tail of each process's log (warnings and errors), for a failed test's report. */
  logs(): string;
  token(client: ChaosClient): Promise<string>;
  call(path: string, init?: RequestInit & { as?: ChaosClient; timeoutMs?: number }): Promise<Response>;
  kill(name: string): void;
  start(name: string): Promise<void>;
  /** SIGTERM (the graceful stop) and the wait for the exit; SIGKILL after `timeoutMs`. */
  stopGracefully(name: string, timeoutMs?: number): Promise<Exit>;
  /** Milliseconds until every actor of the process answers `$SRV.PING` from its pid (bounded). */
  waitServing(name: string, timeoutMs?: number): Promise<number>;
  stopNats(): Promise<void>;
  startNats(): Promise<void>;
  /** Milliseconds until /readyz answers 200 (bounded). */
  waitReady(timeoutMs?: number): Promise<number>;
  memory(): Promise<Record<string, number>>;
  stop(): Promise<void>;
};

/**
 * Boots nats-server (unless `natsUrl` names one), the edge and the actor processes: `layout`, else
 * `actorProcesses` processes each running every actor.
 */
export async function startDeployment(
  options: {
    actorProcesses?: number;
    layout?: ActorProcess[];
    natsUrl?: string;
    env?: Record<string, string>;
    /** Start a process again when its start-up fails, as a supervisor does (at most MAX_BOOT_RESTARTS times). */
    restartFailedStarts?: boolean;
  } = {},
): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "derrick-chaos-"));
  const natsDir = join(dir, "nats");
  const external = options.natsUrl;
  /** The deployment's own server; none when `natsUrl` names an external one. */
  let nats = external ? undefined : await startNatsServer({ dir: natsDir, port: -1 });
  const natsUrl = external ?? nats!.url;
  const natsPort = nats?.port;
  const ownNats = () => {
    if (!nats) throw new Error("the deployment's NATS is external");
    return nats;
  };
  let nc: NatsConnection | undefined;
  const httpPort = await freePort();
  const receiver = await startChaosReceiver();
  const env: Record<string, string> = {
    // As operators are told to run every process (docs/operations.md#the-memory-allocator).
    ...RECOMMENDED_RUNTIME_ENV,
    NATS_URL: natsUrl,
    DERRICK_HTTP_PORT: String(httpPort),
    DERRICK_DATA_DIR: join(dir, "data"),
    DERRICK_PARTITIONS: "opendes",
    DERRICK_CLIENTS: JSON.stringify(Object.values(CLIENTS)),
    // Warnings too (event-loop stalls, Redis outages, paused subscriptions): printed when a test fails.
    DERRICK_LOG_LEVEL: "warn",
    DERRICK_REQUEST_TIMEOUT: "2s",
    DERRICK_CALLBACK_ALLOW_HTTP: "true",
    DERRICK_CALLBACK_ALLOW_CIDRS: "127.0.0.1/32",
    // Enough attempts to ride out a 10 s outage of NATS or the receiver.
    DERRICK_DELIVERY_SCHEDULE: "0,250ms,500ms,1s,1s,1s,1s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s,2s",
    DERRICK_DELIVERY_TIMEOUT: "1s",
    DERRICK_CONTENT_ACK_WAIT: "2s",
    ...options.env,
  };
  const processes: Proc[] = [{ name: "edge", args: ["bin/derrick.ts", "edge"], env, actors: [], log: "" }];
  const layout: ActorProcess[] =
    options.layout ?? Array.from({ length: options.actorProcesses ?? 2 }, (_, i) => ({ name: `actors-${i + 1}` }));
  for (const [i, proc] of layout.entries()) {
    processes.push({
      name: proc.name,
      args: ["bin/derrick.ts", "actor", ...(proc.actors ?? [])],
      // Each search process keeps its own index file, kept across its restarts.
      env: { ...env, DERRICK_SEARCH_INDEX_FILE: join(dir, `search-${i + 1}.sqlite`) },
      actors: proc.actors ?? ACTOR_NAMES,
      log: "",
    });
  }
  const processNamed = (name: string) => {
    const proc = processes.find((p) => p.name === name);
    if (!proc) throw new Error(`no process ${name} in the deployment`);
    return proc;
  };
  let booting = true;
  const bootRestarts: string[] = [];
  const spawnProc = (proc: Proc) => {
    const child = spawn(BUN, proc.args, { cwd: ROOT, env: { ...process.env, ...proc.env }, stdio: ["ignore", "pipe", "pipe"] });
    const keep = (chunk: Buffer) => (proc.log = (proc.log + chunk.toString()).slice(-LOG_TAIL));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    proc.child = child;
    // As a supervisor would: a process whose start-up failed is started again (bounded).
    child.once("exit", (code) => {
      if (!booting || !options.restartFailedStarts || code === 0 || code === null) return;
      if (bootRestarts.filter((n) => n === proc.name).length >= MAX_BOOT_RESTARTS) return;
      bootRestarts.push(proc.name);
      spawnProc(proc);
    });
  };
  const url = `http://127.0.0.1:${httpPort}`;
  const tokens = new Map<ChaosClient, string>();
  const deployment: Deployment = {
    url,
    nats: ownNats,
    receiver,
    subscriptionId: "",
    contentProject: `chaos-content-${RUN}`,
    taskCompletions: new Map(),
    processes,
    bootRestarts,
    logs: () => processes.map((p) => `--- ${p.name}\n${p.log}`).join("\n"),
    async token(client) {
      const cached = tokens.get(client);
      if (cached) return cached;
      const c = CLIENTS[client];
      const res = await fetch(`${url}/v2/token`, {
        method: "POST",
        body: new URLSearchParams({ grant_type: "client_credentials", client_id: c.client_id, client_secret: c.client_secret }),
      });
      if (res.status !== 200) throw new Error(`token: ${res.status} ${await res.text()}`);
      const token = ((await res.json()) as { access_token: string }).access_token;
      tokens.set(client, token);
      return token;
    },
    async call(path, init = {}) {
      const { as = "admin", timeoutMs = 10_000, ...rest } = init;
      const headers = new Headers(rest.headers);
      headers.set("authorization", `Bearer ${await deployment.token(as)}`);
      headers.set("appkey", CLIENTS[as].appkey);
      headers.set("slb-partition-id", "opendes");
      if (rest.body !== undefined) headers.set("content-type", "application/json");
      return fetch(`${url}${path}`, { ...rest, headers, signal: AbortSignal.timeout(timeoutMs) });
    },
    kill(name) {
      processNamed(name).child?.kill("SIGKILL");
    },
    async start(name) {
      spawnProc(processNamed(name));
    },
    async stopGracefully(name, timeoutMs = 30_000) {
      const child = processNamed(name).child;
      if (!child || child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} is not running`);
      const started = Date.now();
      const exited = new Promise<Exit>((done) => child.once("exit", (code, signal) => done({ code, signal, ms: Date.now() - started })));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    async waitServing(name, timeoutMs = 30_000) {
      const proc = processNamed(name);
      const started = Date.now();
      nc ??= await connect({ servers: natsUrl });
      const client = new Svcm(nc).client({ strategy: "timer", maxWait: 500 });
      await eventually(
        async () => {
          // Read at each look: a process whose start-up failed may have been started again.
          const child = proc.child;
          if (child?.exitCode !== null || child?.signalCode !== null)
            throw new Error(`${name} exited (${child?.exitCode ?? child?.signalCode})`);
          const answering = new Set<string>();
          for await (const pong of await client.ping()) if (pong.metadata?.pid === String(child.pid)) answering.add(pong.name);
          return proc.actors.every((actor) => answering.has(serviceName(actor)));
        },
        { timeoutMs, intervalMs: 100, what: `${name} answering $SRV.PING` },
      );
      return Date.now() - started;
    },
    async stopNats() {
      await ownNats().stop();
    },
    async startNats() {
      ownNats();
      nats = await startNatsServer({ dir: natsDir, port: natsPort });
    },
    async waitReady(timeoutMs = 30_000) {
      const started = Date.now();
      await eventually(async () => (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) })).status === 200, {
        timeoutMs,
        intervalMs: 100,
        what: "readiness",
      });
      return Date.now() - started;
    },
    async memory() {
      const rss: Record<string, number> = {};
      for (const proc of [...processes, { name: "nats-server", child: nats?.process } as Proc]) {
        const pid = proc.child?.pid;
        if (!pid) continue;
        try {
          const status = await Bun.file(`/proc/${pid}/status`).text();
          rss[proc.name] = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
        } catch {
          rss[proc.name] = 0;
        }
      }
      return rss;
    },
    async stop() {
      await Promise.all(
        processes.map(async (p) => {
          const child = p.child;
          if (!child || child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise((done) => child.once("exit", done));
          child.kill("SIGTERM");
          const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
          await exited;
          clearTimeout(timer);
        }),
      );
      await nc?.close();
      await nats?.stop();
      await receiver.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const proc of processes) spawnProc(proc);
    await deployment.waitReady(60_000);
    // Every process, not only one of each kind as readiness needs.
    for (const proc of processes) if (proc.actors.length) await deployment.waitServing(proc.name, 60_000);
    booting = false;
    const sub = await deployment.call("/v1/notifications/subscriptions/types/PlanShared", {
      as: "alpha",
      method: "POST",
      body: JSON.stringify({ subscriber: "chaos", callback_uri: receiver.url }),
    });
    if (sub.status !== 200) throw new Error(`subscribe: ${sub.status} ${await sub.text()}`);
    deployment.subscriptionId = ((await sub.json()) as { subscription_id: string }).subscription_id;
    const project = await deployment.call(`/v1/projects/${deployment.contentProject}`, {
      method: "PUT",
      body: JSON.stringify({ name: "chaos content", members: ["admin"], values: { displayItems: { "water-depth": 91 } } }),
    });
    if (project.status !== 201) throw new Error(`content project: ${project.status} ${await project.text()}`);
  } catch (error) {
    const logs = deployment.logs();
    await deployment.stop();
    throw new Error(`${(error as Error).message}\n${logs}`);
  }
  return deployment;
}

/** What the load generator saw; `accepted` holds every write answered 2xx, by kind. */
export type LoadResult = {
  requests: number;
  statuses: Record<string, number>;
  /** Requests without an answer within the client timeout. */
  hung: number;
  latenciesMs: number[];
  /** Statuses per kind of request (twin, record, segment, project, event, task, read, …). */
  byKind: Record<string, Record<string, number>>;
  /** The first non-2xx answers: when, which kind, the status and the problem. */
  failures: string[];
  /** Tasks map task id → content id (answered 202). */
  accepted: {
    twins: Map<string, string>;
    records: Set<string>;
    segments: Set<string>;
    projects: Set<string>;
    events: Set<string>;
    tasks: Map<string, string>;
  };
};

export function emptyLoad(): LoadResult {
  return {
    requests: 0,
    statuses: {},
    hung: 0,
    latenciesMs: [],
    byKind: {},
    failures: [],
    accepted: { twins: new Map(), records: new Set(), segments: new Set(), projects: new Set(), events: new Set(), tasks: new Map() },
  };
}

let sequence = 0;
const MAX_FAILURES_KEPT = 50;
const RUN = Math.random().toString(36).slice(2, 8);

/** The load's request kinds: writes and a catalog read, and with `reads` a read of each capability and a subscribe. */
const WRITE_KINDS = ["twin", "record", "segment", "project", "event", "task", "read"] as const;
const MIXED_KINDS = [...WRITE_KINDS, "twin-get", "search", "subscribe", "project-get", "segment-get"] as const;
/** A notification type the load subscribes to and never publishes: its deliveries stay those of the one subscription. */
const SUBSCRIBED_UNPUBLISHED = "ReviewStateChanged";

/**
 * Mixed writes (twin properties, storage records, assessment upserts, projects, events, content
 * tasks) and a read (with `reads`: also twin, search, project and assessment reads and subscribes),
 * from `concurrency` workers until `durationMs` passes, `maxRequests` are sent or `until()` holds;
 * bounded both ways.
 */
export async function runLoad(
  d: Deployment,
  into: LoadResult,
  options: {
    durationMs: number;
    concurrency?: number;
    maxRequests?: number;
    timeoutMs?: number;
    reads?: boolean;
    until?: () => boolean;
    /** Told of every answer: its kind, status, and when it was sent and answered (epoch ms). */
    onAnswer?: (answer: { kind: string; status: number; sentAt: number; answeredAt: number }) => void;
  },
): Promise<LoadResult> {
  const until = Date.now() + options.durationMs;
  const max = options.maxRequests ?? 1_000_000;
  const kinds: readonly string[] = options.reads ? MIXED_KINDS : WRITE_KINDS;
  const call: Deployment["call"] = (path, init = {}) => d.call(path, { timeoutMs: options.timeoutMs ?? 10_000, ...init });
  const latest = { project: d.contentProject, segment: "" };
  const worker = async () => {
    while (Date.now() < until && into.requests < max && !options.until?.()) {
      const n = ++sequence;
      const key = `${RUN}-${n}`;
      const kindName = kinds[n % kinds.length]!;
      let send: () => Promise<Response>;
      let accept: (res: Response) => Promise<void> | void = () => {};
      if (kindName === "twin") {
        send = () =>
          call("/api/twin-properties/v1/acme/chaos/rig-1/twin-properties", {
            method: "PUT",
            body: JSON.stringify({ group: "load", twins: [{ name: `n${key}`, value: String(n) }] }),
          });
        accept = () => void into.accepted.twins.set(`n${key}`, String(n));
      } else if (kindName === "record") {
        const id = `opendes:doc:${key}`;
        send = () =>
          call("/api/storage/v2/records", {
            method: "PUT",
            body: JSON.stringify([
              {
                id,
                kind: "osdu:wks:doc:1.0.0",
                acl: { viewers: ["users.datalake.admins"], owners: ["users.datalake.admins"] },
                data: { n },
              },
            ]),
          });
        accept = () => void into.accepted.records.add(id);
      } else if (kindName === "segment") {
        send = () =>
          call(`/assessments/v1/segmentanalyses/s${key}`, {
            method: "PUT",
            body: JSON.stringify({
              name: `s${n}`,
              riskFactors: [{ name: "trap", probability: 0.5 }],
              volumes: { oil: { unit: "MMbbl", p90: 10, p10: 100 } },
            }),
          });
        accept = () => {
          into.accepted.segments.add(`s${key}`);
          latest.segment = `s${key}`;
        };
      } else if (kindName === "project") {
        send = () => call(`/v1/projects/p${key}`, { method: "PUT", body: JSON.stringify({ name: `p${n}`, members: ["admin"] }) });
        accept = () => {
          into.accepted.projects.add(`p${key}`);
          latest.project = `p${key}`;
        };
      } else if (kindName === "event") {
        send = () => call("/v1/notifications/events/PlanShared", { as: "alpha", method: "POST", body: JSON.stringify({ data: { n } }) });
        accept = async (res) => void into.accepted.events.add(((await res.clone().json()) as { event_id: string }).event_id);
      } else if (kindName === "task") {
        send = () => call(`/v1/projects/${d.contentProject}/display-items/content/requests`, { method: "POST", body: JSON.stringify({}) });
        accept = async (res) => {
          const body = (await res.clone().json()) as { taskId: string; contentId: string };
          into.accepted.tasks.set(body.taskId, body.contentId);
        };
      } else if (kindName === "twin-get") {
        send = () => call("/api/twin-properties/v1/acme/chaos/rig-1/twin-properties?group=load");
      } else if (kindName === "search") {
        send = () =>
          call("/api/search/v2/query", { as: "searcher", method: "POST", body: JSON.stringify({ kind: "osdu:wks:doc:1.0.0", limit: 5 }) });
      } else if (kindName === "subscribe") {
        send = () =>
          call(`/v1/notifications/subscriptions/types/${SUBSCRIBED_UNPUBLISHED}`, {
            as: "beta",
            method: "POST",
            body: JSON.stringify({ subscriber: `load-${n}`, callback_uri: d.receiver.url }),
          });
      } else if (kindName === "project-get") {
        const project = latest.project;
        send = () => call(`/v1/projects/${project}`);
      } else if (kindName === "segment-get") {
        const segment = latest.segment;
        send = () => (segment ? call(`/assessments/v1/segmentanalyses/${segment}`) : call("/v1/key-parameters?limit=5"));
      } else {
        send = () => call("/v1/display-items?limit=5");
      }
      into.requests++;
      const sentAt = Date.now();
      const started = performance.now();
      try {
        const res = await send();
        into.latenciesMs.push(performance.now() - started);
        into.statuses[res.status] = (into.statuses[res.status] ?? 0) + 1;
        const perKind = (into.byKind[kindName] ??= {});
        perKind[res.status] = (perKind[res.status] ?? 0) + 1;
        options.onAnswer?.({ kind: kindName, status: res.status, sentAt, answeredAt: Date.now() });
        if (res.status >= 200 && res.status < 300) await accept(res);
        else if (into.failures.length < MAX_FAILURES_KEPT)
          into.failures.push(`${new Date(sentAt).toISOString()} ${kindName} → ${res.status} ${(await res.clone().text()).slice(0, 300)}`);
        await res.body?.cancel().catch(() => {});
      } catch (error) {
        if ((error as Error).name === "TimeoutError" || (error as Error).name === "AbortError") into.hung++;
        else into.statuses[`error:${(error as Error).name}`] = (into.statuses[`error:${(error as Error).name}`] ?? 0) + 1;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  return into;
}

/** Every accepted write read back once the system is ready; returns the ones missing. */
export async function missingWrites(d: Deployment, load: LoadResult): Promise<string[]> {
  const missing: string[] = [];
  const twins = (await (await d.call("/api/twin-properties/v1/acme/chaos/rig-1/twin-properties?group=load")).json()) as {
    desired?: Record<string, Record<string, { value: string }>>;
  };
  for (const [name, value] of load.accepted.twins) if (twins.desired?.load?.[name]?.value !== value) missing.push(`twin ${name}`);
  const reads: Array<[string, string]> = [
    ...[...load.accepted.records].map((id): [string, string] => [`record ${id}`, `/api/storage/v2/records/${id}`]),
    ...[...load.accepted.segments].map((id): [string, string] => [`segment ${id}`, `/assessments/v1/segmentanalyses/${id}`]),
    ...[...load.accepted.projects].map((id): [string, string] => [`project ${id}`, `/v1/projects/${id}`]),
  ];
  missing.push(...(await taskProblems(d, load.accepted.tasks)));
  for (let i = 0; i < reads.length; i += 16) {
    await Promise.all(
      reads.slice(i, i + 16).map(async ([what, path]) => {
        const res = await d.call(path);
        await res.body?.cancel().catch(() => {});
        if (res.status !== 200) missing.push(`${what} (${res.status})`);
      }),
    );
  }
  return missing;
}

type TaskView = { state: string; contentId?: string; completedAt?: string; error?: string };

/**
 * Every accepted content task has succeeded with the content id it was accepted with, and (checked
 * again after later faults) completed exactly once: its completedAt never changes once seen.
 */
export async function taskProblems(d: Deployment, tasks: Map<string, string>): Promise<string[]> {
  const problems: string[] = [];
  const entries = [...tasks];
  for (let i = 0; i < entries.length; i += 16) {
    await Promise.all(
      entries.slice(i, i + 16).map(async ([taskId, contentId]) => {
        const res = await d.call(`/v2/projects/${d.contentProject}/tasks/${taskId}`);
        if (res.status !== 200) {
          await res.body?.cancel().catch(() => {});
          problems.push(`task ${taskId} (${res.status})`);
          return;
        }
        const task = (await res.json()) as TaskView;
        if (task.state !== "succeeded") return void problems.push(`task ${taskId} ${task.state}${task.error ? `: ${task.error}` : ""}`);
        if (task.contentId !== contentId) return void problems.push(`task ${taskId} content ${task.contentId} ≠ ${contentId}`);
        const first = d.taskCompletions.get(taskId);
        if (first === undefined) d.taskCompletions.set(taskId, task.completedAt ?? "");
        else if (first !== (task.completedAt ?? "")) problems.push(`task ${taskId} completed twice (${first}, then ${task.completedAt})`);
      }),
    );
  }
  return problems;
}

/** Accepted events the receiver has not (yet) received; the receiver dedupes by webhook-id. */
export const undeliveredEvents = (d: Deployment, load: LoadResult) =>
  [...load.accepted.events].filter((id) => !d.receiver.deliveries.has(id));

/** What became of a load's accepted work once the system settled: each list names what went wrong. */
export type Outcome = { lost: string[]; undelivered: string[]; tasksNotOnce: string[]; duplicated: string[] };

/**
 * Waits (bounded) until every accepted write reads back and every accepted event was delivered, then
 * says what did not: writes missing, events never delivered, tasks not succeeded once, events delivered
 * more than once (by webhook-id).
 */
export async function settledOutcome(d: Deployment, load: LoadResult, options: { timeoutMs: number; what: string }): Promise<Outcome> {
  const lost = await eventually(async () => ((await missingWrites(d, load)).length === 0 ? [] : undefined), {
    timeoutMs: options.timeoutMs,
    intervalMs: 500,
    what: `accepted writes after ${options.what}`,
  }).catch(async () => missingWrites(d, load));
  await eventually(() => undeliveredEvents(d, load).length === 0, { timeoutMs: options.timeoutMs, intervalMs: 200 }).catch(() => undefined);
  return {
    lost,
    undelivered: undeliveredEvents(d, load),
    tasksNotOnce: await taskProblems(d, load.accepted.tasks),
    duplicated: [...load.accepted.events].filter((id) => (d.receiver.deliveries.get(id) ?? 0) > 1),
  };
}

/** The p-th percentile of unsorted latencies (0 when there are none). */
export function latencyPercentile(values: number[], p: number): number {
  return values.length
    ? percentile(
        [...values].sort((a, b) => a - b),
        p,
      )
    : 0;
}

export const writesAccepted = (load: LoadResult) =>
  load.accepted.twins.size +
  load.accepted.records.size +
  load.accepted.segments.size +
  load.accepted.projects.size +
  load.accepted.events.size +
  load.accepted.tasks.size;
