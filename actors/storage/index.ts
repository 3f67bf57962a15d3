/** OSDU Storage-compatible records feeding search: the `storage` actor. */
export { startStorageActor } from "./actor.ts";
export { putRecords, getRecord, deleteRecord, purgeRecord, storageHealth } from "./handlers.ts";
