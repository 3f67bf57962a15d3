/**
 * Imported first by the CLI, before Elysia loads: Elysia decides once whether it runs in production, and outside
 * it pretty-prints a whole invalid body into every validation error, slow on deep bodies
 * (docs/edge.md#nested-request-bodies). derrick's errors plugin builds its own problem details: nothing is lost.
 */
process.env.NODE_ENV ??= "production";
