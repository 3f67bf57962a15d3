/**
 * Who may connect to the embedded nats-server, and in which NATS account. `derrick start` writes an
 * `accounts` block into the server's config from `<dataDir>/nats/users.json`:
 * - account DERRICK (JetStream on): one internal user for derrick's own processes (random password,
 *   created on first start, full permissions);
 * - one account per device app added with `derrick devices add` (JetStream off), holding its user
 *   (bcrypt-hashed password) and importing only its own twin and subjects from DERRICK.
 * Replies and JetStream answers to what a device sends stay in its account, so nothing it publishes makes the
 * server act in DERRICK. Anonymous connections are refused. Adding or removing a device restarts the server
 * (SIGHUP to the running derrick): nats-server 2.9 wires a new account's imports only at start (docs/security.md).
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { checkDeviceSubjects, deviceTwinImports, deviceUserPermissions, subjectsOverlap, type TwinAddress } from "../subjects/twins.ts";

export const INTERNAL_USER = "derrick";

export type DeviceUser = {
  user: string;
  /** bcrypt hash: nats-server checks it, the clear password is shown once. */
  password_hash: string;
  twin: TwinAddress;
  subscribe: string[];
  publish: string[];
  created_at: string;
};

export type NatsUsers = { internal: { user: string; password: string }; devices: Record<string, DeviceUser> };

export const usersFile = (dataDir: string) => join(dataDir, "nats", "users.json");

export function readNatsUsers(dataDir: string): NatsUsers | undefined {
  const file = usersFile(dataDir);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as NatsUsers) : undefined;
}

function writeNatsUsers(dataDir: string, users: NatsUsers): void {
  const file = usersFile(dataDir);
  mkdirSync(join(dataDir, "nats"), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(users, null, 2), { mode: 0o600 });
  renameSync(tmp, file);
}

/**
 * Runs `change` holding the users file's lock: two `derrick devices add` at once (or a first start
 * beside one) each read, change and write the whole file, and without the lock one loses the other's
 * device. The lock is a file made with O_EXCL; one left by a process that died is taken over.
 */
function withUsersLock<T>(dataDir: string, change: () => T): T {
  mkdirSync(join(dataDir, "nats"), { recursive: true, mode: 0o700 });
  const lock = `${usersFile(dataDir)}.lock`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number(readFileSync(lock, "utf8"));
      if (!Number.isInteger(holder) || holder <= 0 || !existsSync(`/proc/${holder}`)) rmSync(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`${usersFile(dataDir)} is locked by process ${holder}`);
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
  try {
    return change();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** The users file, created with a fresh internal password on first use. */
export function ensureNatsUsers(dataDir: string): NatsUsers {
  const existing = readNatsUsers(dataDir);
  if (existing) return existing;
  return withUsersLock(dataDir, () => {
    const raced = readNatsUsers(dataDir);
    if (raced) return raced;
    const users: NatsUsers = { internal: { user: INTERNAL_USER, password: randomBytes(24).toString("base64url") }, devices: {} };
    writeNatsUsers(dataDir, users);
    return users;
  });
}

/** The account of derrick's own processes (edge, actors, CLI): the only one with JetStream. */
export const DERRICK_ACCOUNT = "DERRICK";

/** The account of one device app. */
export const deviceAccount = (name: string) => `DEVICE_${name}`;

/** One device as the accounts config needs it; `password` is a bcrypt hash or, in a hand-written config, clear text. */
export type DeviceAccountInput = { user: string; password: string; twin: TwinAddress; subscribe: string[]; publish: string[] };

type ServiceExport = { service: string; accounts: string[] };
type StreamExport = { stream: string; accounts: string[] };
type ServiceImport = { service: { account: string; subject: string }; to?: string };
type StreamImport = { stream: { account: string; subject: string } };

/**
 * The nats-server `accounts` value: DERRICK exports to each device account its twin (deviceTwinImports) and its
 * Targets as services, so answers go back to the device's account, and imports its Subscriptions as services.
 * A Subscription subject is served by one device only: two would be two imports of one subject.
 */
export function accountsConfig(
  internal: { user: string; password: string },
  devices: readonly DeviceAccountInput[],
): Record<string, unknown> {
  const exports = new Map<string, ServiceExport | StreamExport>();
  const exportTo = (kind: "service" | "stream", subject: string, account: string) => {
    const key = `${kind} ${subject}`;
    const held = exports.get(key) ?? (kind === "service" ? { service: subject, accounts: [] } : { stream: subject, accounts: [] });
    held.accounts.push(account);
    exports.set(key, held);
  };
  const imports: ServiceImport[] = [];
  refuseCrossings(devices);
  const accounts: Record<string, unknown> = {};
  for (const device of devices) {
    const account = deviceAccount(device.user);
    const twin = deviceTwinImports(device.twin);
    const deviceImports: Array<ServiceImport | StreamImport> = [];
    for (const { remote, local } of twin.services) {
      exportTo("service", remote, account);
      deviceImports.push({ service: { account: DERRICK_ACCOUNT, subject: remote }, ...(local !== remote ? { to: local } : {}) });
    }
    for (const subject of twin.streams) {
      exportTo("stream", subject, account);
      deviceImports.push({ stream: { account: DERRICK_ACCOUNT, subject } });
    }
    for (const subject of device.publish) {
      exportTo("service", subject, account);
      deviceImports.push({ service: { account: DERRICK_ACCOUNT, subject } });
    }
    for (const subject of device.subscribe) imports.push({ service: { account, subject } });
    accounts[account] = {
      users: [
        {
          user: device.user,
          password: device.password,
          permissions: deviceUserPermissions({
            twin: device.twin,
            appName: device.user,
            subscribe: device.subscribe,
            publish: device.publish,
          }),
        },
      ],
      imports: deviceImports,
      exports: device.subscribe.map((subject) => ({ service: subject, accounts: [DERRICK_ACCOUNT] })),
    };
  }
  return {
    [DERRICK_ACCOUNT]: {
      jetstream: "enabled",
      users: [{ user: internal.user, password: internal.password }],
      exports: [...exports.values()],
      imports,
    },
    ...accounts,
  };
}

/**
 * Devices meet derrick, not each other: a Subscription that can match another device's Subscription
 * or Target would deliver that device's traffic here (derrick's account imports each Subscription
 * as a service). Throws naming both devices and subjects.
 */
function refuseCrossings(devices: readonly DeviceAccountInput[]): void {
  for (const [i, device] of devices.entries()) {
    for (const other of devices.slice(0, i)) {
      const pairs: Array<[string, string, string]> = [
        ...device.subscribe.flatMap((mine) => [
          ...other.subscribe.map((theirs): [string, string, string] => [mine, theirs, "Subscription"]),
          ...other.publish.map((theirs): [string, string, string] => [mine, theirs, "Target"]),
        ]),
        ...device.publish.flatMap((mine) => other.subscribe.map((theirs): [string, string, string] => [mine, theirs, "Subscription"])),
      ];
      for (const [mine, theirs, what] of pairs) {
        if (subjectsOverlap(mine, theirs))
          throw new Error(
            `${mine} of device ${device.user} meets ${theirs}, a ${what} of device ${other.user}: a device's subjects may not reach another device's`,
          );
      }
    }
  }
}

/** nats-server config text for these users (JSON is valid nats-server config syntax). */
export function accountsBlock(users: NatsUsers): string {
  const devices = Object.values(users.devices).map((d) => ({
    user: d.user,
    password: d.password_hash,
    twin: d.twin,
    subscribe: d.subscribe,
    publish: d.publish,
  }));
  return `accounts: ${JSON.stringify(accountsConfig(users.internal, devices), null, 2)}`;
}

export type NewDevice = { name: string; twin: TwinAddress; subscribe: string[]; publish: string[] };

/** Adds (or replaces) a device user; returns its clear password, shown only now. */
export async function addDeviceUser(dataDir: string, device: NewDevice): Promise<string> {
  if (device.name === INTERNAL_USER) throw new Error(`"${INTERNAL_USER}" is reserved for derrick's own processes`);
  checkDeviceSubjects(device.subscribe, "/subscribe");
  checkDeviceSubjects(device.publish, "/publish");
  const password = randomBytes(24).toString("base64url");
  // Hashed first (bcrypt is slow on purpose): the lock is held only to read, check and write.
  const passwordHash = await Bun.password.hash(password, { algorithm: "bcrypt", cost: 11 });
  ensureNatsUsers(dataDir);
  withUsersLock(dataDir, () => {
    const users = readNatsUsers(dataDir)!;
    // Refused before anything is written: subjects that would meet another device's.
    const others = Object.values(users.devices).filter((d) => d.user !== device.name);
    accountsConfig(users.internal, [
      ...others.map((d) => ({ ...d, password: "" })),
      { user: device.name, password: "", twin: device.twin, subscribe: device.subscribe, publish: device.publish },
    ]);
    users.devices[device.name] = {
      user: device.name,
      password_hash: passwordHash,
      twin: device.twin,
      subscribe: device.subscribe,
      publish: device.publish,
      created_at: new Date().toISOString(),
    };
    writeNatsUsers(dataDir, users);
  });
  return password;
}

export function removeDeviceUser(dataDir: string, name: string): boolean {
  if (!readNatsUsers(dataDir)) return false;
  return withUsersLock(dataDir, () => {
    const users = readNatsUsers(dataDir);
    if (!users?.devices[name]) return false;
    delete users.devices[name];
    writeNatsUsers(dataDir, users);
    return true;
  });
}

/**
 * Before accounts, derrick's streams lived in nats-server's global account (`$G`); its store is a
 * folder per account. Moves that folder to DERRICK's once, before the server starts, so an upgraded
 * data dir keeps its subscriptions, twins and records. True when it moved.
 */
export function migrateStoreToDerrickAccount(natsDir: string): boolean {
  const accounts = join(natsDir, "jetstream", "jetstream");
  const global = join(accounts, "$G");
  const derrick = join(accounts, DERRICK_ACCOUNT);
  if (!existsSync(global) || existsSync(derrick)) return false;
  renameSync(global, derrick);
  return true;
}
