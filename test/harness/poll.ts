/** Waits for a condition instead of sleeping: polls until `check` returns a truthy value or time runs out. */
export async function eventually<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
  throw new Error(`timed out waiting for ${options.what ?? "condition"}${last ? `: ${(last as Error).message}` : ""}`);
}
