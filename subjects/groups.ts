/**
 * Every group a derrick capability checks, in one list: the demo client holds them all, and errors
 * that refuse a caller name the ones that would allow it. A test keeps it equal to the constants
 * each capability declares.
 */
export const GROUPS = {
  /** Twin properties: write desired values (PUT, DELETE). */
  twinsWriters: "twins.writers",
  /** Twin properties: read. */
  twinsReaders: "twins.readers",
  /** Projects: create, change members, delete. */
  projectsAdmins: "projects.admins",
  /** Reporting: write assessment entities. */
  assessmentsEditors: "assessments.editors",
  /** Notifications: publish events through the edge. */
  notificationsPublishers: "notifications.publishers",
  /** Search and storage (OSDU roles): read. */
  datalakeViewers: "users.datalake.viewers",
  /** Storage: write records. */
  datalakeEditors: "users.datalake.editors",
  datalakeAdmins: "users.datalake.admins",
  datalakeOps: "users.datalake.ops",
  /** OSDU's data root: sees every record whatever its ACL. */
  dataRoot: "users.data.root",
  /** Operators: the fleet's status (`GET /v1/system/status`). */
  operators: "derrick.operators",
} as const;

export const ALL_GROUPS: readonly string[] = Object.values(GROUPS);
