/**
 * Who may connect to the embedded nats-server, and in which NATS account. `derrick start` writes an
 * `accounts` block into the server's config from `<dataDir>/nats/users.json`:
 * - account DERRICK (JetStream on): one internal user for derrick's own processes (random password,
 *   created on first start, full permissions);
 * - one account per device app added with `derrick devices add` (JetStream off), holding its user
 *   (bcrypt-hashed password) and importing only its own twin and subjects from DERRICK.
 * Replies and JetStream answers to anything a device sends stay in the device's account, so nothing a
 * device can publish makes the server act in DERRICK (docs/security.md). Anonymous connections are
 * refused. Adding or removing a device rewrites the config and signals the running server to reload
 * it (SIGHUP), so devices come and go without a restart.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { checkDeviceSubjects, deviceTwinImports, deviceUserPermissions, type TwinAddress } from "../subjects/twins.ts";

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

/** The users file, created with a fresh internal password on first use. */
export function ensureNatsUsers(dataDir: string): NatsUsers {
  const existing = readNatsUsers(dataDir);
  if (existing) return existing;
  const users: NatsUsers = { internal: { user: INTERNAL_USER, password: randomBytes(24).toString("base64url") }, devices: {} };
  writeNatsUsers(dataDir, users);
  return users;
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
 * The nats-server `accounts` value for derrick and its devices. DERRICK exports to each device
 * account only its twin (subjects/twins.ts deviceTwinImports) and the device's Targets, as services
 * (a device's request or publish arrives with its reply mapped, so an answer goes back to the
 * device's account); it imports each device's Subscriptions as services from that device's account.
 * A Subscription subject is served by one device only: two would be two imports of one subject.
 */
export function accountsConfig(internal: { user: string; password: string }, devices: readonly DeviceAccountInput[]): Record<string, unknown> {
  const exports = new Map<string, ServiceExport | StreamExport>();
  const exportTo = (kind: "service" | "stream", subject: string, account: string) => {
    const key = `${kind} ${subject}`;
    const held = exports.get(key) ?? (kind === "service" ? { service: subject, accounts: [] } : { stream: subject, accounts: [] });
    held.accounts.push(account);
    exports.set(key, held);
  };
  const imports: ServiceImport[] = [];
  const servedBy = new Map<string, string>();
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
    for (const subject of device.subscribe) {
      const other = servedBy.get(subject);
      if (other !== undefined) throw new Error(`the subscription ${subject} of device ${device.user} is already device ${other}'s: a subject is delivered to one device`);
      servedBy.set(subject, device.user);
      imports.push({ service: { account, subject } });
    }
    accounts[account] = {
      users: [{ user: device.user, password: device.password, permissions: deviceUserPermissions({ twin: device.twin, appName: device.user, subscribe: device.subscribe, publish: device.publish }) }],
      imports: deviceImports,
      exports: device.subscribe.map((subject) => ({ service: subject, accounts: [DERRICK_ACCOUNT] })),
    };
  }
  return {
    [DERRICK_ACCOUNT]: { jetstream: "enabled", users: [{ user: internal.user, password: internal.password }], exports: [...exports.values()], imports },
    ...accounts,
  };
}

/** nats-server config text for these users (JSON is valid nats-server config syntax). */
export function accountsBlock(users: NatsUsers): string {
  const devices = Object.values(users.devices).map((d) => ({ user: d.user, password: d.password_hash, twin: d.twin, subscribe: d.subscribe, publish: d.publish }));
  return `accounts: ${JSON.stringify(accountsConfig(users.internal, devices), null, 2)}`;
}

export type NewDevice = { name: string; twin: TwinAddress; subscribe: string[]; publish: string[] };

/** Adds (or replaces) a device user; returns its clear password, shown only now. */
export async function addDeviceUser(dataDir: string, device: NewDevice): Promise<string> {
  if (device.name === INTERNAL_USER) throw new Error(`"${INTERNAL_USER}" is reserved for derrick's own processes`);
  checkDeviceSubjects(device.subscribe, "/subscribe");
  checkDeviceSubjects(device.publish, "/publish");
  const users = ensureNatsUsers(dataDir);
  // Refused before anything is written: a Subscription another device already has.
  const others = Object.values(users.devices).filter((d) => d.user !== device.name);
  accountsConfig(users.internal, [...others.map((d) => ({ ...d, password: "" })), { user: device.name, password: "", twin: device.twin, subscribe: device.subscribe, publish: device.publish }]);
  const password = randomBytes(24).toString("base64url");
  users.devices[device.name] = {
    user: device.name,
    password_hash: await Bun.password.hash(password, { algorithm: "bcrypt", cost: 11 }),
    twin: device.twin,
    subscribe: device.subscribe,
    publish: device.publish,
    created_at: new Date().toISOString(),
  };
  writeNatsUsers(dataDir, users);
  return password;
}

export function removeDeviceUser(dataDir: string, name: string): boolean {
  const users = readNatsUsers(dataDir);
  if (!users?.devices[name]) return false;
  delete users.devices[name];
  writeNatsUsers(dataDir, users);
  return true;
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
