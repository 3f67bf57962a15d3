/**
 * Handlers of the `search` actor: OSDU /query, /query_with_cursor (open, page, close) and /info. Access is decided here,
 * so NATS callers meet it too: a search role and a data.* group (or users.data.root), else 401 naming the groups, then
 * the backend's ACL filter (queryAsOwner narrows it to owners). Cursors keep their plan, issuer and last row (keyset
 * paging, stable across replicas) in KV, 90 s after their last use (docs/search.md#cursors).
 */
import { randomBytes } from "node:crypto";
import { DerrickError, EncodedJson, reply, type Reply, type SharedPrincipal } from "../../subjects/index.ts";
import {
  CursorQueryRequest,
  DATA_ROOT_GROUP,
  NOT_AUTHORIZED,
  QueryRequest,
  SEARCH_ROLES,
  missingGroupDetail,
  type CursorQueryResponse,
  type CursorRef,
  type QueryResponse,
  type SearchHealth,
  type SearchQueryMessage,
  type SearchStatus,
  type VersionInfo,
} from "../../subjects/search.ts";
import { caller, type Caller, type RequestContext } from "../runtime/context.ts";
import type { Access, SearchBackend, SearchHit, SearchRequest } from "./backend.ts";
import { aclGroup, holdsGroup } from "./documents.ts";
import { readsClock, replyKey, type ReplyCache } from "./reply-cache.ts";
import { Highlighter, project } from "./results.ts";
import type { CursorStore } from "./store.ts";
import { decodeSearchBody, parsePlanQuery, planSearch, type SearchPlan } from "./validate.ts";
import type { QueryNode } from "./query/ast.ts";

export type SearchDeps = {
  backend: SearchBackend;
  cursors: CursorStore;
  /** Open cursors per partition. */
  cursorLimit: number;
  /** Open cursors per principal in a partition: one caller cannot take the partition's whole quota. */
  cursorPrincipalLimit: number;
  info: () => VersionInfo;
  status: () => SearchStatus;
  /** Whether the replica follows the RECORDS stream; cheap (no index reads), asked by the public readiness check. */
  health: () => SearchHealth;
  /** Replies of repeated queries until the index changes (reply-cache.ts); none: every query is computed. */
  replies?: ReplyCache<QueryResponse>;
};

const CURSOR_FORMAT = /^[0-9A-F]{32}$/;
const encoder = new TextEncoder();

/** OSDU's 401 for a caller without a search role or a data group, naming what would allow the request. */
export const accessDenied = (detail: string) => new DerrickError(401, detail, { title: "Access denied", type: "access-denied" });
const NO_ROLE = missingGroupDetail("searching", SEARCH_ROLES);
const NO_DATA_GROUP = `${NOT_AUTHORIZED}: searching needs a data group (data.*) or ${DATA_ROOT_GROUP}`;
/** OSDU's words; `errors` names the cursor the request gave (`/body/cursor` or `/params/cursor`), as every 400 names its field. */
const cursorNotFound = (pointer: string) =>
  new DerrickError(400, "The given cursor is invalid or expired", {
    title: "Can't find the given cursor",
    type: "cursor-not-found",
    errors: [{ pointer, message: "is invalid or expired" }],
  });
const cursorForbidden = () =>
  new DerrickError(403, "cursor sharing is forbidden", {
    title: "cursor issuer doesn't match the cursor consumer",
    type: "cursor-forbidden",
  });
/** OSDU's answer when too many cursors are open; the same whether the partition's or the caller's limit was reached. */
const tooManyCursors = () =>
  new DerrickError(429, "Too many cursor requests, please re-try after some time.", {
    title: "Too many requests",
    headers: { "Retry-After": "10" },
  });

/** OSDU's entitlements check fails for a caller in no data.* group ("no data group found"), answered as 401 like a missing role. */
const hasDataGroup = (p: SharedPrincipal) => p.groups.some((g) => aclGroup(g) === DATA_ROOT_GROUP || aclGroup(g).startsWith("data."));

function searchCaller(ctx: RequestContext): Caller {
  // OSDU answers a missing role (and a missing token) with 401 "Access denied".
  if (!ctx.principal) throw accessDenied(NO_ROLE);
  const { refusal } = rightsOf(ctx.principal);
  if (refusal) throw accessDenied(refusal);
  return caller(ctx, "invalid or empty data partition provided");
}

/** What a caller's groups decide for every request: refused (and why), or the access its queries see with. */
type Rights = { refusal: string | undefined; visible: Access };
const rightsByPrincipal = new WeakMap<SharedPrincipal, Rights>();

/**
 * A caller's rights, worked out once per principal object: the actor shares one frozen principal among the requests
 * that carry it, so a caller's repeated queries skip the group scans (each `aclGroup` a new string).
 */
function rightsOf(principal: SharedPrincipal): Rights {
  const held = rightsByPrincipal.get(principal);
  if (held) return held;
  const refusal = !SEARCH_ROLES.some((role) => holdsGroup(principal.groups, role))
    ? NO_ROLE
    : hasDataGroup(principal)
      ? undefined
      : NO_DATA_GROUP;
  const rights = { refusal, visible: accessOf(principal, false) };
  // An object that may still change (a caller's own, in tests) is worked out each time.
  if (Object.isFrozen(principal) && Object.isFrozen(principal.groups)) rightsByPrincipal.set(principal, rights);
  return rights;
}

const principalId = (p: SharedPrincipal) => `${p.clientId}/${p.subject}`;

const ALL: Access = Object.freeze({ all: true });

/** Frozen: one access is shared by a caller's requests (rightsOf), and the reply cache keys on it (reply-cache.ts). */
function accessOf(principal: SharedPrincipal, asOwner: boolean): Access {
  if (holdsGroup(principal.groups, DATA_ROOT_GROUP)) return ALL;
  return Object.freeze({ all: false, groups: Object.freeze([...new Set(principal.groups.map(aclGroup))]), asOwner });
}

function requestOf(plan: SearchPlan, ast: QueryNode, partition: string, access: Access): SearchRequest {
  return {
    partition,
    kinds: plan.kinds,
    query: ast,
    ...(plan.spatial ? { spatial: plan.spatial } : {}),
    access,
    sort: plan.sort,
    offset: plan.offset,
    limit: plan.limit,
    trackTotalCount: plan.trackTotalCount,
    ...(plan.aggregateBy ? { aggregateBy: plan.aggregateBy, ...(plan.aggregateNested ? { aggregateElements: true } : {}) } : {}),
  };
}

function results(hits: SearchHit[], plan: SearchPlan, ast: QueryNode): Array<Record<string, unknown>> {
  // One highlighter for the page: its globs compiled once, its work bounded (HIGHLIGHT_WORK_MAX).
  const highlighter = new Highlighter(plan.highlightedFields, ast);
  return hits.map(({ doc }) => {
    const out = project(doc, plan.returnedFields);
    const marks = highlighter.highlight(doc);
    return marks ? { ...out, highlight: marks } : out;
  });
}

export function query(input: SearchQueryMessage, ctx: RequestContext, deps: SearchDeps): EncodedJson<QueryResponse> {
  const { principal, partition } = searchCaller(ctx);
  // The caller's access is part of the key (what they may see); queryAsOwner is part of the body.
  const { visible } = rightsOf(principal);
  const key = deps.replies ? replyKey(partition, visible, input.body) : undefined;
  const kept = key === undefined ? undefined : deps.replies!.get(key);
  if (kept) return kept;
  const body = decodeSearchBody(QueryRequest, input.body);
  const { plan, ast } = planSearch(body, false);
  const access = visible.all ? visible : { ...visible, asOwner: plan.queryAsOwner };
  const found = deps.backend.search(requestOf(plan, ast, partition, access));
  // Whole documents, no highlight: the stored JSON goes out as it is, the bytes JSON.stringify would write, without parsing it.
  const wholeDocuments =
    plan.returnedFields.length === 0 && plan.highlightedFields.length === 0 && found.hits.every((hit) => hit.json !== undefined);
  // Only a reply kept is ever answered from the cache: deciding here, on the parsed query, is enough.
  const keep = key !== undefined && !readsClock(ast);
  const bytes = encoder.encode(
    wholeDocuments
      ? `{"results":[${found.hits.map((hit) => hit.json).join(",")}],"aggregations":${JSON.stringify(found.aggregations)},"phraseSuggestions":[],"totalCount":${found.total}}`
      : JSON.stringify({
          results: results(found.hits, plan, ast),
          aggregations: found.aggregations,
          phraseSuggestions: [],
          totalCount: found.total,
        }),
  );
  if (!keep) return new EncodedJson(bytes);
  const answer = new EncodedJson<QueryResponse>(bytes, true);
  // Refused (too large, or the index changed meanwhile): the same query may still be kept, and compressed, another time.
  return deps.replies!.set(key, answer) ? answer : new EncodedJson(bytes, false, true);
}

export async function cursorQuery(input: SearchQueryMessage, ctx: RequestContext, deps: SearchDeps): Promise<CursorQueryResponse> {
  const { principal, partition } = searchCaller(ctx);
  const body = decodeSearchBody(CursorQueryRequest, input.body);
  // OSDU: Strings.isNullOrEmpty(cursor) is a first call.
  if (body.cursor) return nextPage(body.cursor, principal, partition, deps);

  const { plan, ast } = planSearch(body, true);
  const issuer = principalId(principal);
  const [open, owned] = await Promise.all([
    deps.cursors.count(partition, deps.cursorLimit),
    deps.cursors.countOwned(partition, issuer, deps.cursorPrincipalLimit),
  ]);
  if (open >= deps.cursorLimit || owned >= deps.cursorPrincipalLimit) throw tooManyCursors();
  const found = deps.backend.search({ ...requestOf(plan, ast, partition, accessOf(principal, plan.queryAsOwner)), keyset: {} });
  if (found.hits.length === 0) return { results: [], totalCount: found.total };
  const cursor = randomBytes(16).toString("hex").toUpperCase();
  await deps.cursors.put(partition, cursor, {
    principal: issuer,
    plan,
    after: found.hits[found.hits.length - 1]!.position,
    totalCount: found.total,
    exhausted: found.hits.length < plan.limit,
  });
  return { cursor, results: results(found.hits, plan, ast), totalCount: found.total };
}

async function nextPage(cursor: string, principal: SharedPrincipal, partition: string, deps: SearchDeps): Promise<CursorQueryResponse> {
  if (!CURSOR_FORMAT.test(cursor)) throw cursorNotFound("/body/cursor");
  const state = await deps.cursors.get(partition, cursor);
  if (!state) throw cursorNotFound("/body/cursor");
  if (state.principal !== principalId(principal)) throw cursorForbidden();
  if (state.exhausted) {
    await deps.cursors.delete(partition, cursor, state.principal);
    return { results: [], totalCount: state.totalCount };
  }
  const ast = parsePlanQuery(state.plan.query);
  const found = deps.backend.search({
    ...requestOf(state.plan, ast, partition, accessOf(principal, state.plan.queryAsOwner)),
    skipCount: true,
    keyset: state.after ? { after: state.after } : {},
  });
  if (found.hits.length === 0) {
    await deps.cursors.delete(partition, cursor, state.principal);
    return { results: [], totalCount: state.totalCount };
  }
  await deps.cursors.put(partition, cursor, {
    ...state,
    after: found.hits[found.hits.length - 1]!.position,
    exhausted: found.hits.length < state.plan.limit,
  });
  return { cursor, results: results(found.hits, state.plan, ast), totalCount: state.totalCount };
}

export async function deleteCursor(input: CursorRef, ctx: RequestContext, deps: SearchDeps): Promise<Reply<undefined>> {
  const { principal, partition } = searchCaller(ctx);
  if (!CURSOR_FORMAT.test(input.cursor)) throw cursorNotFound("/params/cursor");
  const state = await deps.cursors.get(partition, input.cursor);
  if (!state) throw cursorNotFound("/params/cursor");
  if (state.principal !== principalId(principal)) throw cursorForbidden();
  await deps.cursors.delete(partition, input.cursor, state.principal);
  return reply(undefined, 200);
}

export const info = (deps: SearchDeps): VersionInfo => deps.info();
export const status = (deps: SearchDeps): SearchStatus => deps.status();
export const health = (deps: SearchDeps): SearchHealth => deps.health();
