/**
 * Messages of the display items / key parameters capability: the catalog, projects and their
 * members, content requests, asynchronous tasks, contents and content parts. The edge validates
 * HTTP bodies with these schemas; the `projects` and `content-worker` actors decode with them.
 */
import { Type, type Static } from "@sinclair/typebox";
import { NoContent, NoRequest, operation } from "./operation.ts";

/** Path tokens: project ids, member ids, item ids, task/content/part ids. */
export const ID_PATTERN = "^[A-Za-z0-9_-]{1,128}$";
const Id = (description?: string) => Type.String({ pattern: ID_PATTERN, ...(description ? { description } : {}) });

/** The two catalogs; also the task `kind` and the path segment. */
export const CatalogKind = { displayItems: "display-items", keyParameters: "key-parameters" } as const;
export type CatalogKind = (typeof CatalogKind)[keyof typeof CatalogKind];
export const CatalogKindSchema = Type.Union([Type.Literal(CatalogKind.displayItems), Type.Literal(CatalogKind.keyParameters)]);
/** The catalog a request is about: the edge adds it from the route's path (not a path parameter). */
const OfKind = Type.Object({ kind: CatalogKindSchema });

/** Path parameters of the routes, shared by the edge (which documents them) and the actor's requests. */
export const ItemPath = Type.Object({ itemId: Id() });
export const ProjectPath = Type.Object({ projectId: Id() });
export const MemberPath = Type.Object({ projectId: Id(), memberId: Id() });
export const TaskPath = Type.Object({ projectId: Id(), taskId: Id() });
export const ContentPath = Type.Object({ projectId: Id(), contentId: Id() });
export const PartPath = Type.Object({ projectId: Id(), contentPartId: Id() });

export const DataType = {
  number: "number",
  integer: "integer",
  string: "string",
  boolean: "boolean",
  date: "date",
  table: "table",
} as const;
export type DataType = (typeof DataType)[keyof typeof DataType];

export const CatalogItem = Type.Object(
  {
    id: Id("stable id, used as the key of project values"),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    description: Type.String({ maxLength: 2000 }),
    /** Unit of measure of the value (UCUM-like symbol); absent for unitless values. */
    unit: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    dataType: Type.Union([
      Type.Literal(DataType.number),
      Type.Literal(DataType.integer),
      Type.Literal(DataType.string),
      Type.Literal(DataType.boolean),
      Type.Literal(DataType.date),
      Type.Literal(DataType.table),
    ]),
    category: Type.String({ pattern: ID_PATTERN }),
    /** Drilling-plan object types the item describes (well, trajectory, casing-design …). */
    objectTypes: Type.Array(Type.String({ pattern: ID_PATTERN }), { maxItems: 32 }),
  },
  { additionalProperties: false },
);
export type CatalogItem = Static<typeof CatalogItem>;

/** The catalog file shipped in the repo (actors/projects/catalog.json). */
export const CatalogFile = Type.Object(
  {
    $comment: Type.Optional(Type.String()),
    displayItems: Type.Array(CatalogItem, { maxItems: 10_000 }),
    keyParameters: Type.Array(CatalogItem, { maxItems: 10_000 }),
  },
  { additionalProperties: false },
);
export type CatalogFile = Static<typeof CatalogFile>;

export const CATALOG_DEFAULT_LIMIT = 50;
export const CATALOG_MAX_LIMIT = 500;

/** Query strings as received; the actor parses and checks them (pointers under /query). */
export const CatalogQuery = Type.Object({
  offset: Type.Optional(Type.String()),
  limit: Type.Optional(Type.String()),
  category: Type.Optional(Type.String()),
});
export type CatalogQuery = Static<typeof CatalogQuery>;

export const CatalogListRequest = Type.Composite([OfKind, Type.Object({ query: CatalogQuery })]);
export type CatalogListRequest = Static<typeof CatalogListRequest>;

export const CatalogPage = Type.Object({
  items: Type.Array(CatalogItem),
  /** Items matching the filter, before paging. */
  total: Type.Integer(),
  offset: Type.Integer(),
  limit: Type.Integer(),
});
export type CatalogPage = Static<typeof CatalogPage>;

/** `PUT /v1/display-items/{itemId}` body (admin): the item; `id`, when given, must equal the path. */
export const CatalogItemBody = Type.Object(
  {
    id: Type.Optional(Id()),
    name: CatalogItem.properties.name,
    description: CatalogItem.properties.description,
    unit: CatalogItem.properties.unit,
    dataType: CatalogItem.properties.dataType,
    category: CatalogItem.properties.category,
    objectTypes: CatalogItem.properties.objectTypes,
  },
  { additionalProperties: false },
);
export type CatalogItemBody = Static<typeof CatalogItemBody>;

/** edge → actor: the item's path and its PUT body, beside the catalog's kind. */
export const CatalogPutRequest = Type.Composite([OfKind, ItemPath, Type.Object({ body: CatalogItemBody })]);
export type CatalogPutRequest = Static<typeof CatalogPutRequest>;

/** Values of one project: item id → value (shape per the item's dataType). */
export const ProjectValues = Type.Object(
  {
    displayItems: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    keyParameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: false },
);
export type ProjectValues = Static<typeof ProjectValues>;

export const MAX_MEMBERS = 1000;

/** `PUT /v1/projects/{projectId}` body. */
export const ProjectBody = Type.Object(
  {
    projectId: Type.Optional(Id()),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    /** Client ids or user subjects; a caller is a member when either matches. */
    members: Type.Array(Id(), { maxItems: MAX_MEMBERS }),
    values: Type.Optional(ProjectValues),
  },
  { additionalProperties: false },
);
export type ProjectBody = Static<typeof ProjectBody>;

export const Project = Type.Object({
  projectId: Type.String(),
  name: Type.String(),
  members: Type.Array(Type.String()),
  values: Type.Object({
    displayItems: Type.Record(Type.String(), Type.Unknown()),
    keyParameters: Type.Record(Type.String(), Type.Unknown()),
  }),
  createdAt: Type.String(),
  updatedAt: Type.String(),
});
export type Project = Static<typeof Project>;

/**
 * The stored project: the public form plus the id of this incarnation. A project deleted and
 * created again under the same id is a new incarnation; the old one's tasks and results are not its.
 */
export type ProjectRecord = Project & { incarnation?: string };

/** edge → actor: the path parameters, and the HTTP body under `body`. */
export const ProjectRef = ProjectPath;
export type ProjectRef = Static<typeof ProjectRef>;
export const ProjectPutRequest = Type.Composite([ProjectPath, Type.Object({ body: ProjectBody })]);
export type ProjectPutRequest = Static<typeof ProjectPutRequest>;
export const MemberRequest = MemberPath;
export type MemberRequest = Static<typeof MemberRequest>;

/** Content request body: which items (absent = every item of the catalog). */
export const ContentRequestBody = Type.Object(
  { ids: Type.Optional(Type.Array(Id(), { minItems: 1, maxItems: 10_000, uniqueItems: true })) },
  { additionalProperties: false },
);
export type ContentRequestBody = Static<typeof ContentRequestBody>;
/**
 * edge → actor: the project, the catalog's kind and the body when one was sent (absent: every item).
 * A JSON `null` passes the edge's optional body and is refused by the handler, after the membership
 * checks and under the pointer `/body`, as for any other caller.
 */
export const ContentRequest = Type.Composite([
  ProjectPath,
  OfKind,
  Type.Object({ body: Type.Optional(Type.Union([ContentRequestBody, Type.Null()])) }),
]);
export type ContentRequest = Static<typeof ContentRequest>;

export const ContentAccepted = Type.Object({ taskId: Type.String(), contentId: Type.String() });
export type ContentAccepted = Static<typeof ContentAccepted>;

export const TaskState = { queued: "queued", running: "running", succeeded: "succeeded", failed: "failed" } as const;
export type TaskState = (typeof TaskState)[keyof typeof TaskState];
export const TaskStateSchema = Type.Union([
  Type.Literal(TaskState.queued),
  Type.Literal(TaskState.running),
  Type.Literal(TaskState.succeeded),
  Type.Literal(TaskState.failed),
]);

export const Task = Type.Object({
  taskId: Type.String(),
  projectId: Type.String(),
  kind: CatalogKindSchema,
  state: TaskStateSchema,
  createdAt: Type.String(),
  startedAt: Type.Optional(Type.String()),
  completedAt: Type.Optional(Type.String()),
  /** When the content is gone (completion + 60 s); set on success. */
  expiresAt: Type.Optional(Type.String()),
  contentId: Type.Optional(Type.String()),
  error: Type.Optional(Type.String()),
});
export type Task = Static<typeof Task>;

/** The task as stored: the public fields plus what the worker needs. */
export type TaskRecord = Task & {
  partition: string;
  contentId: string;
  ids?: string[];
  requestedBy: { clientId: string; subject: string };
  /** Runs started (the runner's count, so a worker crash counts too); the newest run's number. */
  attempts: number;
  /** Runs that ended in an infrastructure error and said so (retried with backoff; not counted against MAX_RUNS). */
  erroredRuns?: number;
  /** The project incarnation the task was accepted for (absent on tasks from before incarnations). */
  projectIncarnation?: string;
};

/** The work-queue message: enough to find the task; everything else is read from KV. */
export const TaskMessage = Type.Object({ partition: Type.String(), taskId: Type.String() });
export type TaskMessage = Static<typeof TaskMessage>;

export const TaskRef = TaskPath;
export type TaskRef = Static<typeof TaskRef>;

/** Largest and default page of a project's task list. */
export const TASK_PAGE_MAX = 100;
export const TASK_PAGE_DEFAULT = 20;
/**
 * Query of the task list as received (the actor parses and checks it, pointers under /query): `limit` 1..100 (default
 * 20), `before` a task id, the `nextBefore` of the page before: the page holds the tasks created before that one.
 */
export const TaskListQuery = Type.Object({ limit: Type.Optional(Type.String()), before: Type.Optional(Type.String()) });
export type TaskListQuery = Static<typeof TaskListQuery>;
export const TaskListRequest = Type.Composite([ProjectPath, Type.Object({ query: TaskListQuery })]);
export type TaskListRequest = Static<typeof TaskListRequest>;
/** A page of a project's tasks, newest first; `nextBefore` (absent on the last page) is the `before` of the next, older page. */
export const TaskPage = Type.Object({
  items: Type.Array(Task),
  nextBefore: Type.Optional(Type.String()),
});
export type TaskPage = Static<typeof TaskPage>;
export const ContentRef = Type.Composite([ContentPath, OfKind]);
export type ContentRef = Static<typeof ContentRef>;
export const PartRef = Type.Composite([PartPath, OfKind]);
export type PartRef = Static<typeof PartRef>;

/** One computed entry: catalog facts, the project's value and what was derived from it. */
export const ContentItem = Type.Object({
  id: Type.String(),
  name: Type.String(),
  category: Type.String(),
  dataType: Type.String(),
  unit: Type.Optional(Type.String()),
  /** `set` when the project holds a value, else `missing` (value null). */
  status: Type.Union([Type.Literal("set"), Type.Literal("missing")]),
  value: Type.Unknown(),
  /** Tables: row count and min/max/mean of each numeric column. */
  summary: Type.Optional(Type.Unknown()),
});
export type ContentItem = Static<typeof ContentItem>;

/** Largest part, in UTF-8 bytes of its `data`. */
export const PART_MAX_BYTES = 256 * 1024;
/** Contents and parts live this long after completion (the bucket's max age). */
export const CONTENT_TTL_MS = 60_000;

export const Content = Type.Object({
  contentId: Type.String(),
  taskId: Type.String(),
  projectId: Type.String(),
  kind: CatalogKindSchema,
  createdAt: Type.String(),
  expiresAt: Type.String(),
  itemCount: Type.Integer(),
  setCount: Type.Integer(),
  /** Bytes of the serialized `items` array. */
  size: Type.Integer(),
  /** Present when the items fit one response. */
  items: Type.Optional(Type.Array(ContentItem)),
  /** Present instead of `items` when larger than one part: concatenate the parts' `data` in order and parse. */
  parts: Type.Optional(Type.Array(Type.String())),
});
export type Content = Static<typeof Content>;

export const ContentPart = Type.Object({
  contentPartId: Type.String(),
  contentId: Type.String(),
  projectId: Type.String(),
  kind: CatalogKindSchema,
  index: Type.Integer(),
  count: Type.Integer(),
  /** A slice of the JSON text of the `items` array, at most PART_MAX_BYTES UTF-8 bytes. */
  data: Type.String(),
});
export type ContentPart = Static<typeof ContentPart>;

export const WorkerStats = Type.Object({
  instance: Type.String(),
  completed: Type.Integer(),
  failed: Type.Integer(),
  redelivered: Type.Integer(),
  inFlight: Type.Integer(),
});
export type WorkerStats = Static<typeof WorkerStats>;

export const projectsCatalogList = operation("projects", "catalog.list", { request: CatalogListRequest, reply: CatalogPage });
/** 201 when the item is new, 200 when it replaced one. */
export const projectsCatalogPut = operation("projects", "catalog.put", { request: CatalogPutRequest, reply: CatalogItem });
/** 201 when the project is new, 200 when it replaced one. */
export const projectsProjectPut = operation("projects", "project.put", { request: ProjectPutRequest, reply: Project });
export const projectsProjectGet = operation("projects", "project.get", { request: ProjectRef, reply: Project });
export const projectsProjectDelete = operation("projects", "project.delete", { request: ProjectRef, reply: NoContent });
export const projectsMemberPut = operation("projects", "member.put", { request: MemberRequest, reply: NoContent });
export const projectsMemberDelete = operation("projects", "member.delete", { request: MemberRequest, reply: NoContent });
/** 202 with the task's Location. */
export const projectsContentRequest = operation("projects", "content.request", { request: ContentRequest, reply: ContentAccepted });
export const projectsContentGet = operation("projects", "content.get", { request: ContentRef, reply: Content });
export const projectsContentPart = operation("projects", "content.part", { request: PartRef, reply: ContentPart });
export const projectsTaskGet = operation("projects", "task.get", { request: TaskRef, reply: Task });
/** A project's tasks of the last 7 days, newest first (members only). */
export const projectsTaskList = operation("projects", "task.list", { request: TaskListRequest, reply: TaskPage });
/** A content worker's counters (each worker process answers for itself). */
export const contentStats = operation("content", "stats", { request: NoRequest, reply: WorkerStats });
