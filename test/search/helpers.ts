/** Shared pieces of the search tests: clients with data groups, record fixtures, HTTP helpers. */
import { TEST_CLIENTS, clientToken, eventually, startDerrick, testClient, type TestDerrick, type TestNats } from "../harness/index.ts";
import { derrickTest } from "../harness/fixture.ts";
import { json } from "../harness/json.ts";
import type { ActorName } from "../../config/index.ts";

/** Clients with distinct data groups (ACL tests) besides the harness's alpha/beta/admin. */
export const SEARCH_CLIENTS = {
  writer: testClient("writer", [
    "users.datalake.editors",
    "users.datalake.viewers",
    "data.north.owners",
    "data.south.owners",
    "data.north.viewers",
    "data.south.viewers",
  ]),
  north: testClient("north", ["users.datalake.viewers", "data.north.viewers"]),
  south: testClient("south", ["users.datalake.viewers", "data.south.viewers"]),
  southOwner: testClient("southOwner", ["users.datalake.editors", "data.south.owners"]),
  root: testClient("root", ["users.datalake.viewers", "users.data.root"]),
  norole: testClient("norole", ["data.north.viewers"]),
  /** A search role and no data.* group: OSDU refuses such a caller (401), it does not answer empty. */
  nodata: testClient("nodata", ["users.datalake.viewers"]),
  /** An editor in users.data.root: may replace records it does not own. */
  rootEditor: testClient("rootEditor", ["users.datalake.editors", "users.data.root"]),
  /** Groups as OSDU's entitlements service names them in tokens: `<group>@<partition>.<domain>`. */
  northEmail: testClient("northEmail", ["users.datalake.viewers@opendes.example.com", "data.north.viewers@opendes.example.com"]),
  rootEmail: testClient("rootEmail", ["users.datalake.editors@opendes.example.com", "users.data.root@opendes.example.com"]),
  /** An editor owning OSDU's default data groups, as the OSDU SDK's examples write records. */
  sdk: testClient("sdk", ["users.datalake.editors", "data.default.owners", "data.default.viewers"]),
  /** users.datalake.ops holds OSDU's service.storage.admin: it may purge records it owns. */
  ops: testClient("ops", ["users.datalake.ops", "data.default.owners"]),
  /** users.datalake.ops owning other records than the default ones. */
  opsNorth: testClient("opsNorth", ["users.datalake.ops", "data.north.owners"]),
};
export type SearchClient = keyof typeof SEARCH_CLIENTS;

export const NORTH_ACL = { viewers: ["data.north.viewers@opendes.example.com"], owners: ["data.north.owners@opendes.example.com"] };
export const SOUTH_ACL = { viewers: ["data.south.viewers@opendes.example.com"], owners: ["data.south.owners@opendes.example.com"] };
export const WELL = "osdu:wks:master-data--Well:1.0.0";
export const WELLBORE = "osdu:wks:master-data--Wellbore:1.0.0";

/** A well the north group may read, with a legal tag, named `name`. */
export const northWell = (id: string, name: string) => ({
  id,
  kind: WELL,
  acl: NORTH_ACL,
  legal: { legaltags: ["opendes-public"], otherRelevantDataCountries: ["NO"] },
  data: { Name: name },
});

/** Storage and search behind the edge, with the search clients seeded besides the harness's. */
const SEARCH_ACTORS: ActorName[] = ["identity", "storage", "search"];
const searchEnv = (env: Record<string, string>) => ({
  DERRICK_CLIENTS: JSON.stringify([...Object.values(TEST_CLIENTS), ...Object.values(SEARCH_CLIENTS)]),
  ...env,
});

export function startSearchDerrick(nats: TestNats, env: Record<string, string> = {}, dataDir?: string): Promise<TestDerrick> {
  return startDerrick(nats, { actors: SEARCH_ACTORS, env: searchEnv(env), ...(dataDir ? { dataDir } : {}) });
}

/** A file's derrick as startSearchDerrick starts one. */
export const searchTest = (env: Record<string, string> = {}) => derrickTest({ actors: SEARCH_ACTORS, env: searchEnv(env) });

const tokens = new WeakMap<TestDerrick, Map<string, string>>();

export async function tokenOf(derrick: TestDerrick, client: SearchClient): Promise<string> {
  let cache = tokens.get(derrick);
  if (!cache) tokens.set(derrick, (cache = new Map()));
  const hit = cache.get(client);
  if (hit) return hit;
  const token = await clientToken(derrick.url, SEARCH_CLIENTS[client]);
  cache.set(client, token);
  return token;
}

/** Calls the edge as one of the search clients (bearer token only, OSDU partition header). */
export async function api(
  derrick: TestDerrick,
  path: string,
  options: { as?: SearchClient | null; method?: string; body?: unknown; partition?: string | null } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  const as = options.as === undefined ? "writer" : options.as;
  if (as) headers.authorization = `Bearer ${await tokenOf(derrick, as)}`;
  if (options.partition !== null) headers["data-partition-id"] = options.partition ?? "opendes";
  if (options.body !== undefined) headers["content-type"] = "application/json";
  return fetch(`${derrick.url}${path}`, {
    method: options.method ?? (options.body !== undefined ? "POST" : "GET"),
    headers,
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
}

export type Page = {
  results: Array<Record<string, any>>;
  totalCount: number;
  aggregations?: Array<{ key: string; count: number }>;
  cursor?: string;
};

export async function searchOk(derrick: TestDerrick, body: Record<string, unknown>, as: SearchClient = "writer"): Promise<Page> {
  const res = await api(derrick, "/api/search/v2/query", { as, body: { kind: "*:*:*:*", ...body } });
  if (res.status !== 200) throw new Error(`query ${JSON.stringify(body)}: ${res.status} ${await res.text()}`);
  return json<Page>(res);
}

/** Waits until `query` finds `count` records (as the writer unless `as` names another client). */
export const untilFound = (
  derrick: TestDerrick,
  query: string,
  count: number,
  what: string,
  options: { as?: SearchClient; timeoutMs?: number } = {},
) => eventually(async () => (await searchOk(derrick, { query }, options.as)).totalCount === count, { what, timeoutMs: options.timeoutMs });

export async function putRecords(
  derrick: TestDerrick,
  records: unknown[],
  as: SearchClient = "writer",
): Promise<{ recordIds: string[]; recordIdVersions: string[]; recordCount: number }> {
  const res = await api(derrick, "/api/storage/v2/records", { as, method: "PUT", body: records });
  if (res.status !== 201) throw new Error(`put records: ${res.status} ${await res.text()}`);
  return json<{ recordIds: string[]; recordIdVersions: string[]; recordCount: number }>(res);
}

export const ids = (page: Page) => page.results.map((r) => r.id as string).sort();
