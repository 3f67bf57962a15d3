/**
 * Bundles the console (index.html and what it imports: Preact, uPlot, the views) with Bun's bundler,
 * in memory: the edge serves exactly these files, so nothing is built ahead of `npm start` and no
 * stale output can be served. `bun console/build.ts` prints each file's size, plain and gzipped.
 */
import { fileURLToPath } from "node:url";

/** One built file, as the edge serves it under /console/. */
export type ConsoleFile = { name: string; bytes: Uint8Array<ArrayBuffer>; type: string; hash: string };

const ENTRY = fileURLToPath(new URL("./index.html", import.meta.url));

export async function buildConsole(): Promise<ConsoleFile[]> {
  const result = await Bun.build({
    entrypoints: [ENTRY],
    target: "browser",
    minify: true,
    // Preact's production build: no dev-only JSX source objects, no debug hooks.
    define: { "process.env.NODE_ENV": '"production"' },
    publicPath: "/console/",
    naming: { entry: "[name].[ext]", chunk: "assets/[name]-[hash].[ext]", asset: "assets/[name]-[hash].[ext]" },
    throw: false,
  });
  if (!result.success) throw new Error(`the console does not build: ${result.logs.map((log) => log.message).join("; ")}`);
  return Promise.all(
    result.outputs.map(async (output) => ({
      name: output.path.replace(/^\.\//, ""),
      bytes: new Uint8Array(await output.arrayBuffer()),
      type: output.type,
      hash: output.hash ?? String(Bun.hash(await output.arrayBuffer())),
    })),
  );
}

if (import.meta.main) {
  const started = performance.now();
  const files = await buildConsole();
  const ms = Math.round(performance.now() - started);
  let plain = 0;
  let gzip = 0;
  for (const file of files) {
    const zipped = Bun.gzipSync(file.bytes).length;
    plain += file.bytes.length;
    gzip += zipped;
    console.log(`${file.name.padEnd(40)} ${String(file.bytes.length).padStart(8)} B  ${String(zipped).padStart(7)} B gzip`);
  }
  console.log(`${"total".padEnd(40)} ${String(plain).padStart(8)} B  ${String(gzip).padStart(7)} B gzip  (built in ${ms} ms)`);
}
