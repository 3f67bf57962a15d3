/** Wiring of the `twins` actor: per-twin KV buckets and the put/get/delete endpoints. */
import type { NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { TwinDeleteRequest, TwinGetRequest, TwinPutRequest } from "../../subjects/twins.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { deleteTwin, getTwins, putTwins, type TwinsDeps } from "./handlers.ts";
import { kvTwinStores } from "./store.ts";

export async function startTwinsActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const deps: TwinsDeps = { stores: kvTwinStores(nc) };
  const names = subjects.twins;
  return serveActor(
    nc,
    {
      name: "twins",
      description: "device twin properties (desired/reported) in per-twin JetStream KV buckets",
      endpoints: [
        endpoint({ name: "put", subject: names.put(), input: TwinPutRequest, handler: (input, ctx) => putTwins(input, ctx, deps) }),
        endpoint({ name: "get", subject: names.get(), input: TwinGetRequest, handler: (input, ctx) => getTwins(input, ctx, deps) }),
        endpoint({ name: "delete", subject: names.delete(), input: TwinDeleteRequest, handler: (input, ctx) => deleteTwin(input, ctx, deps) }),
      ],
    },
    options,
  );
}
