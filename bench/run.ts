/** `npm run bench [-- name…]`: runs every bench/*.bench.ts (or the named ones), one process each. */
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { RECOMMENDED_RUNTIME_ENV, unsetRuntimeVariables } from "../config/index.ts";

const dir = fileURLToPath(new URL(".", import.meta.url));
const wanted = process.argv.slice(2);
const benches = readdirSync(dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)));
let failed = 0;
for (const file of benches) {
  console.log(`\n### ${file}`);
  // Benches start derrick in their own process: with the allocator settings `npm start` uses (docs/operations.md#the-memory-allocator).
  const env = { ...process.env };
  for (const name of unsetRuntimeVariables(process.env)) env[name] = RECOMMENDED_RUNTIME_ENV[name];
  const proc = Bun.spawn([process.execPath, `${dir}${file}`], { stdout: "inherit", stderr: "inherit", env });
  if ((await proc.exited) !== 0) failed++;
}
process.exit(failed ? 1 : 0);
