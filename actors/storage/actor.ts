/** Wiring of the `storage` actor: the RECORDS stream and its endpoints. Stateless: scale by adding processes. */
import type { NatsConnection } from "@nats-io/nats-core";
import { storageHealth, storageRecordsDelete, storageRecordsGet, storageRecordsPurge, storageRecordsPut } from "../../subjects/search.ts";
import { endpoint, endpointsWith, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { openRecordStore } from "./store.ts";
import { deleteRecord, getRecord, purgeRecord, putRecords, storageHealth as health, type StorageDeps } from "./handlers.ts";

export async function startStorageActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const deps: StorageDeps = { records: await openRecordStore(nc, options.storage) };
  const on = endpointsWith(deps);
  return serveActor(
    nc,
    {
      name: "storage",
      description: "OSDU Storage-compatible records (put, get, delete, purge) on the RECORDS stream that feeds search",
      endpoints: [
        on(storageRecordsPut, putRecords),
        on(storageRecordsGet, getRecord),
        on(storageRecordsDelete, deleteRecord),
        on(storageRecordsPurge, purgeRecord),
        endpoint(storageHealth, () => health(deps)),
      ],
    },
    options,
  );
}
