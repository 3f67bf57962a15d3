export { startSystemActor } from "./actor.ts";
