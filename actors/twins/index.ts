export { startTwinsActor } from "./actor.ts";
export { kvTwinStores, KvTwinBucket } from "./store.ts";
