export { startIdentityActor } from "./actor.ts";
export { loadOrCreateSigningKey, mintToken, EMBEDDED_ISSUER } from "./keys.ts";
