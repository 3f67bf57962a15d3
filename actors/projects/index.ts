/** Display items, key parameters, projects and content tasks: the `projects` and `content-worker` actors. */
export { startProjectsActor } from "./actor.ts";
export { startContentWorker } from "./worker.ts";
export { computeContent, splitUtf8, checkValues, isMember } from "./compute.ts";
export { catalogFrom, readCatalogFile, pageCatalog, DEFAULT_CATALOG_FILE } from "./catalog.ts";
