import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Native code and child processes: one process per file, never threads.
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ["test/global-setup.ts"],
    setupFiles: ["test/setup-share-group.ts"],
  },
});
