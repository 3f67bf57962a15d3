/** Wiring of the `system` actor: three request/reply endpoints, no storage. */
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import { systemEcho, systemInfo, systemPing } from "../../subjects/system.ts";
import { buildInfo } from "../../platform/build-info.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { echo, info, ping } from "./handlers.ts";

export async function startSystemActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const build = buildInfo();
  const instance = nuid.next();
  return serveActor(
    nc,
    {
      name: "system",
      version: build.version,
      description: "liveness, build information and an echo for benchmarks",
      endpoints: [
        endpoint(systemPing, () => ping(instance, build.version)),
        endpoint(systemInfo, () => info(build)),
        endpoint(systemEcho, (body) => echo(body)),
      ],
    },
    options,
  );
}
