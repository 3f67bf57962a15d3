/**
 * Messages of the reporting capability (assessments): the five input entities upserted under
 * `/assessments/v1/<collection>/{id}` (field names fixed by docs/reporting.md) and the
 * requests of the aggregation endpoints. The edge validates and documents with these schemas; the
 * `reporting` actor checks them again (NATS callers are not trusted) and adds the rules a schema
 * cannot say (sums, orderings, references, GeoJSON validity).
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { NoContent, operation, type OperationOf } from "./operation.ts";

export const ID_PATTERN = "^[A-Za-z0-9_-]{1,128}$";
const Id = (description?: string) => Type.String({ pattern: ID_PATTERN, ...(description ? { description } : {}) });
const Probability = (description?: string) => Type.Number({ minimum: 0, maximum: 1, ...(description ? { description } : {}) });
const Name = () => Type.String({ minLength: 1, maxLength: 200 });
const Strict = <T extends Record<string, TSchema>>(properties: T, description?: string) =>
  Type.Object(properties, { additionalProperties: false, ...(description ? { description } : {}) });
const DateString = (description?: string) => Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$", ...(description ? { description } : {}) });
const Year = () => Type.Integer({ minimum: 1900, maximum: 2300 });

/** The five collections, as they appear in the path. */
export const Collection = {
  licenses: "licenses",
  segmentAnalyses: "segmentanalyses",
  prospectAnalyses: "prospectanalyses",
  fullCycleAnalyses: "fullcycleanalyses",
  multipleScenarioAnalyses: "multiplescenarioanalyses",
} as const;
export type Collection = (typeof Collection)[keyof typeof Collection];
export const COLLECTIONS = Object.values(Collection);
export const CollectionSchema = Type.Union(COLLECTIONS.map((c) => Type.Literal(c)));

/** The id field of each collection's entity. */
export const ID_FIELD: Record<Collection, string> = {
  licenses: "licenseId",
  segmentanalyses: "segmentAnalysisId",
  prospectanalyses: "prospectAnalysisId",
  fullcycleanalyses: "fullCycleAnalysisId",
  multiplescenarioanalyses: "multipleScenarioAnalysisId",
};

export const Status = Type.Union([Type.Literal("test"), Type.Literal("approved"), Type.Literal("historical")], { default: "test" });
export type Status = Static<typeof Status>;

export const PRODUCTS = ["oil", "gas", "condensate", "ngl", "totalLiquids", "oilEquivalent"] as const;
export type Product = (typeof PRODUCTS)[number];

/** A success-case volume: `{unit, p90, p10}` (lognormal, p90 < p10) or `{unit, mean}` (fixed). */
export const Volume = Strict(
  {
    unit: Type.String({ minLength: 1, maxLength: 32 }),
    basis: Type.Optional(Type.Union([Type.Literal("recoverable"), Type.Literal("inPlace")])),
    p90: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: "low case (exceedance convention)" })),
    p10: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: "high case; must exceed p90" })),
    mean: Type.Optional(Type.Number({ minimum: 0, description: "a fixed value with no spread (instead of p90/p10)" })),
  },
  "success-case volume",
);
export type Volume = Static<typeof Volume>;

export const Volumes = Strict({
  oil: Type.Optional(Volume),
  gas: Type.Optional(Volume),
  condensate: Type.Optional(Volume),
  ngl: Type.Optional(Volume),
  totalLiquids: Type.Optional(Volume),
  oilEquivalent: Type.Optional(Volume),
});
export type Volumes = Static<typeof Volumes>;

export const PropertyType = Type.Union(["date", "float", "integer", "text", "closedList", "openList"].map((t) => Type.Literal(t)));
export const Property = Strict({
  name: Name(),
  type: PropertyType,
  value: Type.Union([Type.String({ maxLength: 2000 }), Type.Number()]),
  unit: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
});
export type Property = Static<typeof Property>;

export const RiskFactor = Strict({ name: Name(), probability: Probability() });
export type RiskFactor = Static<typeof RiskFactor>;

export const Simulation = Strict({
  trials: Type.Integer({ minimum: 100, maximum: 1_000_000, default: 10_000 }),
  seed: Type.Integer({ minimum: 0, maximum: 4_294_967_295, default: 1 }),
});
export type Simulation = Static<typeof Simulation>;
export const DEFAULT_SIMULATION: Simulation = { trials: 10_000, seed: 1 };

export const SegmentAnalysis = Strict({
  segmentAnalysisId: Type.Optional(Id()),
  name: Name(),
  prospectId: Type.Optional(Id()),
  status: Type.Optional(Status),
  properties: Type.Optional(Type.Array(Property, { maxItems: 200 })),
  riskFactors: Type.Array(RiskFactor, { maxItems: 50, description: "segment-specific factors; their product is ps_i" }),
  volumes: Volumes,
  entitlement: Type.Optional(Type.Array(Strict({ companyId: Id(), share: Probability() }), { maxItems: 100 })),
});
export type SegmentAnalysis = Static<typeof SegmentAnalysis>;

export const DependencyModelSchema = Type.Union([
  Type.Literal("independent"),
  Type.Literal("commonFactor"),
  Type.Literal("fullyDependent"),
]);

export const MAX_SEGMENTS = 64;

export const ProspectAnalysis = Strict({
  prospectAnalysisId: Type.Optional(Id()),
  prospect: Strict({ id: Id(), name: Name() }),
  status: Type.Optional(Status),
  version: Type.Optional(Type.Integer({ minimum: 1, description: "defaults to the number of upserts of this analysis" })),
  licenseIds: Type.Optional(Type.Array(Id(), { maxItems: 100 })),
  segmentAnalysisIds: Type.Array(Id(), { minItems: 1, maxItems: MAX_SEGMENTS }),
  dependency: Strict({
    model: DependencyModelSchema,
    commonFactors: Type.Optional(Type.Array(RiskFactor, { maxItems: 50 })),
  }),
  simulation: Type.Optional(Simulation),
  mefs: Type.Optional(Strict({ value: Type.Number({ minimum: 0 }), unit: Type.String({ minLength: 1, maxLength: 32 }) })),
  entitlement: Type.Optional(Strict({ companyId: Id(), workingInterest: Probability() })),
});
export type ProspectAnalysis = Static<typeof ProspectAnalysis>;

export const Licensee = Strict({ companyId: Id(), companyName: Name(), interest: Probability(), isOperator: Type.Boolean() });
export const LicenseVersion = Strict({
  versionNumber: Type.Integer({ minimum: 1 }),
  status: Type.Optional(Status),
  validFrom: DateString(),
  validTo: Type.Optional(Type.Union([DateString(), Type.Null()])),
  dateGranted: Type.Optional(DateString()),
  dateExpires: Type.Optional(DateString()),
  phase: Type.Optional(Type.String({ maxLength: 100 })),
  licenseStatus: Type.Optional(Type.String({ maxLength: 100 })),
  licensingRound: Type.Optional(Type.String({ maxLength: 100 })),
  areaKm2: Type.Optional(
    Strict({ original: Type.Optional(Type.Number({ minimum: 0 })), current: Type.Optional(Type.Number({ minimum: 0 })) }),
  ),
  blocks: Type.Array(
    Strict({
      blockId: Type.String({ minLength: 1, maxLength: 64 }),
      quadrant: Type.Optional(Type.String({ maxLength: 64 })),
      partial: Type.Optional(Type.Boolean()),
    }),
    { maxItems: 500 },
  ),
  licensees: Type.Array(Licensee, { minItems: 1, maxItems: 100 }),
  prospectIds: Type.Array(Id(), { maxItems: 500 }),
});
export type LicenseVersion = Static<typeof LicenseVersion>;

export const License = Strict({
  licenseId: Type.Optional(Id()),
  name: Name(),
  nation: Strict({ code: Type.String({ pattern: "^[A-Z]{2,3}$" }), name: Name() }),
  versions: Type.Array(LicenseVersion, {
    minItems: 1,
    maxItems: 500,
    description: "merged by versionNumber with the versions already stored: a license keeps every version",
  }),
});
export type License = Static<typeof License>;

const YearlyNcf = Type.Array(Strict({ year: Year(), netCashFlow: Type.Number() }), { minItems: 1, maxItems: 200 });

export const Fiscal = Strict({
  type: Type.Union([Type.Literal("royaltyTax"), Type.Literal("psc")]),
  royaltyRate: Probability(),
  incomeTaxRate: Probability(),
  costRecoveryCeiling: Type.Optional(Probability()),
  contractorProfitShare: Type.Optional(Probability()),
});

export const FullCycleAnalysis = Strict({
  fullCycleAnalysisId: Type.Optional(Id()),
  prospectAnalysisId: Id(),
  name: Name(),
  resourceCase: Type.Optional(
    Type.Union(
      ["mean", "p90", "p50", "p10"].map((c) => Type.Literal(c)),
      { default: "mean" },
    ),
  ),
  setup: Strict({
    startYear: Year(),
    npvYear: Year(),
    discountRate: Type.Number({ minimum: 0, maximum: 1 }),
    discounting: Type.Optional(Type.Union([Type.Literal("endOfYear"), Type.Literal("midYear")], { default: "endOfYear" })),
    moneyTerms: Type.Optional(Type.Union([Type.Literal("real"), Type.Literal("nominal")])),
    requiredIrr: Type.Optional(Type.Number({ minimum: 0, maximum: 10 })),
  }),
  assumptions: Strict({
    prices: Type.Array(
      Strict({
        product: Type.Union(PRODUCTS.map((p) => Type.Literal(p))),
        unit: Type.String({ minLength: 1, maxLength: 32 }),
        series: Type.Array(Strict({ year: Year(), value: Type.Number({ minimum: 0 }) }), { minItems: 1, maxItems: 200 }),
      }),
      { maxItems: 6 },
    ),
    fiscal: Fiscal,
    workingInterest: Probability(),
    dryHoleCost: Type.Number({ minimum: 0 }),
  }),
  production: Type.Optional(
    Strict(
      {
        product: Type.Optional(
          Type.Union(
            PRODUCTS.map((p) => Type.Literal(p)),
            { default: "oil" },
          ),
        ),
        firstYear: Year(),
        recoverable: Type.Optional(
          Type.Number({
            exclusiveMinimum: 0,
            description: "defaults to the prospect analysis's success-case volume of the product at the resource case",
          }),
        ),
        wellsPerYear: Type.Number({ exclusiveMinimum: 0 }),
        wellRatePerYear: Type.Number({ exclusiveMinimum: 0, description: "volume one well produces per year at its initial rate" }),
        plateauFraction: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
        declineStartRemaining: Probability(),
        declineRate: Type.Number({ minimum: 0, exclusiveMaximum: 1 }),
        economicLimit: Type.Optional(Type.Number({ minimum: 0 })),
        maxYears: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
        gasOilRatio: Type.Optional(Type.Number({ minimum: 0, description: "associated gas per unit of the product" })),
        gasUnit: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
      },
      "production model (GeoX gFullCycle parameters)",
    ),
  ),
  costs: Type.Optional(
    Strict({
      capex: Type.Array(Strict({ year: Year(), value: Type.Number({ minimum: 0 }) }), { maxItems: 200 }),
      opexFixed: Type.Optional(Type.Number({ minimum: 0, description: "per producing year" })),
      opexPerUnit: Type.Optional(Type.Number({ minimum: 0, description: "per unit of the product produced" })),
    }),
  ),
  cashFlows: Type.Optional(
    Strict(
      { project: Type.Optional(YearlyNcf), contractor: Type.Optional(YearlyNcf), workingInterest: Type.Optional(YearlyNcf) },
      "explicit yearly net cash flows per level (instead of a production model)",
    ),
  ),
});
export type FullCycleAnalysis = Static<typeof FullCycleAnalysis>;

/** GeoJSON as received; the actor checks its structure and names the offending position. */
export const GeoJsonPolygon = Type.Object(
  {
    type: Type.Union([Type.Literal("Feature"), Type.Literal("Polygon"), Type.Literal("MultiPolygon")]),
    geometry: Type.Optional(Type.Unknown()),
    coordinates: Type.Optional(Type.Unknown()),
    properties: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    id: Type.Optional(Type.Union([Type.String(), Type.Number()])),
    bbox: Type.Optional(Type.Array(Type.Number())),
  },
  { additionalProperties: false, description: "GeoJSON Feature, Polygon or MultiPolygon (RFC 7946, WGS84 lon/lat)" },
);

export const MultipleScenarioAnalysis = Strict({
  multipleScenarioAnalysisId: Type.Optional(Id()),
  prospectId: Id(),
  name: Type.Optional(Name()),
  scenarios: Type.Array(Strict({ scenarioId: Id(), name: Name(), probability: Probability(), prospectAnalysisId: Id() }), {
    minItems: 1,
    maxItems: 50,
  }),
  simulation: Type.Optional(Simulation),
  polygon: Type.Optional(GeoJsonPolygon),
});
export type MultipleScenarioAnalysis = Static<typeof MultipleScenarioAnalysis>;

export const ENTITY_SCHEMAS = {
  licenses: License,
  segmentanalyses: SegmentAnalysis,
  prospectanalyses: ProspectAnalysis,
  fullcycleanalyses: FullCycleAnalysis,
  multiplescenarioanalyses: MultipleScenarioAnalysis,
} as const;

export type Entity = License | SegmentAnalysis | ProspectAnalysis | FullCycleAnalysis | MultipleScenarioAnalysis;

/** Group needed for PUT and DELETE of any entity. */
export const EDITORS_GROUP = "assessments.editors";

// ---- actor requests ---------------------------------------------------------------------------
// The messages mirror the HTTP request (path id, body under `body`): devices and tools send them as they are.

/** `{id}` of every entity and aggregation path. */
export const IdPath = Type.Object({ id: Id() });
const InCollection = Type.Object({ collection: CollectionSchema });

/** The body stays open here: the actor checks it against its collection's schema and rules (validate.ts). */
export const EntityPutRequest = Type.Composite([IdPath, InCollection, Type.Object({ body: Type.Unknown() })]);
export type EntityPutRequest = Static<typeof EntityPutRequest>;
/** `GET …/{collection}/{id}?version=n`: an earlier version, while the bucket's history holds it. */
export const EntityQuery = Type.Object({
  version: Type.Optional(
    Type.String({ pattern: "^[1-9][0-9]{0,9}$", description: "an earlier version (the ETag number); the last 16 are kept" }),
  ),
});
export const EntityRef = Type.Composite([IdPath, InCollection, EntityQuery]);
export type EntityRef = Static<typeof EntityRef>;
export const EntityDeleteRequest = Type.Composite([IdPath, InCollection]);
export type EntityDeleteRequest = Static<typeof EntityDeleteRequest>;
export const AggregationRef = IdPath;
export type AggregationRef = Static<typeof AggregationRef>;

export const Level = Type.Union([Type.Literal("project"), Type.Literal("contractor"), Type.Literal("workingInterest")]);
export type Level = Static<typeof Level>;
export const LEVELS: Level[] = ["project", "contractor", "workingInterest"];

export const FullCycleAggregationBody = Strict({
  prospectAnalysisId: Id(),
  levels: Type.Optional(Type.Array(Level, { minItems: 1, maxItems: 3, uniqueItems: true })),
  companyId: Type.Optional(Id()),
  currency: Type.Optional(Type.String({ pattern: "^[A-Z]{3}$" })),
});
export type FullCycleAggregationBody = Static<typeof FullCycleAggregationBody>;
export const FullCycleAggregationRequest = Type.Object({ body: FullCycleAggregationBody });
export type FullCycleAggregationRequest = Static<typeof FullCycleAggregationRequest>;

/** Aggregation replies are documented loosely: their names follow docs/reporting.md. */
export const AggregationResult = Type.Record(Type.String(), Type.Unknown(), { description: "see docs/reporting.md" });
export type AggregationResult = Static<typeof AggregationResult>;
/** An entity as stored (the PUT body with its id and defaults), documented as loosely as the aggregations. */
export const StoredEntity = AggregationResult;

/** An aggregation that takes the reference of the entity it aggregates. */
const aggregation = (op: OperationOf<"reporting">) => operation("reporting", op, { request: AggregationRef, reply: AggregationResult });

export const reportingEntityPut = operation("reporting", "entity.put", { request: EntityPutRequest, reply: StoredEntity });
export const reportingEntityGet = operation("reporting", "entity.get", { request: EntityRef, reply: StoredEntity });
export const reportingEntityDelete = operation("reporting", "entity.delete", { request: EntityDeleteRequest, reply: NoContent });
export const reportingLicenseAggregation = aggregation("license.aggregation");
export const reportingProspectAggregation = aggregation("prospect.aggregation");
export const reportingProspectDetails = aggregation("prospect.details");
export const reportingFullcycleAggregation = operation("reporting", "fullcycle.aggregation", {
  request: FullCycleAggregationRequest,
  reply: AggregationResult,
});
export const reportingScenarioAggregation = aggregation("scenario.aggregation");

// ---- aggregation tasks: large aggregations answer 202 with one (docs/reporting.md#large-aggregations-answer-202-with-a-task)

/** The aggregations that can be answered by a task (the others take no simulation). */
export const TaskAggregation = Type.Union([Type.Literal("prospect"), Type.Literal("fullcycle"), Type.Literal("scenarios")]);
export type TaskAggregation = Static<typeof TaskAggregation>;
export const AggregationTaskState = Type.Union([
  Type.Literal("queued"),
  Type.Literal("running"),
  Type.Literal("succeeded"),
  Type.Literal("failed"),
]);
export type AggregationTaskState = Static<typeof AggregationTaskState>;
const Time = () => Type.String({ format: "date-time" });
/** A task as its reads show it (and the body of the 202 that accepted it). */
export const AggregationTask = Type.Object({
  taskId: Type.String({ pattern: ID_PATTERN }),
  aggregation: TaskAggregation,
  /** The aggregated entity: the prospect analysis (prospect, full cycle) or the multiple scenario analysis. */
  id: Id(),
  state: AggregationTaskState,
  /** The estimated work that made it a task (segment draws and the like, work.ts). */
  work: Type.Integer({ minimum: 0 }),
  createdAt: Time(),
  startedAt: Type.Optional(Time()),
  completedAt: Type.Optional(Time()),
  /** completedAt + 60 s: the result is kept until then. */
  expiresAt: Type.Optional(Time()),
  error: Type.Optional(Type.String()),
  /** Where the result is read once the task succeeded. */
  result: Type.String(),
});
export type AggregationTask = Static<typeof AggregationTask>;
export const TaskPath = Type.Object({ taskId: Type.String({ pattern: ID_PATTERN }) });
export type TaskPath = Static<typeof TaskPath>;
export const reportingTaskGet = operation("reporting", "task.get", { request: TaskPath, reply: AggregationTask });
export const reportingTaskResult = operation("reporting", "task.result", { request: TaskPath, reply: AggregationResult });
