import { describe, expect } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { natsTest } from "../harness/fixture.ts";
import { startSearchDerrick } from "./helpers.ts";

const it = natsTest();

/** Whether this process maps the file itself (its `-shm` beside it is WAL's, always mapped): the harness boots derrick in the test's own process. */
const mapped = (file: string) =>
  readFileSync("/proc/self/maps", "utf8")
    .split("\n")
    .some((line) => line.endsWith(` ${file}`));

describe("search index memory maps", () => {
  // SQLite maps a file at its first page read from the file itself (pages still in the WAL are read there), so at start
  // the default maps at least one of the two: enough to show that the check sees maps, and that 0 leaves them out.
  it("search - DERRICK_SEARCH_MMAP_BYTES reaches the actor: 0 maps neither index file, the default maps them", async ({ nats }) => {
    for (const [env, expected] of [
      [{ DERRICK_SEARCH_MMAP_BYTES: "0" }, false],
      [{}, true],
    ] as const) {
      const derrick = await startSearchDerrick(nats, env);
      try {
        const files = ["index.sqlite", "index.lookup.sqlite"].map((name) => join(derrick.dataDir, "search", name));
        expect(files.some(mapped)).toBe(expected);
      } finally {
        await derrick.cleanup();
      }
    }
  });
});
