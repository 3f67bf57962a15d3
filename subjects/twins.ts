/**
 * Twin properties: the one place that spells the twin bucket and key names, the REST/NATS message
 * shapes and the commit record's shape. The twins actor, the twin-mirror actor and the device SDK all
 * import this module, so they cannot disagree; the commit protocol itself is platform/twin-commit.ts.
 *
 * Storage: one JetStream KV bucket per twin (`twin-<32 hex>`, see twinBucket), keys exactly
 * `twin_properties/<group>/desired|reported/<name>` (the original SDK's Redis layout), plus one
 * commit record per group, `twin_commits/<group>` (see TwinCommit).
 */
import { createHash } from "node:crypto";
import { Type, type Static } from "@sinclair/typebox";
import { SUBJECT_TOKEN_PATTERN } from "../config/schema.ts";
import { invalidField } from "./errors.ts";
import { republishedWrites } from "./names.ts";
import { NoContent, NoRequest, operation } from "./operation.ts";

/** Names and groups: a KV key segment with no `.`, `/`, `*`, `>` or space (docs/contract.md). */
export const TWIN_NAME_PATTERN = "^[A-Za-z0-9_=-]{1,128}$";
const TWIN_NAME_RE = new RegExp(TWIN_NAME_PATTERN);

/** Largest value, in UTF-8 bytes (→ 413). */
export const TWIN_VALUE_MAX_BYTES = 64 * 1024;
/** Largest sum of values in one PUT, in UTF-8 bytes (→ 413). */
export const TWIN_REQUEST_MAX_BYTES = 1024 * 1024;
/** Most properties in one PUT. */
export const TWIN_MAX_PROPERTIES = 1000;

export const TwinSide = { desired: "desired", reported: "reported" } as const;
export type TwinSide = (typeof TwinSide)[keyof typeof TwinSide];

export const TWIN_KEY_PREFIX = "twin_properties";
export const TWIN_COMMIT_PREFIX = "twin_commits";
/** The app's own configuration lives in this group, under the app's Name. */
export const CONFIG_GROUP = "config";

/**
 * Names JavaScript objects treat specially: as a group or a name they could reach Object.prototype in
 * a consumer that builds plain objects from twin keys (a device app, a script), so they are no twin
 * names, in a PUT or in a key a device wrote.
 */
const RESERVED_TWIN_NAMES = new Set(["__proto__", "constructor", "prototype"]);

export function isReservedTwinName(value: string): boolean {
  return RESERVED_TWIN_NAMES.has(value);
}

export function isTwinName(value: string): boolean {
  return TWIN_NAME_RE.test(value) && !RESERVED_TWIN_NAMES.has(value);
}

/** Returns the name when it fits the key alphabet, else a 400 naming the pointer (never rewritten). */
export function checkTwinName(value: string, pointer: string): string {
  if (RESERVED_TWIN_NAMES.has(value))
    throw invalidField(pointer, `"${value}" is reserved (${[...RESERVED_TWIN_NAMES].join(", ")} are no twin names)`);
  if (!isTwinName(value))
    throw invalidField(pointer, `must match ${TWIN_NAME_PATTERN} (letters, digits, "_", "=" or "-"; no ".", "/", "*", ">" or spaces)`);
  return value;
}

/** The twin a bucket belongs to: organization, environment and twin id from the REST path. */
export type TwinAddress = { organization: string; environment: string; twinId: string };

/**
 * A twin's KV bucket is `twin-` + 32 hex digits of SHA-256 over `<organization>/<environment>/<twinId>`: the tokens
 * may hold `_` and `-` (no separator is unambiguous) and 3 × 128 characters overflow the stream-name limit; a hash
 * is fixed-length and collision-free in practice. The bucket's description keeps the readable address.
 */
export const TWIN_BUCKET_PREFIX = "twin-";

export function twinBucket(address: TwinAddress): string {
  const digest = createHash("sha256").update(`${address.organization}/${address.environment}/${address.twinId}`).digest("hex");
  return `${TWIN_BUCKET_PREFIX}${digest.slice(0, 32)}`;
}

export const twinBucketDescription = (address: TwinAddress) =>
  `derrick twin ${address.organization}/${address.environment}/${address.twinId}`;

/**
 * Options every creator of a twin bucket uses (actor and SDK), so creating twice is idempotent.
 * History 2: a reader can still show a key's previous value while a newer one awaits its commit.
 */
export const twinBucketOptions = (address: TwinAddress, maxBytes = TWIN_BUCKET_MAX_BYTES) => ({
  history: 2,
  max_bytes: maxBytes,
  description: twinBucketDescription(address),
  // Memory views of the twin hear its writes here (docs/twins.md#reads-from-memory).
  republish: republishedWrites(twinBucket(address)),
});

/**
 * What one twin's bucket may hold on the server, history included (DERRICK_TWIN_MAX_BYTES): a device
 * may write its own bucket directly, and without a cap one device could fill the JetStream store every
 * capability shares. A write past it is refused (507), the rest of the platform unaffected.
 */
export const TWIN_BUCKET_MAX_BYTES = 64 * 1024 * 1024;

/** Redis layout (original SDK): plain string keys; derrick keeps each key's version in this hash. */
export const REDIS_TWIN_VERSIONS = "twin_versions";
/** The channel prefix of Redis keyspace notifications (database 0), which devices listen to. */
export const REDIS_KEYSPACE_PREFIX = "__keyspace@0__:";

export function twinKey(group: string, side: TwinSide, name: string): string {
  return `${TWIN_KEY_PREFIX}/${group}/${side}/${name}`;
}

export function twinCommitKey(group: string): string {
  return `${TWIN_COMMIT_PREFIX}/${group}`;
}

export type ParsedTwinKey = { kind: "property"; group: string; side: TwinSide; name: string } | { kind: "commit"; group: string };

/** The parts of a twin bucket key, or undefined for keys derrick does not own (reserved names included). */
export function parseTwinKey(key: string): ParsedTwinKey | undefined {
  const parts = key.split("/");
  if (parts.some((part) => RESERVED_TWIN_NAMES.has(part))) return undefined;
  if (parts[0] === TWIN_KEY_PREFIX && parts.length === 4 && (parts[2] === "desired" || parts[2] === "reported")) {
    return { kind: "property", group: parts[1]!, side: parts[2], name: parts[3]! };
  }
  if (parts[0] === TWIN_COMMIT_PREFIX && parts.length === 2) return { kind: "commit", group: parts[1]! };
  return undefined;
}

// ---- the commit record (the protocol itself: platform/twin-commit.ts) ------------------------

/**
 * One record per group, `twin_commits/<group>`, moved by compare-and-swap:
 *  1. `pending` (with every name and value of the PUT) claims the group: only one writer at a time;
 *  2. the property keys are written;
 *  3. `committed` (with the group's new latest desired version) releases them.
 * Readers (SDK, mirror, GET) hold back a desired key of a pending name whose revision is above the
 * pending record's, until the committed record arrives: a half-written PUT is never visible.
 * A writer that died leaves `pending` with all values, so the next writer rolls it forward.
 */
export const TwinCommit = Type.Object({
  state: Type.Union([Type.Literal("pending"), Type.Literal("committed")]),
  /** Names touched by this commit (pending: those being written). */
  names: Type.Array(Type.String()),
  /** Pending only: the values being written (null = delete), for roll-forward after a crash. */
  values: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()]))),
  /** Committed: the group's latest desired version (the ETag); pending: the previous one. */
  version: Type.Integer({ minimum: 0 }),
  at: Type.String(),
  /** Pending only: the writer that claimed the group (answers on subjects.twins.writer while alive). */
  owner: Type.Optional(Type.String()),
});
export type TwinCommit = Static<typeof TwinCommit>;

// ---- messages --------------------------------------------------------------------------------

const PathToken = Type.String({ pattern: SUBJECT_TOKEN_PATTERN });

export const TwinProperty = Type.Object(
  {
    name: Type.String({ pattern: TWIN_NAME_PATTERN }),
    /** A string; may hold serialized JSON. */
    value: Type.String(),
  },
  { additionalProperties: false },
);
export type TwinProperty = Static<typeof TwinProperty>;

/** The PUT body: one group's property update. */
export const TwinUpdateBody = Type.Object(
  {
    group: Type.String({ pattern: TWIN_NAME_PATTERN }),
    twins: Type.Array(TwinProperty, { minItems: 1, maxItems: TWIN_MAX_PROPERTIES }),
  },
  { additionalProperties: false },
);
export type TwinUpdateBody = Static<typeof TwinUpdateBody>;

export const TwinPath = Type.Object({ organization: PathToken, environment: PathToken, twinId: PathToken });
export type TwinPath = Static<typeof TwinPath>;

/** edge → actor: write desired properties: the path, the PUT body and the `If-Match` version when sent. */
export const TwinPutRequest = Type.Composite([
  TwinPath,
  TwinUpdateBody,
  Type.Object({ ifMatch: Type.Optional(Type.Integer({ minimum: 0 })) }),
]);
export type TwinPutRequest = Static<typeof TwinPutRequest>;

export const TwinPutReply = Type.Object({
  group: Type.String(),
  twins: Type.Array(Type.Object({ name: Type.String(), value: Type.String(), version: Type.Integer() })),
});
export type TwinPutReply = Static<typeof TwinPutReply>;

export const TwinGetRequest = Type.Composite([TwinPath, Type.Object({ group: Type.Optional(Type.String()) })]);
export type TwinGetRequest = Static<typeof TwinGetRequest>;

export const TwinValue = Type.Object({ value: Type.String(), version: Type.Integer(), updated_at: Type.String() });
export type TwinValue = Static<typeof TwinValue>;
const TwinGroups = Type.Record(Type.String(), Type.Record(Type.String(), TwinValue));

export const TwinGetReply = Type.Object({ desired: TwinGroups, reported: TwinGroups });
export type TwinGetReply = Static<typeof TwinGetReply>;

/** SDK → actor: make the twin's bucket if it does not exist (no principal: NATS permissions decide who may ask). */
export const TwinEnsureRequest = TwinPath;
export type TwinEnsureRequest = Static<typeof TwinEnsureRequest>;

export const TwinEnsureReply = Type.Object({ bucket: Type.String() });
export type TwinEnsureReply = Static<typeof TwinEnsureReply>;

export const TwinPropertyPath = Type.Composite([
  TwinPath,
  Type.Object({ group: Type.String({ pattern: TWIN_NAME_PATTERN }), name: Type.String({ pattern: TWIN_NAME_PATTERN }) }),
]);
export const TwinDeleteRequest = TwinPropertyPath;
export type TwinDeleteRequest = Static<typeof TwinDeleteRequest>;

export const twinsPut = operation("twins", "put", { request: TwinPutRequest, reply: TwinPutReply });
export const twinsGet = operation("twins", "get", { request: TwinGetRequest, reply: TwinGetReply });
export const twinsDelete = operation("twins", "delete", { request: TwinDeleteRequest, reply: NoContent });
export const twinsEnsure = operation("twins", "ensure", { request: TwinEnsureRequest, reply: TwinEnsureReply });

/** What each Redis mirror of a twin has copied since its process started. */
export const TwinMirrorStats = Type.Object({ twin: Type.String(), desiredCopied: Type.Integer(), reportedCopied: Type.Integer() });
export type TwinMirrorStats = Static<typeof TwinMirrorStats>;
export const twinMirrorStatus = operation("twin-mirror", "status", {
  request: NoRequest,
  reply: Type.Object({ mirrors: Type.Array(TwinMirrorStats) }),
});

/** `ETag: "<n>"` and `If-Match: "<n>"` (quotes optional). */
export const formatTwinEtag = (version: number) => `"${version}"`;

/** The version in an If-Match header; undefined when absent; 400 when it is not a version. */
export function parseIfMatch(header: string | null | undefined): number | undefined {
  if (header === null || header === undefined || header.trim() === "") return undefined;
  const match = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!match) throw invalidField("/headers/if-match", 'must be a version such as "12"');
  return Number(match[1]);
}

// ---- per-device NATS permissions -------------------------------------------------------------

/** Inbox prefix of a device app: replies and KV watches arrive here, and only here. */
export const deviceInboxPrefix = (appName: string) => `_INBOX_${appName}`;

/**
 * Checks the Subscriptions/Targets granted a device: valid subjects whose first token is a plain name (a letter or
 * digit first): not `derrick` (actors), `$…` (JetStream, KV, services, system), `_…` (`_INBOX…` replies, `_R_…` the
 * server's reply routing between accounts) or a wildcard, which would match those. Throws 400 naming the entry.
 */
export function checkDeviceSubjects(subjectList: readonly string[], pointer: string): void {
  subjectList.forEach((subject, i) => {
    const tokens = subject.split(".");
    const valid =
      subject.length <= 255 &&
      tokens.every(
        (t, j) => t.length > 0 && !/[\s]/.test(t) && (t === "*" || t === ">" || !/[*>]/.test(t)) && (t !== ">" || j === tokens.length - 1),
      );
    if (!valid) throw invalidField(`${pointer}/${i}`, `"${subject}" is not a NATS subject`);
    const first = tokens[0]!;
    if (!/^[A-Za-z0-9]/.test(first) || first === "derrick") {
      throw invalidField(
        `${pointer}/${i}`,
        `"${subject}" reaches subjects reserved for derrick, JetStream, NATS or other clients' replies; start it with your own name (e.g. slbapps.<App>.…)`,
      );
    }
  });
}

/** Whether some subject matches both patterns (`*` one token, `>` the rest): two grants that can meet. */
export function subjectsOverlap(a: string, b: string): boolean {
  const x = a.split(".");
  const y = b.split(".");
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const s = x[i];
    const t = y[i];
    if (s === ">" || t === ">") return s !== undefined && t !== undefined;
    if (s === undefined || t === undefined) return false;
    if (s !== "*" && t !== "*" && s !== t) return false;
  }
  return true;
}

/**
 * The JetStream API prefix a device account uses for its twin: its own `$JS.API` is its own account's
 * (JetStream off there), so derrick's reads are imported under this one.
 */
export const DEVICE_JS_API = "$JS.derrick.API";

/** One service a device account imports from derrick's: `remote` in derrick's account, `local` in the device's. */
export type DeviceTwinService = { remote: string; local: string };

/**
 * A device account's imports for its twin: direct gets and stream info of its bucket (under DEVICE_JS_API), writes
 * to its keys, its subjects live as a stream. Each service is safe whatever the payload and reply (answers map back
 * to the device's account, none publishes to a given subject); no consumer creation (docs/security.md#what-each-account-can-do).
 */
export function deviceTwinImports(twin: TwinAddress): { services: DeviceTwinService[]; streams: string[] } {
  const bucket = twinBucket(twin);
  const stream = `KV_${bucket}`;
  const api = (remote: string) => ({ remote: `$JS.API.${remote}`, local: `${DEVICE_JS_API}.${remote}` });
  return {
    // nats.js prefixes KV writes with the JetStream API prefix when there is one.
    services: [
      api(`DIRECT.GET.${stream}`),
      api(`DIRECT.GET.${stream}.>`),
      api(`STREAM.INFO.${stream}`),
      { remote: `$KV.${bucket}.>`, local: `${DEVICE_JS_API}.$KV.${bucket}.>` },
    ],
    streams: [`$KV.${bucket}.>`],
  };
}

export type DevicePermissionInput = {
  twin: TwinAddress;
  /** The app's Name (token pattern): its inbox prefix. */
  appName: string;
  /** Subjects it may receive (its Subscriptions). */
  subscribe: string[];
  /** Subjects it may publish to (its Targets). */
  publish: string[];
};

/**
 * A device user's permissions inside its account (its imports, inbox and Subscriptions): the account boundary is
 * the isolation, these keep a device to its imports. Slash keys are one subject token, so a device can write any
 * key of its bucket, desired included (docs/security.md#what-each-account-can-do).
 */
export function deviceUserPermissions(input: DevicePermissionInput): {
  publish: { allow: string[] };
  subscribe: { allow: string[] };
  allow_responses: boolean;
} {
  const imports = deviceTwinImports(input.twin);
  return {
    publish: { allow: [...imports.services.map((s) => s.local), ...input.publish] },
    subscribe: { allow: [`${deviceInboxPrefix(input.appName)}.>`, ...imports.streams, ...input.subscribe] },
    // RequestIn handlers answer on the requester's reply subject.
    allow_responses: true,
  };
}
