/** Reporting by unit and analysis: the `reporting` actor, its pure aggregations and math. */
export { startReportingActor } from "./actor.ts";
export { prospectModel, prospectAggregation, prospectDetails, licenseAggregation, fullCycle, scenarioAggregation } from "./aggregate.ts";
export { validateEntity } from "./validate.ts";
export { CACHE_HEADER } from "./handlers.ts";
export { seedDemo, DEMO_PATHS } from "./seed.ts";
export { DEMO, loadDemo } from "../../subjects/reporting-demo.ts";
