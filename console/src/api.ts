/**
 * The console's calls to derrick's public API, typed by the same TypeBox schemas the edge validates
 * with (type-only imports: nothing of TypeBox reaches the bundle). Each call takes the session (token,
 * appkey, partition), which the page holds in memory only; the client secret is sent once to
 * /v2/token and never kept.
 */
import type { Problem as ProblemDetails } from "../../subjects/errors.ts";
import type { TokenResponse } from "../../subjects/identity.ts";
import type { Principal } from "../../subjects/principal.ts";
import type {
  DeliveryList,
  EventAccepted,
  EventBody,
  NotificationType,
  SecretReply,
  Subscription,
  SubscriptionBase,
} from "../../subjects/notifications.ts";
import type { CatalogKind, ContentAccepted, Project, Task, TaskPage } from "../../subjects/projects.ts";
import type { AggregationTask } from "../../subjects/reporting.ts";
import type { QueryRequest, QueryResponse } from "../../subjects/search.ts";
import type { FleetStatus } from "../../subjects/system.ts";
import type { TwinGetReply, TwinPutReply, TwinUpdateBody } from "../../subjects/twins.ts";

export type Session = { token: string; appkey: string; partition: string; clientId?: string };

/** RFC 9457 problem details as derrick answers them; other answers (OAuth errors, a proxy's page) fill what they can. */
export type Problem = Partial<ProblemDetails> & { status: number };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
    readonly headers: Headers,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
  }
}

/** What the user reads for a refusal: a 403 names the group that would allow the call. */
export function explain(error: unknown): string {
  if (!(error instanceof ApiError)) return error instanceof Error ? error.message : String(error);
  const detail = error.problem.detail ?? error.problem.title ?? "";
  if (error.status === 403) return `Not allowed (403): ${detail}. Ask an administrator for the group it names.`;
  if (error.status === 401) return `Not signed in or the token expired (401): ${detail}`;
  const fields = (error.problem.errors ?? []).map((e) => `${e.pointer} ${e.message}`.trim()).filter(Boolean);
  return `${error.status}: ${detail}${fields.length ? ` (${fields.join("; ")})` : ""}`;
}

/** An error answer's problem details; a proxy's HTML or plain text becomes the detail as it is. */
function problemOf(text: string): Partial<Problem> {
  try {
    const body = JSON.parse(text) as unknown;
    if (body !== null && typeof body === "object") return body as Partial<Problem>;
  } catch {
    // not JSON: shown as sent, shortened
  }
  return { detail: text.slice(0, 200) };
}

type Options = { body?: unknown; headers?: Record<string, string>; partition?: boolean };
export type Answer<T> = { status: number; body: T; headers: Headers };

async function call<T>(session: Session, method: string, path: string, options: Options = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { authorization: `Bearer ${session.token}`, appkey: session.appkey, ...options.headers };
  if (options.partition !== false) headers["slb-partition-id"] = session.partition;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await response.text();
  if (!response.ok) throw new ApiError(response.status, { status: response.status, ...problemOf(text) }, response.headers);
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T, headers: response.headers };
}

const get = async <T>(session: Session, path: string, options?: Options) => (await call<T>(session, "GET", path, options)).body;
const send = async <T>(session: Session, method: string, path: string, body?: unknown, options?: Options) =>
  (await call<T>(session, method, path, { ...options, body })).body;
/** Tasks per page of a project's task list. */
const TASK_PAGE = 20;
const segment = encodeURIComponent;

/** The console's own settings from the edge: the partitions it serves. */
export type ConsoleSettings = { partitions: string[] };
export async function settings(): Promise<ConsoleSettings> {
  const response = await fetch("/console/settings.json");
  return (await response.json()) as ConsoleSettings;
}

/** Client credentials → bearer token (RFC 6749 §4.4). */
export async function signIn(clientId: string, clientSecret: string): Promise<TokenResponse> {
  const response = await fetch("/v2/token", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret }),
  });
  const body = (await response.json()) as TokenResponse & { error?: string; error_description?: string };
  if (!response.ok)
    throw new ApiError(response.status, { status: response.status, detail: body.error_description ?? body.error }, response.headers);
  return body;
}

export const whoami = (s: Session) => get<{ principal: Principal; partition: string }>(s, "/v1/system/whoami");
export const fleetStatus = (s: Session) => get<FleetStatus>(s, "/v1/system/status", { partition: false });

const NOTIFICATIONS = "/v1/notifications";
const subscriptionPath = (id: string) => `${NOTIFICATIONS}/subscriptions/${segment(id)}`;
export const notifications = {
  list: (s: Session) => get<Subscription[]>(s, `${NOTIFICATIONS}/subscriptions`),
  upsert: (s: Session, type: NotificationType, body: SubscriptionBase) =>
    send<Subscription>(s, "POST", `${NOTIFICATIONS}/subscriptions/types/${segment(type)}`, body),
  remove: (s: Session, id: string) => send<object>(s, "DELETE", subscriptionPath(id)),
  deliveries: (s: Session, id: string) => get<DeliveryList>(s, `${subscriptionPath(id)}/deliveries`),
  replay: (s: Session, id: string, eventId: string) =>
    send<EventAccepted>(s, "POST", `${subscriptionPath(id)}/deliveries/${segment(eventId)}/retry`),
  secret: (s: Session, id: string) => get<SecretReply>(s, `${subscriptionPath(id)}/secret`),
  rotate: (s: Session, id: string) => send<SecretReply>(s, "POST", `${subscriptionPath(id)}/secret/rotate`),
  publish: (s: Session, type: NotificationType, body: EventBody) =>
    send<EventAccepted>(s, "POST", `${NOTIFICATIONS}/events/${segment(type)}`, body),
};

export type TwinAddress = { organization: string; environment: string; twinId: string };
const twinPath = (a: TwinAddress) =>
  `/api/twin-properties/v1/${segment(a.organization)}/${segment(a.environment)}/${segment(a.twinId)}/twin-properties`;
export const twins = {
  get: async (s: Session, a: TwinAddress, group?: string) => {
    const answer = await call<TwinGetReply>(s, "GET", `${twinPath(a)}${group ? `?group=${segment(group)}` : ""}`, { partition: false });
    return { twin: answer.body, etag: answer.headers.get("etag") ?? undefined };
  },
  /** A PUT conditional on the group's desired version last read: 412 when someone changed it since. */
  put: async (s: Session, a: TwinAddress, body: TwinUpdateBody, etag: string | undefined) => {
    const answer = await call<TwinPutReply>(s, "PUT", twinPath(a), { body, partition: false, headers: etag ? { "if-match": etag } : {} });
    return { reply: answer.body, etag: answer.headers.get("etag") ?? undefined };
  },
};

export const search = (s: Session, query: QueryRequest) => send<QueryResponse>(s, "POST", "/api/search/v2/query", query);

const ASSESSMENTS = "/assessments/v1";
const TASK_POLL_MS = 500;
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/**
 * An aggregation's body: a large one is answered 202 with a task (docs/reporting.md), which is read
 * every 500 ms, each state passed to `progress`, until it ends; then its result is read.
 */
async function aggregation(s: Session, start: () => Promise<Answer<unknown>>, progress: (task: AggregationTask) => void) {
  const first = await start();
  if (first.status !== 202) return first.body as Record<string, unknown>;
  let task = first.body as AggregationTask;
  for (;;) {
    progress(task);
    if (task.state === "succeeded") return get<Record<string, unknown>>(s, task.result);
    if (task.state === "failed") throw new ApiError(500, { status: 500, detail: task.error ?? "the aggregation failed" }, new Headers());
    await sleep(TASK_POLL_MS);
    task = await get<AggregationTask>(s, `${ASSESSMENTS}/aggregationtasks/${segment(task.taskId)}`);
  }
}

type Progress = (task: AggregationTask) => void;
export const reporting = {
  prospect: (s: Session, id: string, progress: Progress) =>
    aggregation(s, () => call(s, "GET", `${ASSESSMENTS}/prospectanalysisaggregation/${segment(id)}`), progress),
  fullCycle: (s: Session, prospectAnalysisId: string, progress: Progress) =>
    aggregation(s, () => call(s, "POST", `${ASSESSMENTS}/fullcycleanalysisaggregation`, { body: { prospectAnalysisId } }), progress),
  scenarios: (s: Session, id: string, progress: Progress) =>
    aggregation(s, () => call(s, "GET", `${ASSESSMENTS}/prospectmultiplescenarioanalysisaggregation/${segment(id)}`), progress),
};

export const projects = {
  get: (s: Session, projectId: string) => get<Project>(s, `/v1/projects/${segment(projectId)}`),
  requestContent: (s: Session, projectId: string, kind: CatalogKind, ids?: string[]) =>
    send<ContentAccepted>(s, "POST", `/v1/projects/${segment(projectId)}/${kind}/content/requests`, ids?.length ? { ids } : {}),
  task: (s: Session, projectId: string, taskId: string) => get<Task>(s, `/v2/projects/${segment(projectId)}/tasks/${segment(taskId)}`),
  /** A page of the project's tasks, newest first; `before` is the previous page's `nextBefore`. */
  tasks: (s: Session, projectId: string, before?: string) =>
    get<TaskPage>(s, `/v2/projects/${segment(projectId)}/tasks?limit=${TASK_PAGE}${before ? `&before=${segment(before)}` : ""}`),
};
