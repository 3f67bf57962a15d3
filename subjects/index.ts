/** The single contract between edge, actors, SDK and devices. */
export * from "./names.ts";
export * from "./errors.ts";
export * from "./tokens.ts";
export * from "./headers.ts";
export * from "./principal.ts";
export * from "./reply.ts";
export * from "./validation.ts";
export * from "./delivery.ts";
export * from "./operation.ts";
