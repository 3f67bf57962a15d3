export { startTwinMirrorActor } from "./actor.ts";
