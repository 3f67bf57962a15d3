/** Wiring of the `storage` actor: the RECORDS stream and its endpoints. Stateless: scale by adding processes. */
import type { NatsConnection } from "@nats-io/nats-core";
import { subjects } from "../../subjects/index.ts";
import { RecordRef, RecordsPutMessage } from "../../subjects/search.ts";
import { endpoint, serveActor, type RuntimeOptions, type ServedActor } from "../runtime/service.ts";
import { openRecordStore } from "./store.ts";
import { deleteRecord, getRecord, purgeRecord, putRecords, storageHealth, type StorageDeps } from "./handlers.ts";

export async function startStorageActor(nc: NatsConnection, options: RuntimeOptions): Promise<ServedActor> {
  const deps: StorageDeps = { records: await openRecordStore(nc, options.storage) };
  const names = subjects.storage;
  return serveActor(
    nc,
    {
      name: "storage",
      description: "OSDU Storage-compatible records (put, get, delete, purge) on the RECORDS stream that feeds search",
      endpoints: [
        endpoint({
          name: "records-put",
          subject: names["records.put"](),
          input: RecordsPutMessage,
          handler: (input, ctx) => putRecords(input, ctx, deps),
        }),
        endpoint({
          name: "records-get",
          subject: names["records.get"](),
          input: RecordRef,
          handler: (input, ctx) => getRecord(input, ctx, deps),
        }),
        endpoint({
          name: "records-delete",
          subject: names["records.delete"](),
          input: RecordRef,
          handler: (input, ctx) => deleteRecord(input, ctx, deps),
        }),
        endpoint({
          name: "records-purge",
          subject: names["records.purge"](),
          input: RecordRef,
          handler: (input, ctx) => purgeRecord(input, ctx, deps),
        }),
        endpoint({ name: "health", subject: names.health(), handler: () => storageHealth(deps) }),
      ],
    },
    options,
  );
}
