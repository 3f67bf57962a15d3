import { describe, expect, it } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { IndexFileInUse, lockIndexFile } from "./index-lock.ts";

const lockModule = fileURLToPath(new URL("./index-lock.ts", import.meta.url));

/** Tries the lock from another process: "locked" when it gets it, else the error's name. */
function tryFromAnotherProcess(file: string): string {
  const script = `import { lockIndexFile } from ${JSON.stringify(lockModule)}; try { lockIndexFile(${JSON.stringify(file)}); console.log("locked"); } catch (e) { console.log(e.name); }`;
  const out = spawnSync(process.execPath, ["-e", script], { encoding: "utf8" });
  return out.stdout.trim() || out.stderr;
}

describe("search index file lock", () => {
  it("search - an index file is held by one process at a time; the lock goes when released (or when the process ends)", () => {
    const dir = mkdtempSync(join(tmpdir(), "derrick-lock-"));
    const file = join(dir, "search", "index.sqlite");
    try {
      const lock = lockIndexFile(file);
      expect(() => lockIndexFile(file)).toThrow(IndexFileInUse);
      expect(() => lockIndexFile(file)).toThrow(
        `the search index file ${file} is in use by another search process; give each search process its own DERRICK_DATA_DIR or DERRICK_SEARCH_INDEX_FILE`,
      );
      expect(tryFromAnotherProcess(file)).toBe("IndexFileInUse");
      // Another file is another lock.
      lockIndexFile(join(dir, "other.sqlite")).release();
      lock.release();
      // The other process takes it and ends without releasing it: the lock ends with it.
      expect(tryFromAnotherProcess(file)).toBe("locked");
      lockIndexFile(file).release();
      expect(() => lockIndexFile(":memory:").release()).not.toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
