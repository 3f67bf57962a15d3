/**
 * The runtime's own variables derrick runs best with (docs/operations.md#the-memory-allocator). Bun reads them at
 * process start, before any of derrick's code runs: derrick cannot set them, only say at start that they are missing.
 */
export const RECOMMENDED_RUNTIME_ENV = Object.freeze({
  MIMALLOC_PURGE_DELAY: "1000",
  MIMALLOC_PURGE_HOLES: "0",
} as const satisfies Record<string, string>);

export type RuntimeVariable = keyof typeof RECOMMENDED_RUNTIME_ENV;

/**
 * The recommended variables an environment leaves unset or empty. Empty counts as missing: mimalloc reads an empty
 * value as 1 (a 1 ms purge delay), which no one means. Any other value is an operator's choice and theirs to keep.
 */
export function unsetRuntimeVariables(env: Readonly<Record<string, string | undefined>>): RuntimeVariable[] {
  return (Object.keys(RECOMMENDED_RUNTIME_ENV) as RuntimeVariable[]).filter((name) => !env[name]);
}
