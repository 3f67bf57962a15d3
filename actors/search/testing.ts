/** Records for the search engine's unit tests. */
import type { StoredRecord } from "../../subjects/search.ts";

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
