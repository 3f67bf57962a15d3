/** Wiring of the `system` actor: liveness, build, echo and the fleet's status; no storage. */
import type { NatsConnection } from "@nats-io/nats-core";
import { nuid } from "@nats-io/nats-core";
import { OPERATORS_GROUP, systemEcho, systemInfo, systemPing, systemStatus } from "../../subjects/system.ts";
import { requireGroup } from "../runtime/context.ts";
import { FleetWatch, registerFleetGauges } from "./status.ts";
import { buildInfo } from "../../platform/build-info.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { echo, info, ping } from "./handlers.ts";

export async function startSystemActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const build = buildInfo();
  const instance = nuid.next();
  const fleet = new FleetWatch();
  if (options.metrics) registerFleetGauges(options.metrics, () => fleet.gather(nc));
  return serveActor(
    nc,
    {
      name: "system",
      version: build.version,
      description: "liveness, build information, an echo for benchmarks and the fleet's status for operators",
      endpoints: [
        endpoint(systemPing, () => ping(instance, build.version)),
        endpoint(systemInfo, () => info(build)),
        endpoint(systemEcho, (body) => echo(body)),
        // Through the edge a caller needs derrick.operators; an internal NATS caller (`derrick status`) is trusted, as for apps.
        endpoint(systemStatus, (_input, ctx) => {
          if (ctx.principal) requireGroup(ctx, OPERATORS_GROUP);
          return fleet.gather(nc);
        }),
      ],
    },
    options,
  );
}
