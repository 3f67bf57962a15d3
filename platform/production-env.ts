/**
 * Imported first by the CLI, before Elysia is loaded: Elysia decides once, at load, whether it runs
 * in production, and outside production it pretty-prints a whole invalid body (with the schema's
 * example value) into every validation error, which a wide body 128 levels deep makes take ~0.5 s
 * (docs/edge.md). derrick's errors plugin builds its own problem details, so nothing is lost.
 */
process.env.NODE_ENV ??= "production";
