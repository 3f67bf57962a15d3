/**
 * Wiring of the `search` actor: opens (or rebuilds) this process's index replica, follows the
 * RECORDS stream into it, opens the cursor bucket and serves query, cursor, info, status and
 * health. Each search process holds its own replica (locked: two processes cannot share one file):
 * adding processes scales reads.
 */
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/nats-core";
import {
  searchCursorDelete,
  searchCursorQuery,
  searchHealth,
  searchInfo,
  searchQuery,
  searchStatus,
  type VersionInfo,
} from "../../subjects/search.ts";
import type { Config } from "../../config/index.ts";
import { buildInfo, gitOfBuild } from "../../platform/build-info.ts";
import { endpoint, endpointsWith, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { cursorQuery, deleteCursor, health, info, query, status, type SearchDeps } from "./handlers.ts";
import { lockIndexFile } from "./index-lock.ts";
import { ReplyCache } from "./reply-cache.ts";
import { followRecords, type Replica } from "./replica.ts";
import { SqliteBackend } from "./sqlite.ts";
import { openCursorStore, type CursorStore } from "./store.ts";

export const indexFileOf = (cfg: Config) => cfg.search.indexFile ?? join(cfg.dataDir, "search", "index.sqlite");

/**
 * A git date (`%cI` carries the committer's own offset, e.g. `+02:00`) as the RFC 3339 UTC form every
 * time value of the API takes (docs/contract.md: `2026-11-22T10:00:00.000Z`); undefined when there is none.
 */
function utcTime(value: string | undefined): string | undefined {
  const at = value === undefined ? Number.NaN : Date.parse(value);
  return Number.isNaN(at) ? undefined : new Date(at).toISOString();
}

/** OSDU VersionInfo of this build, read once. */
export function versionInfo(engine: { name: string; version: string }, natsVersion: string): VersionInfo {
  const build = buildInfo();
  return {
    groupId: "derrick",
    artifactId: "derrick-search",
    version: build.version,
    buildTime: utcTime(gitOfBuild(["log", "-1", "--format=%cI"])) ?? build.startedAt,
    branch: (process.env.DERRICK_BUILD_BRANCH || gitOfBuild(["rev-parse", "--abbrev-ref", "HEAD"])) ?? "unknown",
    commitId: build.commit ?? "unknown",
    commitMessage: (process.env.DERRICK_BUILD_COMMIT_MESSAGE || gitOfBuild(["log", "-1", "--format=%s"])) ?? "unknown",
    connectedOuterServices: [
      { name: engine.name, version: engine.version },
      { name: "nats-server", version: natsVersion },
    ],
  };
}

export async function startSearchActor(nc: NatsConnection, cfg: Config, options: RuntimeOptions): Promise<ServedActor> {
  const file = indexFileOf(cfg);
  const log = options.log.child({ actor: "search" });
  const lock = lockIndexFile(file);
  let backend: SqliteBackend | undefined;
  let replica: Replica | undefined;
  let cursors: CursorStore & { close(): void };
  try {
    backend = new SqliteBackend({
      file,
      mmapBytes: cfg.search.mmapBytes,
      onWarning: (message) => log.warn({ indexFile: file }, message),
    });
    replica = await followRecords(nc, backend, log, { storage: options.storage });
    cursors = await openCursorStore(nc, cfg.search.cursorTtlMs, options.storage, log);
  } catch (error) {
    await replica?.stop();
    backend?.close();
    lock.release();
    throw error;
  }
  const version = versionInfo(backend.engine, nc.info?.version ?? "unknown");
  const deps: SearchDeps = {
    backend,
    cursors,
    cursorLimit: cfg.search.cursorLimit,
    cursorPrincipalLimit: cfg.search.cursorPrincipalLimit,
    info: () => version,
    replies: new ReplyCache(() => backend.resultsVersion()),
    health: () => {
      const { following, restarts, skipped } = replica.health();
      return { following, appliedSeq: backend.appliedSeq(), restarts, skipped };
    },
    status: () => ({
      ...replica.health(),
      appliedSeq: backend.appliedSeq(),
      records: backend.recordCount(),
      indexFile: file,
      loading: backend.loading,
      indexing: backend.indexing,
    }),
  };
  const on = endpointsWith(deps);
  return serveActor(
    nc,
    {
      name: "search",
      description: "OSDU Search v2: Lucene queries, ranges, geo filters, aggregations and cursors over a local index of the RECORDS stream",
      work: () => ({ appliedSeq: backend.appliedSeq(), records: backend.recordCount() }),
      endpoints: [
        on(searchQuery, query),
        on(searchCursorQuery, cursorQuery),
        on(searchCursorDelete, deleteCursor),
        endpoint(searchInfo, () => info(deps)),
        endpoint(searchStatus, () => status(deps)),
        endpoint(searchHealth, () => health(deps)),
      ],
    },
    options,
    async () => {
      cursors.close();
      try {
        await replica.stop();
      } finally {
        // Even when finishing a bulk load failed: the file is closed and the next process may open it (and rebuilds it).
        backend.close();
        lock.release();
      }
    },
  );
}
