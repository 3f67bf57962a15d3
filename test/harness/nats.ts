/**
 * A real nats-server with JetStream for one test file: free port, temporary store, removed after.
 * DEBUG_NATS=1 prints the server's log (a crash's stack trace shows there).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";

export type TestNats = NatsServer & { dir: string; cleanup(): Promise<void> };

export async function startTestNats(
  options: { port?: number; dir?: string; extraConfig?: string; maxFileStore?: string } = {},
): Promise<TestNats> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "derrick-nats-"));
  const { port, dir: _dir, ...rest } = options;
  const server = await startNatsServer({ dir, port: port ?? -1, verbose: !!process.env.DEBUG_NATS, ...rest });
  return {
    ...server,
    dir,
    async cleanup() {
      await server.stop();
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
