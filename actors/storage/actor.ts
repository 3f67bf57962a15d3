/** Wiring of the `storage` actor: the RECORDS stream and its endpoints. Stateless: scale by adding processes. */
import type { NatsConnection } from "@nats-io/nats-core";
import { storageHealth, storageRecordsDelete, storageRecordsGet, storageRecordsPurge, storageRecordsPut } from "../../subjects/search.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { openRecordStore } from "./store.ts";
import { deleteRecord, getRecord, purgeRecord, putRecords, storageHealth as health, type StorageDeps } from "./handlers.ts";

export async function startStorageActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const deps: StorageDeps = { records: await openRecordStore(nc, options.storage) };
  return serveActor(
    nc,
    {
      name: "storage",
      description: "OSDU Storage-compatible records (put, get, delete, purge) on the RECORDS stream that feeds search",
      endpoints: [
        endpoint(storageRecordsPut, (input, ctx) => putRecords(input, ctx, deps)),
        endpoint(storageRecordsGet, (input, ctx) => getRecord(input, ctx, deps)),
        endpoint(storageRecordsDelete, (input, ctx) => deleteRecord(input, ctx, deps)),
        endpoint(storageRecordsPurge, (input, ctx) => purgeRecord(input, ctx, deps)),
        endpoint(storageHealth, () => health(deps)),
      ],
    },
    options,
  );
}
