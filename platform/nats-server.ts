/**
 * Runs a private nats-server child: JetStream on, loopback only, store under a given directory.
 * `derrick start` uses it when NATS_URL is unset; the test harness uses it with port -1.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export type NatsServerOptions = {
  /** Directory for the config, the ports file and the JetStream store. */
  dir: string;
  /** Client port; -1 or 0 picks a free one. */
  port?: number;
  host?: string;
  /** Extra nats-server config text. */
  extraConfig?: string;
  /** JetStream's file store limit (e.g. "10MB"); the server's own default (75% of the disk) when absent. */
  maxFileStore?: string;
  /** An `authorization { … }` block, kept in its own included file so it can be rewritten and reloaded. */
  authorization?: string;
  /** Print the server's log lines (debugging). */
  verbose?: boolean;
  /**
   * Run the server in a process group of its own, so a Ctrl-C (or any signal sent to the caller's
   * group) reaches only the caller, which drains first and stops the server last. A server left
   * behind by a caller that died (SIGKILL) is stopped at the next start in the same directory.
   */
  ownProcessGroup?: boolean;
};

export type NatsServer = {
  url: string;
  port: number;
  process: ChildProcess;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Stops the server abruptly, keeping the store (fault tests). */
  kill(): Promise<void>;
};

const PID_FILE = "nats-server.pid";
/** Open-files limit asked for the embedded server (≈ 2 per stream: 100k twins need ~200k). */
const OPEN_FILES = 262_144;
const AUTH_FILE = "auth.conf";

/** Rewrites the included authorization file of a server started in `dir`. */
export function writeAuthorization(dir: string, authorization: string): void {
  const tmp = join(dir, `${AUTH_FILE}.${process.pid}.tmp`);
  writeFileSync(tmp, authorization, { mode: 0o600 });
  renameSync(tmp, join(dir, AUTH_FILE));
}

/**
 * Asks the derrick running the embedded server in `dir` to restart it with its rewritten config (SIGHUP);
 * undefined when none runs. A restart, not a reload: nats-server 2.9 gives an account added by a reload none of
 * its imports ("no responders" until a restart; docs/security.md#the-embedded-nats-server).
 */
export function requestEmbeddedRestart(dir: string): { pid: number } | undefined {
  const owner = readOwner(dir);
  if (!owner || startTimeOf(owner.pid) !== owner.startTime) return undefined;
  const serverPid = serverPidIn(dir);
  try {
    process.kill(owner.pid, "SIGHUP");
    return { pid: serverPid };
  } catch {
    return undefined;
  }
}

/** The pid in the pid file of a server started in `dir`; 0 when there is none. */
function serverPidIn(dir: string): number {
  const path = join(dir, PID_FILE);
  const pid = existsSync(path) ? Number(readFileSync(path, "utf8").trim()) : 0;
  return Number.isInteger(pid) && pid > 0 ? pid : 0;
}

/** The client URL of the server running in `dir` (its pid file and ports file), if one runs. */
export function runningServerUrl(dir: string): string | undefined {
  const pid = serverPidIn(dir);
  const ports = join(dir, "ports", `nats-server_${pid}.ports`);
  if (!pid || !existsSync(ports) || !existsSync(`/proc/${pid}`)) return undefined;
  try {
    return (JSON.parse(readFileSync(ports, "utf8")) as { nats?: string[] }).nats?.[0];
  } catch {
    return undefined;
  }
}

/** Waits until the server in `dir` is one other than `oldPid` and listening; false after `timeoutMs`. */
export async function waitForRestart(dir: string, oldPid: number, timeoutMs = 20_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pid = serverPidIn(dir);
    if (pid && pid !== oldPid && runningServerUrl(dir)) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

export const NATS_SERVER_MISSING =
  "nats-server was not found on PATH. Install it (Debian: `apt-get install nats-server`) or set NATS_URL to an existing server with JetStream enabled.";

export async function startNatsServer(options: NatsServerOptions): Promise<NatsServer> {
  const host = options.host ?? "127.0.0.1";
  const port = options.port === undefined || options.port === 0 ? -1 : options.port;
  const storeDir = join(options.dir, "jetstream");
  const portsDir = join(options.dir, "ports");
  mkdirSync(storeDir, { recursive: true });
  mkdirSync(portsDir, { recursive: true });
  const configPath = join(options.dir, "nats-server.conf");
  if (options.ownProcessGroup) {
    await stopLeftover(options.dir, configPath);
    writeOwner(options.dir);
  }
  if (options.authorization !== undefined) writeAuthorization(options.dir, options.authorization);
  writeFileSync(
    configPath,
    [
      `host: "${host}"`,
      `port: ${port}`,
      `ports_file_dir: "${portsDir}"`,
      `pid_file: "${join(options.dir, PID_FILE)}"`,
      `jetstream { store_dir: "${storeDir}"${options.maxFileStore ? `, max_file_store: ${options.maxFileStore}` : ""} }`,
      // Requests carry principal headers; keep payload room generous but bounded.
      `max_payload: 8MB`,
      options.extraConfig ?? "",
      options.authorization !== undefined ? `include "${AUTH_FILE}"` : "",
    ].join("\n"),
  );

  // Every JetStream stream (each twin's KV bucket is one) holds about two files open: raise the
  // server's open-files limit (root may lift the hard limit; others get their hard limit), then exec
  // so the child's pid is the server's.
  const child = spawn(
    "sh",
    ["-c", `ulimit -n ${OPEN_FILES} 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec nats-server -c "$0"`, configPath],
    {
      stdio: ["ignore", "pipe", "pipe"],
      detached: options.ownProcessGroup ?? false,
    },
  );
  const spawnError = new Promise<never>((_, reject) =>
    child.once("error", (error: NodeJS.ErrnoException) => reject(error.code === "ENOENT" ? new Error(NATS_SERVER_MISSING) : error)),
  );
  let output = "";
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
    if (options.verbose) process.stderr.write(chunk);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const actualPort = await Promise.race([spawnError, waitForPortsFile(portsDir, child.pid!, exited, () => output)]);
  const stopWith = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return {
    url: `nats://${host}:${actualPort}`,
    port: actualPort,
    process: child,
    stop: () => stopWith("SIGTERM"),
    kill: () => stopWith("SIGKILL"),
  };
}

/** Stops a server an earlier caller started in `dir` and left running (it died before stopping it). */
async function stopLeftover(dir: string, configPath: string): Promise<void> {
  // The derrick that claimed this dir (by pid and start time) still runs: a second start on one data
  // dir. Checked before the server's pid file too: a first start that has claimed the dir but not yet
  // started its server would otherwise lose its claim to this one.
  const claimant = readOwner(dir);
  if (claimant && claimant.pid !== process.pid && startTimeOf(claimant.pid) === claimant.startTime)
    throw new Error(
      `another derrick (pid ${claimant.pid}) runs an embedded nats-server in ${dir}: stop it first or use another DERRICK_DATA_DIR`,
    );
  const pid = serverPidIn(dir);
  // Only a nats-server started with this very config: a recycled pid is left alone.
  const isOurs = () => cmdlineOf(pid).includes(configPath);
  if (!pid || !isOurs()) return;
  // Its owner is gone (checked above): a leftover.
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + 10_000;
  while (isOurs() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  if (isOurs()) process.kill(pid, "SIGKILL");
}

function cmdlineOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
}

/** A process's start time (field 22 of /proc/<pid>/stat): with the pid, it names one process, not a recycled pid. */
function startTimeOf(pid: number): string | undefined {
  try {
    // Fields after the parenthesised command name (which may hold spaces) start at field 3.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

const OWNER_FILE = "owner";

function writeOwner(dir: string): void {
  writeFileSync(join(dir, OWNER_FILE), `${process.pid} ${startTimeOf(process.pid) ?? ""}\n`);
}

function readOwner(dir: string): { pid: number; startTime: string } | undefined {
  try {
    const [pid, startTime] = readFileSync(join(dir, OWNER_FILE), "utf8").trim().split(" ");
    return pid && startTime ? { pid: Number(pid), startTime } : undefined;
  } catch {
    return undefined;
  }
}

async function waitForPortsFile(dir: string, pid: number, exited: Promise<number | null>, output: () => string): Promise<number> {
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const file = `nats-server_${pid}.ports`;
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (hasExited) throw new Error(`nats-server exited during start-up: ${startupFailure(output())}`);
    if (readdirSync(dir).includes(file)) {
      try {
        const ports = JSON.parse(readFileSync(join(dir, file), "utf8")) as { nats?: string[] };
        const url = ports.nats?.[0];
        if (url) return Number(new URL(url).port);
      } catch {
        // written but not complete yet
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`nats-server did not report its port within 15 s:\n${output()}`);
}

/** Why a server exited during start-up: its fatal lines without their log prefix, else its whole output (the banner says nothing). */
function startupFailure(output: string): string {
  const fatal = output
    .split("\n")
    .filter((line) => line.includes("[FTL]"))
    .map((line) => line.slice(line.indexOf("[FTL]") + 5).trim());
  return fatal.length ? fatal.join("; ") : `\n${output}`;
}
