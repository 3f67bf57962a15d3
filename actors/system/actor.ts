/** Wiring of the `system` actor: three request/reply endpoints, no storage. */
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { EchoBody } from "../../subjects/system.ts";
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
        endpoint({ name: "ping", subject: subjects.system.ping(), handler: () => ping(instance, build.version) }),
        endpoint({ name: "info", subject: subjects.system.info(), handler: () => info(build) }),
        endpoint({ name: "echo", subject: subjects.system.echo(), input: EchoBody, handler: (body) => echo(body) }),
      ],
    },
    options,
  );
}
