/** Configuration: one schema, read once, frozen, passed by argument. */
export { loadConfig, ConfigError, CONFIG_VARIABLES } from "./load.ts";
export { Config, ClientSeed, ACTOR_NAMES, SUBJECT_TOKEN_PATTERN, type ActorName } from "./schema.ts";
export { parseDuration } from "./duration.ts";
export { maskedConfig, withoutCredentials } from "./mask.ts";
export { RECOMMENDED_RUNTIME_ENV, unsetRuntimeVariables } from "./runtime-env.ts";
