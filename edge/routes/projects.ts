/**
 * Display items, key parameters and projects over HTTP (bearer token + appkey + partition header on
 * every route). Each route is one request to the `projects` actor, which checks groups and
 * membership; the edge validates paths, queries and bodies and documents them.
 */
import { Elysia, t } from "elysia";
import type { Config } from "../../config/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import {
  CatalogItemBody,
  CatalogKind,
  CatalogQuery,
  ContentPath,
  ContentRequestBody,
  ItemPath,
  MemberPath,
  PartPath,
  ProjectBody,
  ProjectPath,
  TaskListQuery,
  TaskPath,
  projectsCatalogList,
  projectsCatalogPut,
  projectsContentGet,
  projectsContentPart,
  projectsContentRequest,
  projectsMemberDelete,
  projectsMemberPut,
  projectsProjectDelete,
  projectsProjectGet,
  projectsProjectPut,
  projectsTaskGet,
  projectsTaskList,
} from "../../subjects/projects.ts";
import type { AuthPlugin, AuthOptions } from "../plugins/auth.ts";
import { problems, relayOn, type Relay } from "../relay.ts";

const errors = problems(400, 401, 403, 404, 409, 413, 503, 504);
const credentials = { auth: { appkey: true } as AuthOptions, partition: true } as const;

/** The catalog and content routes of one kind: `display-items` or `key-parameters`. */
function kindRoutes(relay: Relay, auth: AuthPlugin, kind: CatalogKind) {
  const label = kind === CatalogKind.displayItems ? "display items" : "key parameters";
  return new Elysia({ name: `derrick-${kind}-routes`, normalize: false })
    .use(auth)
    .guard({ ...credentials, detail: { tags: [kind] } }, (app) =>
      app
        .get(`/v1/${kind}`, ({ set, request, query }) => relay({ set, request }, projectsCatalogList, { kind, query }), {
          query: CatalogQuery,
          detail: { summary: `Collection of ${label} (offset, limit ≤ 500, default 50; category filter)` },
          response: { 200: projectsCatalogList.reply, ...errors },
        })
        .put(
          `/v1/${kind}/:itemId`,
          ({ set, request, body, params }) => relay({ set, request }, projectsCatalogPut, { kind, itemId: params.itemId, body }),
          {
            params: ItemPath,
            body: CatalogItemBody,
            detail: { summary: `Add or replace one of the ${label} in the catalog (group projects.admins; 201 created, 200 replaced)` },
            response: { 200: projectsCatalogPut.reply, 201: projectsCatalogPut.reply, ...errors },
          },
        )
        .post(
          `/v1/projects/:projectId/${kind}/content/requests`,
          ({ set, request, body, params }) => relay({ set, request }, projectsContentRequest, { projectId: params.projectId, kind, body }),
          {
            params: ProjectPath,
            body: t.Optional(ContentRequestBody),
            detail: {
              summary: `Request ${label} content of a project: 202 {taskId, contentId}, Location of the task (members only; 429 past the requester's unfinished tasks, 503 when the queue is full, both with Retry-After)`,
            },
            response: { 202: projectsContentRequest.reply, ...problems(429), ...errors },
          },
        )
        .get(
          `/v1/projects/:projectId/${kind}/content/:contentId`,
          ({ set, request, params }) => relay({ set, request }, projectsContentGet, { ...params, kind }),
          {
            params: ContentPath,
            detail: { summary: `Result of a ${label} content request (409 before the task completes; 404 60 s after it completed)` },
            response: { 200: projectsContentGet.reply, ...errors },
          },
        )
        .get(
          `/v1/projects/:projectId/${kind}/content-parts/:contentPartId`,
          ({ set, request, params }) => relay({ set, request }, projectsContentPart, { ...params, kind }),
          {
            params: PartPath,
            detail: { summary: `One part (≤ 256 KiB of data) of a large ${label} content` },
            response: { 200: projectsContentPart.reply, ...errors },
          },
        ),
    );
}

export const projectRoutes = (_cfg: Config, bus: Bus, auth: AuthPlugin) => {
  const relay = relayOn(bus);
  return new Elysia({ name: "derrick-project-routes", normalize: false })
    .use(auth)
    .use(kindRoutes(relay, auth, CatalogKind.displayItems))
    .use(kindRoutes(relay, auth, CatalogKind.keyParameters))
    .guard({ ...credentials, detail: { tags: ["projects"] } }, (app) =>
      app
        .put(
          "/v1/projects/:projectId",
          ({ set, request, body, params }) => relay({ set, request }, projectsProjectPut, { projectId: params.projectId, body }),
          {
            params: ProjectPath,
            body: ProjectBody,
            detail: { summary: "Create or replace a project: name, members, values (group projects.admins; 201 created, 200 replaced)" },
            response: { 200: projectsProjectPut.reply, 201: projectsProjectPut.reply, ...errors },
          },
        )
        .get("/v1/projects/:projectId", ({ set, request, params }) => relay({ set, request }, projectsProjectGet, params), {
          params: ProjectPath,
          detail: { summary: "A project with members and values (members and projects.admins)" },
          response: { 200: projectsProjectGet.reply, ...errors },
        })
        .delete("/v1/projects/:projectId", ({ set, request, params }) => relay({ set, request }, projectsProjectDelete, params), {
          params: ProjectPath,
          detail: { summary: "Delete a project (group projects.admins); its queued tasks then fail" },
          response: { 204: projectsProjectDelete.reply, ...errors },
        })
        .put(
          "/v1/projects/:projectId/members/:memberId",
          ({ set, request, params }) => relay({ set, request }, projectsMemberPut, params),
          {
            params: MemberPath,
            detail: { summary: "Add a member (client id or user subject; group projects.admins) → 204" },
            response: { 204: projectsMemberPut.reply, ...errors },
          },
        )
        .delete(
          "/v1/projects/:projectId/members/:memberId",
          ({ set, request, params }) => relay({ set, request }, projectsMemberDelete, params),
          {
            params: MemberPath,
            detail: { summary: "Remove a member (group projects.admins) → 204" },
            response: { 204: projectsMemberDelete.reply, ...errors },
          },
        ),
    )
    .guard({ ...credentials, detail: { tags: ["tasks"] } }, (app) =>
      app
        .get(
          "/v2/projects/:projectId/tasks",
          ({ set, request, params, query }) => relay({ set, request }, projectsTaskList, { projectId: params.projectId, query }),
          {
            params: ProjectPath,
            query: TaskListQuery,
            detail: {
              summary:
                "The project's content tasks of the last 7 days, newest first (limit 1..100, default 20; before: the nextBefore of the previous page); members only",
            },
            response: { 200: projectsTaskList.reply, ...errors },
          },
        )
        .get("/v2/projects/:projectId/tasks/:taskId", ({ set, request, params }) => relay({ set, request }, projectsTaskGet, params), {
          params: TaskPath,
          detail: { summary: "State of one content task: queued, running, succeeded (expiresAt) or failed (error); members only" },
          response: { 200: projectsTaskGet.reply, ...errors },
        }),
    );
};
