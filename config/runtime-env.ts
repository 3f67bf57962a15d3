/**
 * The runtime's own variables derrick runs best with (docs/operations.md#the-memory-allocator). Bun reads them at
 * process start, before any of derrick's code runs: derrick cannot set them, only say at start that they are missing.
 */
export const RECOMMENDED_RUNTIME_ENV: Readonly<Record<string, string>> = Object.freeze({
  MIMALLOC_PURGE_DELAY: "1000",
  MIMALLOC_PURGE_HOLES: "0",
});

/** The recommended variables an environment leaves unset; a value an operator chose is theirs to keep. */
export function unsetRuntimeVariables(env: Readonly<Record<string, string | undefined>>): string[] {
  return Object.keys(RECOMMENDED_RUNTIME_ENV).filter((name) => !env[name]);
}
