/**
 * Display items, key parameters and projects over HTTP (bearer token + appkey + partition header on
 * every route). Each route is one request to the `projects` actor, which checks groups and
 * membership; the edge validates paths, queries and bodies and documents them.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import { Problem, subjects } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  CatalogItem,
  CatalogItemBody,
  CatalogKind,
  CatalogPage,
  CatalogQuery,
  Content,
  ContentAccepted,
  ContentPart,
  ContentRequestBody,
  ID_PATTERN,
  Project,
  ProjectBody,
  Task,
} from "../../subjects/projects.ts";
import { forward } from "../forward.ts";
import type { AuthPlugin, AuthOptions } from "../plugins/auth.ts";
import { requestMeta } from "../request-state.ts";

const errors = { 400: Problem, 401: Problem, 403: Problem, 404: Problem, 409: Problem, 413: Problem, 503: Problem, 504: Problem };
const credentials = { auth: { appkey: true } as AuthOptions, partition: true } as const;
const id = () => t.String({ pattern: ID_PATTERN });
const names = subjects.projects;

/** The catalog and content routes of one kind: `display-items` or `key-parameters`. */
function kindRoutes(bus: Bus, auth: AuthPlugin, kind: CatalogKind) {
  const label = kind === CatalogKind.displayItems ? "display items" : "key parameters";
  const tags = [kind];
  return new Elysia({ name: `derrick-${kind}-routes`, normalize: false })
    .use(auth)
    .get(
      `/v1/${kind}`,
      async ({ query, set, request, principal, partition }) =>
        forward<CatalogPage>(set, await bus.request(names["catalog.list"](), { kind, query }, requestMeta(request, principal, partition))),
      {
        ...credentials,
        query: CatalogQuery,
        detail: { tags, summary: `Collection of ${label} (offset, limit ≤ 500, default 50; category filter)` },
        response: { 200: CatalogPage, ...errors },
      },
    )
    .put(
      `/v1/${kind}/:itemId`,
      async ({ params, body, set, request, principal, partition }) =>
        forward<CatalogItem>(
          set,
          await bus.request(names["catalog.put"](), { kind, itemId: params.itemId, body }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params: t.Object({ itemId: id() }),
        body: CatalogItemBody,
        detail: { tags, summary: `Add or replace one of the ${label} in the catalog (group projects.admins; 201 created, 200 replaced)` },
        response: { 200: CatalogItem, 201: CatalogItem, ...errors },
      },
    )
    .post(
      `/v1/projects/:projectId/${kind}/content/requests`,
      async ({ params, body, set, request, principal, partition }) =>
        forward<ContentAccepted>(
          set,
          await bus.request(
            names["content.request"](),
            { projectId: params.projectId, kind, body },
            requestMeta(request, principal, partition),
          ),
        ),
      {
        ...credentials,
        params: t.Object({ projectId: id() }),
        body: t.Optional(ContentRequestBody),
        detail: {
          tags,
          summary: `Request ${label} content of a project: 202 {taskId, contentId}, Location of the task (members only; 429 past the requester's unfinished tasks, 503 when the queue is full, both with Retry-After)`,
        },
        response: { 202: ContentAccepted, 429: Problem, ...errors },
      },
    )
    .get(
      `/v1/projects/:projectId/${kind}/content/:contentId`,
      async ({ params, set, request, principal, partition }) =>
        forward<Content>(set, await bus.request(names["content.get"](), { ...params, kind }, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id(), contentId: id() }),
        detail: { tags, summary: `Result of a ${label} content request (409 before the task completes; 404 60 s after it completed)` },
        response: { 200: Content, ...errors },
      },
    )
    .get(
      `/v1/projects/:projectId/${kind}/content-parts/:contentPartId`,
      async ({ params, set, request, principal, partition }) =>
        forward<ContentPart>(
          set,
          await bus.request(names["content.part"](), { ...params, kind }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params: t.Object({ projectId: id(), contentPartId: id() }),
        detail: { tags, summary: `One part (≤ 256 KiB of data) of a large ${label} content` },
        response: { 200: ContentPart, ...errors },
      },
    );
}

export const projectRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) =>
  new Elysia({ name: "derrick-project-routes", normalize: false })
    .use(auth)
    .use(kindRoutes(bus, auth, CatalogKind.displayItems))
    .use(kindRoutes(bus, auth, CatalogKind.keyParameters))
    .put(
      "/v1/projects/:projectId",
      async ({ params, body, set, request, principal, partition }) =>
        forward<Project>(
          set,
          await bus.request(names["project.put"](), { projectId: params.projectId, body }, requestMeta(request, principal, partition)),
        ),
      {
        ...credentials,
        params: t.Object({ projectId: id() }),
        body: ProjectBody,
        detail: {
          tags: ["projects"],
          summary: "Create or replace a project: name, members, values (group projects.admins; 201 created, 200 replaced)",
        },
        response: { 200: Project, 201: Project, ...errors },
      },
    )
    .get(
      "/v1/projects/:projectId",
      async ({ params, set, request, principal, partition }) =>
        forward<Project>(set, await bus.request(names["project.get"](), params, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id() }),
        detail: { tags: ["projects"], summary: "A project with members and values (members and projects.admins)" },
        response: { 200: Project, ...errors },
      },
    )
    .delete(
      "/v1/projects/:projectId",
      async ({ params, set, request, principal, partition }) =>
        forward(set, await bus.request(names["project.delete"](), params, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id() }),
        detail: { tags: ["projects"], summary: "Delete a project (group projects.admins); its queued tasks then fail" },
        response: { 204: t.Void(), ...errors },
      },
    )
    .put(
      "/v1/projects/:projectId/members/:memberId",
      async ({ params, set, request, principal, partition }) =>
        forward(set, await bus.request(names["member.put"](), params, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id(), memberId: id() }),
        detail: { tags: ["projects"], summary: "Add a member (client id or user subject; group projects.admins) → 204" },
        response: { 204: t.Void(), ...errors },
      },
    )
    .delete(
      "/v1/projects/:projectId/members/:memberId",
      async ({ params, set, request, principal, partition }) =>
        forward(set, await bus.request(names["member.delete"](), params, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id(), memberId: id() }),
        detail: { tags: ["projects"], summary: "Remove a member (group projects.admins) → 204" },
        response: { 204: t.Void(), ...errors },
      },
    )
    .get(
      "/v2/projects/:projectId/tasks/:taskId",
      async ({ params, set, request, principal, partition }) =>
        forward<Task>(set, await bus.request(names["task.get"](), params, requestMeta(request, principal, partition))),
      {
        ...credentials,
        params: t.Object({ projectId: id(), taskId: id() }),
        detail: {
          tags: ["tasks"],
          summary: "State of one content task: queued, running, succeeded (expiresAt) or failed (error); members only",
        },
        response: { 200: Task, ...errors },
      },
    );
