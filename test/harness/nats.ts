/**
 * A real nats-server with JetStream for one test file: free port, temporary store, removed after.
 * DEBUG_NATS=1 prints the server's log (a crash's stack trace shows there).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer, type NatsServer } from "../../platform/nats-server.ts";

export type TestNats = NatsServer & {
  dir: string;
  /**
   * Stops the server, runs `whileDown` (a test's look at its clients, or a change to the store), and
   * starts it again on the same port and store; clients reconnect as to a restarted server.
   */
  restart(whileDown?: () => void | Promise<void>): Promise<void>;
  cleanup(): Promise<void>;
};

export async function startTestNats(
  options: { port?: number; dir?: string; extraConfig?: string; maxFileStore?: string } = {},
): Promise<TestNats> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "derrick-nats-"));
  const { port, dir: _dir, ...rest } = options;
  const start = (at: number) => startNatsServer({ dir, port: at, verbose: !!process.env.DEBUG_NATS, ...rest });
  let server = await start(port ?? -1);
  return {
    url: server.url,
    port: server.port,
    get process() {
      return server.process;
    },
    stop: () => server.stop(),
    kill: () => server.kill(),
    dir,
    async restart(whileDown) {
      await server.stop();
      await whileDown?.();
      server = await start(server.port);
    },
    async cleanup() {
      await server.stop();
      if (!options.dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
