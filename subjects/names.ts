/**
 * Every subject derrick uses, as typed builders. Nothing outside this folder spells a subject:
 * the edge, the actors, the SDK and external devices all build them here.
 */
import { checkToken } from "./tokens.ts";

const ROOT = "derrick";

/** Request/reply subjects of one capability: `derrick.<capability>.<operation>`. */
function operations<const Ops extends readonly string[]>(capability: string, ops: Ops) {
  const built = {} as { [K in Ops[number]]: () => string };
  for (const op of ops) (built as Record<string, () => string>)[op] = () => `${ROOT}.${capability}.${op}`;
  return built;
}

/** `derrick.<kind>.<partition>.<subscription_id>`: one subscription's messages of a delivery stream. */
function ofSubscription(kind: string) {
  return (partition: string, subscriptionId: string) =>
    `${ROOT}.${kind}.${checkToken(partition, "/partition")}.${checkToken(subscriptionId, "/subscription_id")}`;
}

export const subjects = {
  root: ROOT,
  system: operations("system", ["ping", "echo", "info", "status"] as const),
  identity: operations("identity", [
    "token",
    "jwks",
    "appkey.verify",
    "apps.create",
    "apps.list",
    "apps.delete",
    "keys.list",
    "keys.revoke",
  ] as const),
  /** Catalog, projects, members, content requests and reads (schemas: subjects/projects.ts). */
  projects: operations("projects", [
    "catalog.list",
    "catalog.put",
    "project.put",
    "project.get",
    "project.delete",
    "member.put",
    "member.delete",
    "content.request",
    "content.get",
    "content.part",
    "task.get",
    "task.list",
  ] as const),
  /**
   * Content tasks: work queue `derrick.content.tasks.<partition>.<queue>` (stream CONTENT_TASKS) and
   * worker stats. `queue` is the requester's token for a new request (the stream caps the messages
   * per subject: unfinished tasks per requester) or the task id for one queued again.
   */
  content: {
    tasks: (partition: string, queue: string) =>
      `${ROOT}.content.tasks.${checkToken(partition, "/partition")}.${checkToken(queue, "/queue")}`,
    allTasks: () => `${ROOT}.content.tasks.>`,
    stats: () => `${ROOT}.content.worker.stats`,
  },
  /** Twin properties (buckets and keys: subjects/twins.ts). */
  twins: {
    ...operations("twins", ["put", "get", "delete"] as const),
    /**
     * Makes a twin's bucket with the deployment's configuration (DERRICK_TWIN_MAX_BYTES, replicas,
     * DERRICK_TWINS_MAX) when it does not exist: the SDK asks here before creating one itself.
     */
    ensure: () => `${ROOT}.twins.ensure`,
    /** Answered by a live twins writer (its id is in the commit claims it makes); no responders = gone. */
    writer: (id: string) => `${ROOT}.twins.writer.${checkToken(id, "/writer")}`,
  },
  "twin-mirror": operations("twin-mirror", ["status"] as const),
  /** Assessment entities and aggregations of reporting by unit and analysis (schemas: subjects/reporting.ts). */
  reporting: operations("reporting", [
    "entity.put",
    "entity.get",
    "entity.delete",
    "license.aggregation",
    "prospect.aggregation",
    "prospect.details",
    "fullcycle.aggregation",
    "scenario.aggregation",
    "task.get",
    "task.result",
  ] as const),
  /** Subscriptions API and operations of the notifications actors (schemas: subjects/notifications.ts). */
  notifications: {
    ...operations("notifications", [
      "subscription.upsert",
      "subscription.list",
      "subscription.delete",
      "subscription.secret",
      "subscription.secret.rotate",
      "subscription.deliveries",
      "subscription.retry",
      "event.publish",
      "client.forget",
      "dispatcher.stats",
      "deliverer.stats",
    ] as const),
    /** Every event subject (stream EVENTS). */
    allEvents: () => `${ROOT}.events.>`,
    /** First attempts of one subscription's deliveries (work-queue stream DELIVERIES). */
    deliveries: ofSubscription("deliveries"),
    allDeliveries: () => `${ROOT}.deliveries.>`,
    /** Retries and overflow of one subscription (same stream, its own consumer). */
    retries: ofSubscription("retries"),
    allRetries: () => `${ROOT}.retries.>`,
    /** Dead letters of one subscription (stream DEAD). */
    dead: ofSubscription("dead"),
    allDead: () => `${ROOT}.dead.>`,
    /** Attempt log of one subscription (stream ATTEMPTS). */
    attempts: ofSubscription("attempts"),
    allAttempts: () => `${ROOT}.attempts.>`,
  },
  /** Events to notify: `derrick.events.<partition>.<NotificationType>` (stream EVENTS). */
  events: (partition: string, type: string) => `${ROOT}.events.${checkToken(partition, "/partition")}.${checkToken(type, "/type")}`,
  /** Records to index: `derrick.records.<partition>.<recordKey>` (stream RECORDS). */
  records: (partition: string, key: string) => `${ROOT}.records.${checkToken(partition, "/partition")}.${checkToken(key, "/key")}`,
  /** Every record subject (stream RECORDS). */
  allRecords: () => `${ROOT}.records.>`,
  /** OSDU Search v2 queries and cursors (schemas: subjects/search.ts). */
  search: operations("search", ["query", "cursor.query", "cursor.delete", "info", "status", "health"] as const),
  /** OSDU Storage-compatible record store that feeds search (schemas: subjects/search.ts). */
  storage: operations("storage", ["records.put", "records.get", "records.delete", "records.purge", "health"] as const),
  /**
   * `derrick.kv.<bucket>.<key>`: where a viewed bucket's stream republishes each write's headers, before it acknowledges
   * the write, so memory views hear of writes without asking (docs/operations.md#memory-views).
   */
  bucketWrites: (bucket: string) => `${ROOT}.kv.${checkToken(bucket, "/bucket")}`,
  /** Every bucket's republished writes: what a derrick user must be allowed to subscribe to for reads without looks. */
  allBucketWrites: () => `${ROOT}.kv.>`,
} as const;

/** The stream setting that republishes a bucket's writes (headers only) to subjects.bucketWrites; set when the bucket is made. */
export const republishedWrites = (bucket: string) => ({
  src: `$KV.${checkToken(bucket, "/bucket")}.>`,
  dest: `${subjects.bucketWrites(bucket)}.>`,
  headers_only: true,
});

/** The NATS micro-service name of an actor, as discovered by `$SRV.PING`. */
/** Every actor's NATS service is named this and its actor name. */
export const SERVICE_PREFIX = "derrick-";
export const serviceName = (actor: string) => `${SERVICE_PREFIX}${actor}`;
