export { startIdentityActor } from "./actor.ts";
export { loadOrCreateSigningKey, loadSigningKey, mintToken, EMBEDDED_ISSUER } from "./keys.ts";
