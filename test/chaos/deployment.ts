/**
 * A multi-process derrick on one machine for the chaos suite and the soak: a nats-server child (store
 * kept across restarts, same port), the edge and two actor processes as `bin/derrick.ts` children, a
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
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";
import { eventually, freePort, TEST_CLIENTS, type TestClient } from "../harness/index.ts";

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

/** Characters of each process's log kept. */
const LOG_TAIL = 16_000;

type Proc = { name: string; args: string[]; env: Record<string, string>; child?: ChildProcess; log: string };

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
  /** The tail of each process's log (warnings and errors), for a failed test's report. */
  logs(): string;
  token(client: TestClient): Promise<string>;
  call(path: string, init?: RequestInit & { as?: TestClient; timeoutMs?: number }): Promise<Response>;
  kill(name: string): void;
  start(name: string): Promise<void>;
  stopNats(): Promise<void>;
  startNats(): Promise<void>;
  /** Milliseconds until /readyz answers 200 (bounded). */
  waitReady(timeoutMs?: number): Promise<number>;
  memory(): Promise<Record<string, number>>;
  stop(): Promise<void>;
};

/** Boots nats-server, the edge and `actorProcesses` processes each running every actor. */
export async function startDeployment(options: { actorProcesses?: number; env?: Record<string, string> } = {}): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), "derrick-chaos-"));
  const natsDir = join(dir, "nats");
  let nats = await startNatsServer({ dir: natsDir, port: -1 });
  const natsPort = nats.port;
  const httpPort = await freePort();
  const receiver = await startChaosReceiver();
  const env: Record<string, string> = {
    NATS_URL: nats.url,
    DERRICK_HTTP_PORT: String(httpPort),
    DERRICK_DATA_DIR: join(dir, "data"),
    DERRICK_PARTITIONS: "opendes",
    DERRICK_CLIENTS: JSON.stringify(Object.values(TEST_CLIENTS)),
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
  const processes: Proc[] = [{ name: "edge", args: ["bin/derrick.ts", "edge"], env, log: "" }];
  for (let i = 1; i <= (options.actorProcesses ?? 2); i++) {
    processes.push({
      name: `actors-${i}`,
      args: ["bin/derrick.ts", "actor"],
      env: { ...env, DERRICK_SEARCH_INDEX_FILE: join(dir, `search-${i}.sqlite`) },
      log: "",
    });
  }
  const spawnProc = (proc: Proc) => {
    const child = spawn(BUN, proc.args, { cwd: ROOT, env: { ...process.env, ...proc.env }, stdio: ["ignore", "pipe", "pipe"] });
    const keep = (chunk: Buffer) => (proc.log = (proc.log + chunk.toString()).slice(-LOG_TAIL));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    proc.child = child;
  };
  const url = `http://127.0.0.1:${httpPort}`;
  const tokens = new Map<TestClient, string>();
  const deployment: Deployment = {
    url,
    nats: () => nats,
    receiver,
    subscriptionId: "",
    contentProject: `chaos-content-${RUN}`,
    taskCompletions: new Map(),
    processes,
    logs: () => processes.map((p) => `--- ${p.name}\n${p.log}`).join("\n"),
    async token(client) {
      const cached = tokens.get(client);
      if (cached) return cached;
      const c = TEST_CLIENTS[client];
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
      headers.set("appkey", TEST_CLIENTS[as].appkey);
      headers.set("slb-partition-id", "opendes");
      if (rest.body !== undefined) headers.set("content-type", "application/json");
      return fetch(`${url}${path}`, { ...rest, headers, signal: AbortSignal.timeout(timeoutMs) });
    },
    kill(name) {
      processes.find((p) => p.name === name)!.child?.kill("SIGKILL");
    },
    async start(name) {
      spawnProc(processes.find((p) => p.name === name)!);
    },
    async stopNats() {
      await nats.stop();
    },
    async startNats() {
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
      for (const proc of [...processes, { name: "nats-server", child: nats.process } as Proc]) {
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
      await nats.stop();
      await receiver.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    for (const proc of processes) spawnProc(proc);
    await deployment.waitReady(60_000);
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
  /** Statuses per kind of request (twin, record, segment, project, event, task, read). */
  byKind: Record<string, Record<string, number>>;
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
    accepted: { twins: new Map(), records: new Set(), segments: new Set(), projects: new Set(), events: new Set(), tasks: new Map() },
  };
}

let sequence = 0;
const RUN = Math.random().toString(36).slice(2, 8);

/**
 * Mixed writes (twin properties, storage records, assessment upserts, projects, events, content
 * tasks) and a read,
 * from `concurrency` workers until `durationMs` passes or `maxRequests` are sent; bounded both ways.
 */
export async function runLoad(
  d: Deployment,
  into: LoadResult,
  options: { durationMs: number; concurrency?: number; maxRequests?: number; timeoutMs?: number },
): Promise<LoadResult> {
  const until = Date.now() + options.durationMs;
  const max = options.maxRequests ?? 1_000_000;
  const call: Deployment["call"] = (path, init = {}) => d.call(path, { timeoutMs: options.timeoutMs ?? 10_000, ...init });
  const worker = async () => {
    while (Date.now() < until && into.requests < max) {
      const n = ++sequence;
      const key = `${RUN}-${n}`;
      const kind = n % 7;
      const kindName = ["twin", "record", "segment", "project", "event", "task", "read"][kind]!;
      let send: () => Promise<Response>;
      let accept: (res: Response) => Promise<void> | void = () => {};
      if (kind === 0) {
        send = () =>
          call("/api/twin-properties/v1/acme/chaos/rig-1/twin-properties", {
            method: "PUT",
            body: JSON.stringify({ group: "load", twins: [{ name: `n${key}`, value: String(n) }] }),
          });
        accept = () => void into.accepted.twins.set(`n${key}`, String(n));
      } else if (kind === 1) {
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
      } else if (kind === 2) {
        send = () =>
          call(`/assessments/v1/segmentanalyses/s${key}`, {
            method: "PUT",
            body: JSON.stringify({
              name: `s${n}`,
              riskFactors: [{ name: "trap", probability: 0.5 }],
              volumes: { oil: { unit: "MMbbl", p90: 10, p10: 100 } },
            }),
          });
        accept = () => void into.accepted.segments.add(`s${key}`);
      } else if (kind === 3) {
        send = () => call(`/v1/projects/p${key}`, { method: "PUT", body: JSON.stringify({ name: `p${n}`, members: ["admin"] }) });
        accept = () => void into.accepted.projects.add(`p${key}`);
      } else if (kind === 4) {
        send = () => call("/v1/notifications/events/PlanShared", { as: "alpha", method: "POST", body: JSON.stringify({ data: { n } }) });
        accept = async (res) => void into.accepted.events.add(((await res.clone().json()) as { event_id: string }).event_id);
      } else if (kind === 5) {
        send = () => call(`/v1/projects/${d.contentProject}/display-items/content/requests`, { method: "POST", body: JSON.stringify({}) });
        accept = async (res) => {
          const body = (await res.clone().json()) as { taskId: string; contentId: string };
          into.accepted.tasks.set(body.taskId, body.contentId);
        };
      } else {
        send = () => call("/v1/display-items?limit=5");
      }
      into.requests++;
      const started = performance.now();
      try {
        const res = await send();
        into.latenciesMs.push(performance.now() - started);
        into.statuses[res.status] = (into.statuses[res.status] ?? 0) + 1;
        const perKind = (into.byKind[kindName] ??= {});
        perKind[res.status] = (perKind[res.status] ?? 0) + 1;
        if (res.status >= 200 && res.status < 300) await accept(res);
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
