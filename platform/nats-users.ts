/**
 * Who may connect to the embedded nats-server. `derrick start` writes an `authorization` block into
 * the server's config from `<dataDir>/nats/users.json`:
 * - one internal user for derrick's own processes (random password, created on first start, full
 *   permissions);
 * - one user per device app added with `derrick devices add`, with a bcrypt-hashed password and
 *   permissions limited to its own twin bucket, its own inbox and its own subjects
 *   (subjects/twins.ts deviceUserPermissions).
 * Anonymous connections are refused. Adding or removing a device rewrites the config and signals the
 * running server to reload it (SIGHUP), so devices come and go without a restart.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { checkDeviceSubjects, deviceUserPermissions, type TwinAddress } from "../subjects/twins.ts";

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

/** nats-server config text for these users (JSON is valid nats-server config syntax). */
export function authorizationBlock(users: NatsUsers): string {
  const entries = [
    { user: users.internal.user, password: users.internal.password },
    ...Object.values(users.devices).map((device) => ({
      user: device.user,
      password: device.password_hash,
      permissions: deviceUserPermissions({ twin: device.twin, appName: device.user, subscribe: device.subscribe, publish: device.publish }),
    })),
  ];
  return `authorization: ${JSON.stringify({ users: entries })}`;
}

export type NewDevice = { name: string; twin: TwinAddress; subscribe: string[]; publish: string[] };

/** Adds (or replaces) a device user; returns its clear password, shown only now. */
export async function addDeviceUser(dataDir: string, device: NewDevice): Promise<string> {
  if (device.name === INTERNAL_USER) throw new Error(`"${INTERNAL_USER}" is reserved for derrick's own processes`);
  checkDeviceSubjects(device.subscribe, "/subscribe");
  checkDeviceSubjects(device.publish, "/publish");
  const users = ensureNatsUsers(dataDir);
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
