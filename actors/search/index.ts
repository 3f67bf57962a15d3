/** Search (OSDU Search v2) over a local index of the RECORDS stream: the `search` actor. */
export { startSearchActor, indexFileOf, versionInfo } from "./actor.ts";
export { SqliteBackend } from "./sqlite.ts";
export type { SearchBackend, SearchRequest, SearchResult } from "./backend.ts";
export { toIndexedDoc } from "./documents.ts";
export { parseQuery, QuerySyntaxError } from "./query/parser.ts";
export { planSearch } from "./validate.ts";
export { followRecords, changeOf } from "./replica.ts";
