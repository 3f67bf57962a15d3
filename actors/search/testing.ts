/** Records and requests for the search engine's unit tests. */
import type { StoredRecord } from "../../subjects/search.ts";
import type { SearchRequest } from "./backend.ts";
import { parseQuery } from "./query/parser.ts";
import type { RequestContext } from "../runtime/context.ts";

/** A search caller of `opendes` in the data group `data.<group>.viewers`, for handlers called directly. */
export const searchCaller = (group = "a"): RequestContext =>
  ({
    principal: { clientId: "c", subject: "s", groups: ["users.datalake.viewers", `data.${group}.viewers`] },
    partition: "opendes",
    requestId: "r",
    log: console,
  }) as unknown as RequestContext;

/** A record `opendes:well:<i>` of one kind, visible to the group `data.a.viewers`, with this data. */
export const testRecord = (i: number, data: Record<string, unknown>): StoredRecord => ({
  id: `opendes:well:${i}`,
  kind: "osdu:wks:master-data--Well:1.0.0",
  acl: { viewers: ["data.a.viewers@opendes.example.com"], owners: ["data.a.owners@opendes.example.com"] },
  data,
  version: 1,
  createUser: "test",
  createTime: "2026-01-01T00:00:00Z",
});

/** A request over every kind in `opendes` as a member of `data.a.viewers`, first page of 10. */
export const testRequest = (overrides: Partial<SearchRequest> = {}): SearchRequest => ({
  partition: "opendes",
  kinds: ["*:*:*:*"],
  query: parseQuery(""),
  access: { all: false, groups: ["data.a.viewers"], asOwner: false },
  sort: [],
  offset: 0,
  limit: 10,
  trackTotalCount: false,
  ...overrides,
});

/** Deterministic draws in [0, 1) from a seed (mulberry32): the same data on every run. */
export function seededRandom(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
