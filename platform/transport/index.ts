/** The NATS request/reply transport shared by the edge, the actors and the tools: the Bus, the request metadata codec and body tags. */
export * from "./bus.ts";
export * from "./request-meta.ts";
export * from "./coalesce-writes.ts";
export * from "./header-names.ts";
export * from "./body-tags.ts";
