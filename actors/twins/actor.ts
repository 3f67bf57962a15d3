/** Wiring of the `twins` actor: per-twin KV buckets and the put/get/delete/ensure endpoints. */
import { nuid, RequestError, type NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { twinsDelete, twinsEnsure, twinsGet, twinsPut } from "../../subjects/twins.ts";
import { endpointsWith, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { deleteTwin, ensureTwin, getTwins, putTwins, type TwinWriter, type TwinsDeps } from "./handlers.ts";
import { DEFAULT_TWIN_LIMITS, kvTwinStores, type TwinLimits } from "./store.ts";

/**
 * This process as a writer of commit claims. Its subject is answered as long as the process is
 * connected; "no responders" means its connection is gone (killed, say) and its claims can be
 * finished at once instead of after the lease. A timeout or any other error says nothing: not gone.
 */
export function twinWriter(nc: NatsConnection): TwinWriter & { stop(): void } {
  const id = nuid.next();
  const sub = nc.subscribe(subjects.twins.writer(id), { callback: (_error, msg) => void msg.respond() });
  return {
    id,
    async isGone(owner) {
      try {
        await nc.request(subjects.twins.writer(owner), undefined, { timeout: 1_000 });
        return false;
      } catch (error) {
        return error instanceof RequestError && error.isNoResponders();
      }
    },
    stop: () => sub.unsubscribe(),
  };
}

export async function startTwinsActor(
  nc: NatsConnection,
  options: RuntimeOptions,
  limits: TwinLimits = DEFAULT_TWIN_LIMITS,
): Promise<ServedActor> {
  const writer = twinWriter(nc);
  const stores = kvTwinStores(nc, options.storage, limits, options.log.child({ actor: "twins" }));
  const deps: TwinsDeps = { stores, writer, maxPayload: nc.info?.max_payload };
  const on = endpointsWith(deps);
  return serveActor(
    nc,
    {
      name: "twins",
      description: "device twin properties (desired/reported) in per-twin JetStream KV buckets",
      endpoints: [on(twinsPut, putTwins), on(twinsGet, getTwins), on(twinsDelete, deleteTwin), on(twinsEnsure, ensureTwin)],
    },
    options,
    async () => {
      writer.stop();
      await stores.close();
    },
  );
}
