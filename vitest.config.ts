import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{actors,config,edge,subjects,sdk,platform,test}/**/*.test.ts"],
    exclude: ["node_modules/**", "bench/**"],
    // Each test file starts its own nats-server/redis-server; two at a time suits a 2-core machine.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
  },
});
