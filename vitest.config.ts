import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Files that mostly wait for real time (content results live 60 s): started first, they overlap the
 * rest of the suite. Without a timing cache (a fresh clone, as in CI) vitest orders files by size, and
 * this small one ran last, alone, for a minute.
 */
const WAITING_FILES = ["test/projects/expiry.test.ts"];

class WaitingFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const waits = (file: TestSpecification) => WAITING_FILES.some((path) => file.moduleId.endsWith(path));
    return [...sorted.filter(waits), ...sorted.filter((file) => !waits(file))];
  }
}

export default defineConfig({
  test: {
    include: ["{actors,config,edge,subjects,sdk,platform,test}/**/*.test.ts"],
    exclude: ["node_modules/**", "bench/**"],
    // Each test file starts its own nats-server/redis-server; two at a time suits a 2-core machine.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    sequence: { sequencer: WaitingFirst },
  },
});
