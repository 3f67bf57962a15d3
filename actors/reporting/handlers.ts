/**
 * Handlers of the `reporting` actor: entity upserts, reads and deletes, and the five aggregations
 * with their cache (store.ts). Plain functions over the store; access rules live here so NATS
 * callers meet them too: PUT and DELETE need the group `assessments.editors`, reads any caller.
 */
import { createHash } from "node:crypto";
import { DerrickError, EncodedJson, checkToken, conflict, notFound, reply, type FieldError, type Reply } from "../../subjects/index.ts";
import {
  EDITORS_GROUP,
  ID_FIELD,
  DEFAULT_SIMULATION,
  LEVELS,
  type AggregationRef,
  type AggregationResult,
  type Collection,
  type EntityDeleteRequest,
  type EntityPutRequest,
  type EntityRef,
  type FullCycleAggregationRequest,
  type FullCycleAnalysis,
  type License,
  type LicenseVersion,
  type MultipleScenarioAnalysis,
  type ProspectAnalysis,
  type SegmentAnalysis,
  type Simulation,
  type AggregationTask,
  type TaskAggregation,
  type TaskPath,
} from "../../subjects/reporting.ts";
import { requireGroup, requirePartition, requirePrincipal, type RequestContext } from "../runtime/context.ts";
import { encodeJson } from "../runtime/kv.ts";
import { licenseAggregation, prospectDetails, prospectModel, type LinkedAnalysis, type ProspectModel } from "./aggregate.ts";
import { entityKey, indexKey, resultKey, type AssessmentStore, type Envelope, type Tracker } from "./store.ts";
import { checkMergedLicense, validateEntity } from "./validate.ts";
import { ASYNC_WORK_MIN, aggregationWork } from "./work.ts";
import { computeJob, type AggregationJob } from "./jobs.ts";
import { taskLocation, taskView, type AggregationTasks, type TaskRecord } from "./tasks.ts";
import { analysisProblems, basisOfSegments, productionProblem, scenarioProblems, scenarioWorkProblem, unitsOf } from "./consistency.ts";

export type ReportingDeps = {
  store: AssessmentStore;
  now?: () => Date;
  /** Where large aggregations go (absent: every aggregation is answered at once). */
  tasks?: AggregationTasks;
  /** Hears each aggregation read: served from the cache (`hit`) or computed (`miss`). */
  cacheReads?: (result: "hit" | "miss") => void;
  /** Where tasks compute (a worker thread: compute-pool.ts); absent, on the actor's own thread. */
  offThread?: { run(job: AggregationJob): Promise<Uint8Array> };
};

/** The cache header: `hit` when the reply came from KV, `miss` when it was computed. */
export const CACHE_HEADER = "x-derrick-cache";

type Segment = SegmentAnalysis & { segmentAnalysisId: string };
type Analysis = ProspectAnalysis & { prospectAnalysisId: string; simulation: Simulation };

function fieldError(errors: FieldError[]): DerrickError {
  const first = errors[0]!;
  return new DerrickError(400, `${first.pointer}: ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ""}`, {
    type: "validation",
    errors,
  });
}

const etag = (version: number) => ({ ETag: `"${version}"` });

// ---- entities ---------------------------------------------------------------------------------

export async function putEntity(input: EntityPutRequest, ctx: RequestContext, deps: ReportingDeps): Promise<Reply<AggregationResult>> {
  requireGroup(ctx, EDITORS_GROUP);
  const partition = requirePartition(ctx);
  const id = checkToken(input.id, "/params/id");
  const collection = input.collection;
  const entity = validateEntity(collection, id, ID_FIELD[collection], input.body);
  await checkReferences(deps, partition, collection, entity);
  const now = (deps.now?.() ?? new Date()).toISOString();
  const { stored, previous } = await deps.store.put<Record<string, unknown>>(
    partition,
    collection,
    id,
    (prev) => (collection === "licenses" ? mergeLicense(entity as License, prev?.entity as License | undefined) : entity),
    now,
  );
  // Each write deletes the results cached from what it replaces before it lands (store.ts).
  await updateIndexes(deps, partition, collection, id, stored.entity, previous?.entity);
  return reply(stored.entity, previous ? 200 : 201, etag(stored.version));
}

export async function getEntity(input: EntityRef, ctx: RequestContext, deps: ReportingDeps): Promise<Reply<AggregationResult>> {
  requirePrincipal(ctx);
  const partition = requirePartition(ctx);
  const id = checkToken(input.id, "/params/id");
  if (input.version !== undefined) {
    if (!/^[1-9][0-9]{0,9}$/.test(input.version))
      throw fieldError([{ pointer: "/query/version", message: "must be a positive whole number" }]);
    if (!(await deps.store.get(partition, input.collection, id))) throw notFound(`${input.collection}/${id} does not exist`);
    const old = await deps.store.version<Record<string, unknown>>(partition, input.collection, id, Number(input.version));
    if (!old) throw notFound(`version ${input.version} of ${input.collection}/${id} does not exist or is no longer kept`);
    return reply(old.entity, 200, etag(old.version));
  }
  const found = await deps.store.get<Record<string, unknown>>(partition, input.collection, id);
  if (!found) throw notFound(`${input.collection}/${id} does not exist`);
  return reply(found.entity, 200, etag(found.version));
}

export async function deleteEntity(input: EntityDeleteRequest, ctx: RequestContext, deps: ReportingDeps): Promise<Reply<undefined>> {
  requireGroup(ctx, EDITORS_GROUP);
  const partition = requirePartition(ctx);
  const id = checkToken(input.id, "/params/id");
  const found = await deps.store.get<Record<string, unknown>>(partition, input.collection, id);
  if (!found || !(await deps.store.delete(partition, input.collection, id))) {
    // Still invalidated (idempotent; one KV read when nothing is listed): a client retrying a delete that failed midway
    // comes here, and the entity's results must not stay cached (docs/reporting.md#why-writes-are-announced).
    await deps.store.invalidate([entityKey(partition, input.collection, id)]);
    throw notFound(`${input.collection}/${id} does not exist`);
  }
  await updateIndexes(deps, partition, input.collection, id, undefined, found.entity);
  return reply(undefined, 204);
}

/** A license keeps every version: the body's versions replace stored ones of the same number, others stay. */
function mergeLicense(body: License, stored: License | undefined): License {
  if (!stored) return body;
  const byNumber = new Map<number, LicenseVersion>(stored.versions.map((v) => [v.versionNumber, v]));
  for (const v of body.versions) byNumber.set(v.versionNumber, v);
  const versions = [...byNumber.values()].sort((a, b) => a.versionNumber - b.versionNumber);
  checkMergedLicense(versions, (n) => {
    const i = body.versions.findIndex((v) => v.versionNumber === n);
    return i < 0 ? undefined : i;
  });
  return { ...body, versions };
}

/** References checked downward only: what this entity points at must exist (else 400). */
async function checkReferences(
  deps: ReportingDeps,
  partition: string,
  collection: Collection,
  entity: Record<string, unknown>,
): Promise<void> {
  const errors: FieldError[] = [];
  if (collection === "prospectanalyses") {
    const pa = entity as ProspectAnalysis;
    const segments = await Promise.all(pa.segmentAnalysisIds.map((sid) => deps.store.get<Segment>(partition, "segmentanalyses", sid)));
    const pointer = (i: number) => `/body/segmentAnalysisIds/${i}`;
    segments.forEach((found, i) => {
      if (!found) return errors.push({ pointer: pointer(i), message: `segment analysis ${pa.segmentAnalysisIds[i]} does not exist` });
      const s = found.entity;
      if (s.prospectId && s.prospectId !== pa.prospect.id)
        errors.push({
          pointer: pointer(i),
          message: `segment analysis ${s.segmentAnalysisId} belongs to prospect ${s.prospectId}, not ${pa.prospect.id}`,
        });
    });
    const present = segments.flatMap((found, i) => (found ? [{ i, s: found.entity }] : []));
    errors.push(
      ...analysisProblems(
        present.map((p) => p.s),
        pa.mefs,
        (k) => pointer(present[k]!.i),
        "/body/mefs/unit",
      ),
    );
  } else if (collection === "fullcycleanalyses") {
    const fc = entity as FullCycleAnalysis;
    const pa = await deps.store.get<Analysis>(partition, "prospectanalyses", fc.prospectAnalysisId);
    if (!pa) errors.push({ pointer: "/body/prospectAnalysisId", message: `prospect analysis ${fc.prospectAnalysisId} does not exist` });
    else if (fc.production) {
      const segments = await Promise.all(
        pa.entity.segmentAnalysisIds.map((sid) => deps.store.get<Segment>(partition, "segmentanalyses", sid)),
      );
      const present = segments.flatMap((s) => (s ? [s.entity] : []));
      const problem = productionProblem(fc.production, unitsOf(present), basisOfSegments(present), "/body/production");
      if (problem) errors.push(problem);
    }
  } else if (collection === "multiplescenarioanalyses") {
    const msa = entity as MultipleScenarioAnalysis;
    const found = await Promise.all(
      msa.scenarios.map((s) => deps.store.get<Analysis>(partition, "prospectanalyses", s.prospectAnalysisId)),
    );
    found.forEach((pa, i) => {
      const pointer = `/body/scenarios/${i}/prospectAnalysisId`;
      if (!pa) errors.push({ pointer, message: `prospect analysis ${msa.scenarios[i]!.prospectAnalysisId} does not exist` });
      else if (pa.entity.prospect.id !== msa.prospectId)
        errors.push({
          pointer,
          message: `prospect analysis ${pa.entity.prospectAnalysisId} is of prospect ${pa.entity.prospect.id}, not ${msa.prospectId}`,
        });
    });
    const work = scenarioWorkProblem(
      found.map((pa) => pa?.entity.segmentAnalysisIds.length ?? 0),
      (msa.simulation ?? DEFAULT_SIMULATION).trials,
      "/body/simulation/trials",
    );
    if (work) errors.push(work);
  }
  if (errors.length) throw fieldError(errors);
}

/** Keeps the by-prospect and by-analysis indexes in step; returns the index keys that changed. */
async function updateIndexes(
  deps: ReportingDeps,
  partition: string,
  collection: Collection,
  id: string,
  now: Record<string, unknown> | undefined,
  before: Record<string, unknown> | undefined,
): Promise<string[]> {
  const changes: Array<Promise<string | undefined>> = [];
  const move = (kind: "byprospect" | "byanalysis", from: string | undefined, to: string | undefined) => {
    if (from && from !== to) changes.push(deps.store.updateIndex(partition, kind, from, id, false));
    // Also when unchanged: a process that died between writing the entity and its index leaves the
    // index short, and the client's retry of the same write must repair it (a no-op otherwise).
    if (to) changes.push(deps.store.updateIndex(partition, kind, to, id, true));
  };
  if (collection === "prospectanalyses")
    move("byprospect", (before as ProspectAnalysis | undefined)?.prospect.id, (now as ProspectAnalysis | undefined)?.prospect.id);
  if (collection === "fullcycleanalyses")
    move(
      "byanalysis",
      (before as FullCycleAnalysis | undefined)?.prospectAnalysisId,
      (now as FullCycleAnalysis | undefined)?.prospectAnalysisId,
    );
  return (await Promise.all(changes)).filter((k): k is string => k !== undefined);
}

// ---- loading inputs (tracked) ------------------------------------------------------------------

async function loadModel(
  tracker: Tracker,
  partition: string,
  paId: string,
  pointer: string,
): Promise<{ model: ProspectModel; version: number }> {
  const found = await tracker.get<Envelope<Analysis>>(entityKey(partition, "prospectanalyses", paId));
  if (!found) throw notFound(`prospect analysis ${paId} does not exist (${pointer})`);
  const pa = found.entity;
  const segments = await Promise.all(
    pa.segmentAnalysisIds.map((sid) => tracker.get<Envelope<Segment>>(entityKey(partition, "segmentanalyses", sid))),
  );
  const missing = pa.segmentAnalysisIds.filter((_, i) => !segments[i]);
  if (missing.length)
    throw conflict(`prospect analysis ${paId} enrolls segment analyses that were deleted: ${missing.join(", ")}`, { missing });
  return {
    model: prospectModel(
      pa,
      segments.map((s) => s!.entity),
    ),
    version: found.version,
  };
}

/** 409 when the analysis's volumes cannot be added up (units, basis, MEFS unit: consistency.ts). */
function requireComparableVolumes(model: ProspectModel): void {
  const problems = analysisProblems(model.segments, model.pa.mefs, (i) => `/segmentAnalysisIds/${i}`, "/mefs/unit");
  if (problems.length)
    throw conflict(`prospect analysis ${model.pa.prospectAnalysisId} cannot be aggregated: ${problems[0]!.message}`, { errors: problems });
}

/**
 * An aggregation's heavy part, run once its inputs are loaded and checked: its estimated work says whether now or in a task.
 * `job`, when given, is the same computation as data, which a task runs in a worker thread (jobs.ts).
 */
type Plan = { work: number; compute: () => AggregationResult; job?: AggregationJob };

const planOf = (work: number, job: AggregationJob): Plan => ({ work, job, compute: () => computeJob(job) });

/**
 * One aggregation request: its cache key, how to load and check its inputs (errors answered at once), and, for those
 * that can be large, what a task needs to run it again. `echo`: request fields answered as given, added after the
 * cache so they are not part of its key.
 */
type Aggregation = {
  key: string;
  plan: (tracker: Tracker) => Promise<Plan>;
  echo?: Record<string, string>;
  task?: { aggregation: TaskAggregation; id: string; request: unknown };
};

/**
 * A cached result, or the computation's result stored for next time (keyed by its inputs' revisions); a computation of
 * ASYNC_WORK_MIN or more is answered 202 with a task instead (docs/reporting.md#large-aggregations-answer-202-with-a-task).
 */
async function answer(
  deps: ReportingDeps,
  partition: string,
  aggregation: Aggregation,
): Promise<Reply<AggregationResult | EncodedJson<AggregationResult>>> {
  const cached = await deps.store.cached(aggregation.key);
  if (cached.value !== undefined) {
    deps.cacheReads?.("hit");
    return reply(answered(cached.value, cached.held === true, aggregation.echo), 200, { [CACHE_HEADER]: "hit" });
  }
  deps.cacheReads?.("miss");
  const same = `${aggregation.key} ${JSON.stringify(aggregation.echo ?? {})}`;
  const outcome = await shared(deps.store, same, async (): Promise<Outcome> => {
    const tracker = deps.store.tracker();
    const { work, compute } = await aggregation.plan(tracker);
    if (aggregation.task && deps.tasks && work >= ASYNC_WORK_MIN) {
      const { aggregation: kind, id, request } = aggregation.task;
      return { task: await deps.tasks.accept(partition, kind, id, request, work, same) };
    }
    const bytes = encodeJson(compute());
    await deps.store.remember(aggregation.key, bytes, tracker, cached.revision);
    return { bytes };
  });
  if ("task" in outcome) return reply(outcome.task, 202, { Location: taskLocation(outcome.task.taskId), [CACHE_HEADER]: "miss" });
  return reply(answered(outcome.bytes, false, aggregation.echo), 200, { [CACHE_HEADER]: "miss" });
}

/** What a miss comes to: the result's bytes, or a task accepted for it. */
type Outcome = { bytes: Uint8Array } | { task: AggregationTask };

/** Computations under way per store, by aggregation (its key and echoed fields), with the entity writes heard as each began. */
const flights = new WeakMap<AssessmentStore, Map<string, { heard: number; outcome: Promise<Outcome> }>>();

/**
 * Misses of one aggregation while it is being computed share that computation (a result nobody holds yet, asked by many
 * at once, is computed once), but only while no entity write was heard since it began: a caller whose write was
 * acknowledged after its inputs may have been read gets a computation of its own. Where writes cannot be vouched for
 * (no result memory, a cluster, a reconnect), each miss computes (docs/reporting.md#concurrent-misses).
 */
function shared(store: AssessmentStore, same: string, run: () => Promise<Outcome>): Promise<Outcome> {
  const heard = store.entityWritesHeard();
  if (heard === undefined) return run();
  let byKey = flights.get(store);
  if (!byKey) flights.set(store, (byKey = new Map()));
  const under = byKey.get(same);
  if (under && under.heard === heard) return under.outcome;
  const mine = { heard, outcome: run() };
  byKey.set(same, mine);
  const landed = () => {
    if (byKey.get(same) === mine) byKey.delete(same);
  };
  mine.outcome.then(landed, landed);
  return mine.outcome;
}

/**
 * A result as answered: its bytes themselves unless fields are put in front (then new bytes per read, never compressed).
 * `held`: the result memory keeps these bytes, so a compressed form kept beside them serves later hits.
 */
const answered = (bytes: Uint8Array, held: boolean, echo: Record<string, string> | undefined) =>
  echo === undefined ? new EncodedJson<AggregationResult>(bytes, held, true) : new EncodedJson<AggregationResult>(withFields(bytes, echo));

/** Runs an accepted task's aggregation again from its stored request: the bytes a 200 would answer (cached for later reads too). */
export async function runAggregationTask(task: TaskRecord, deps: ReportingDeps): Promise<Uint8Array> {
  const aggregation = TASK_AGGREGATIONS[task.aggregation](task.request as never, task.partition);
  const cached = await deps.store.cached(aggregation.key);
  if (cached.value !== undefined) return withFields(cached.value, aggregation.echo);
  const tracker = deps.store.tracker();
  const plan = await aggregation.plan(tracker);
  const bytes = plan.job && deps.offThread ? await deps.offThread.run(plan.job) : encodeJson(plan.compute());
  await deps.store.remember(aggregation.key, bytes, tracker, cached.revision);
  return withFields(bytes, aggregation.echo);
}

/**
 * A JSON object's bytes with fields put in front, without parsing it (`{"a":1}` and `{b: "x"}` →
 * `{"b":"x","a":1}`): a hit stays free of JSON work, and hit and miss stay byte-identical.
 */
function withFields(object: Uint8Array, fields: Record<string, string> | undefined): Uint8Array {
  if (!fields) return object;
  const head = encodeJson(fields);
  const empty = object.length <= 2;
  const out = new Uint8Array(head.length - 1 + (empty ? 1 : object.length));
  out.set(head.subarray(0, head.length - 1));
  out[head.length - 1] = empty ? 0x7d : 0x2c; // "}" or ","
  if (!empty) out.set(object.subarray(1), head.length);
  return out;
}

function callerPartition(ctx: RequestContext): string {
  requirePrincipal(ctx);
  return requirePartition(ctx);
}

// ---- aggregations ------------------------------------------------------------------------------

const prospectRequest = (input: AggregationRef, partition: string): Aggregation => {
  const id = checkToken(input.id, "/params/id");
  return {
    key: resultKey(partition, "prospect", id),
    task: { aggregation: "prospect", id, request: input },
    plan: async (tracker) => {
      const { model, version } = await loadModel(tracker, partition, id, "/params/id");
      requireComparableVolumes(model);
      const licenses = await Promise.all(
        (model.pa.licenseIds ?? []).map((lid) => tracker.get<Envelope<License>>(entityKey(partition, "licenses", lid))),
      );
      const linked = licenses.flatMap((l, i) => (l ? [{ licenseId: model.pa.licenseIds![i]!, name: l.entity.name }] : []));
      return planOf(aggregationWork.prospect(model), { kind: "prospect", model, licenses: linked, version });
    },
  };
};

export async function prospectAggregate(input: AggregationRef, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  return answer(deps, partition, prospectRequest(input, partition));
}

export async function prospectAggregateDetails(input: AggregationRef, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  const id = checkToken(input.id, "/params/id");
  return answer(deps, partition, {
    key: resultKey(partition, "details", id),
    plan: async (tracker) => {
      const { model } = await loadModel(tracker, partition, id, "/params/id");
      return { work: 0, compute: () => prospectDetails(model) };
    },
  });
}

export async function licenseAggregate(input: AggregationRef, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  const id = checkToken(input.id, "/params/id");
  return answer(deps, partition, {
    key: resultKey(partition, "license", id),
    plan: async (tracker) => {
      const found = await tracker.get<Envelope<License & { licenseId: string }>>(entityKey(partition, "licenses", id));
      if (!found) throw notFound(`license ${id} does not exist`);
      const prospectIds = [...new Set(found.entity.versions.flatMap((v) => v.prospectIds))];
      const analysesByProspect = new Map<string, LinkedAnalysis[]>();
      await Promise.all(
        prospectIds.map(async (prospectId) => {
          const index = await tracker.get<{ ids: string[] }>(indexKey(partition, "byprospect", prospectId));
          const linked = await Promise.all((index?.ids ?? []).map((paId) => linkedAnalysis(tracker, partition, paId)));
          analysesByProspect.set(
            prospectId,
            linked.filter((m): m is LinkedAnalysis => m !== undefined),
          );
        }),
      );
      return { work: 0, compute: () => licenseAggregation(found.entity, analysesByProspect) };
    },
  });
}

/** One analysis of a linked prospect; undefined when it was deleted, `broken` when segments were. */
async function linkedAnalysis(tracker: Tracker, partition: string, paId: string): Promise<LinkedAnalysis | undefined> {
  try {
    return await loadModel(tracker, partition, paId, "/prospects");
  } catch (error) {
    if (!(error instanceof DerrickError)) throw error;
    if (error.status === 404) return undefined;
    if (error.status !== 409) throw error;
    const found = await tracker.get<Envelope<Analysis>>(entityKey(partition, "prospectanalyses", paId));
    if (!found) return undefined;
    return {
      broken: {
        pa: found.entity,
        version: found.version,
        missingSegmentAnalysisIds: (error.extensions.missing as string[] | undefined) ?? [],
      },
    };
  }
}

const fullCycleRequest = (input: FullCycleAggregationRequest, partition: string): Aggregation => {
  const body = input.body;
  // The key holds only what the result depends on: the levels as a set and the company. The currency is only echoed,
  // added after the cache: keyed by it, any caller could fill the cache and the dependents lists without end (docs/reporting.md#caching).
  const levels = LEVELS.filter((level) => !body.levels || body.levels.includes(level));
  const params = createHash("sha1")
    .update(JSON.stringify([levels, body.companyId ?? null]))
    .digest("hex")
    .slice(0, 16);
  const echo = body.currency ? { currency: body.currency } : undefined;
  return {
    key: resultKey(partition, "fullcycle", body.prospectAnalysisId, params),
    ...(echo ? { echo } : {}),
    task: { aggregation: "fullcycle", id: body.prospectAnalysisId, request: input },
    plan: async (tracker) => {
      const { model } = await loadModel(tracker, partition, body.prospectAnalysisId, "/body/prospectAnalysisId");
      requireComparableVolumes(model);
      const index = await tracker.get<{ ids: string[] }>(indexKey(partition, "byanalysis", body.prospectAnalysisId));
      const analyses = (
        await Promise.all(
          (index?.ids ?? []).map((fid) =>
            tracker.get<Envelope<FullCycleAnalysis & { fullCycleAnalysisId: string }>>(entityKey(partition, "fullcycleanalyses", fid)),
          ),
        )
      ).filter((f) => f !== undefined);
      const unproducible = analyses.flatMap((a) => {
        const problem = productionProblem(
          a.entity.production,
          model.units,
          model.basis,
          `/fullcycleanalyses/${a.entity.fullCycleAnalysisId}/production`,
        );
        return problem ? [problem] : [];
      });
      if (unproducible.length)
        throw conflict(`a full cycle analysis of ${body.prospectAnalysisId} cannot be computed: ${unproducible[0]!.message}`, {
          errors: unproducible,
        });
      let workingInterest: number | undefined;
      if (body.companyId) workingInterest = await companyInterest(tracker, partition, model, body.companyId);
      const needsSimulation = analyses.some(
        (a) =>
          a.entity.production && a.entity.production.recoverable === undefined && a.entity.resourceCase && a.entity.resourceCase !== "mean",
      );
      return planOf(aggregationWork.fullcycle(model, needsSimulation), {
        kind: "fullcycle",
        model,
        prospectAnalysisId: body.prospectAnalysisId,
        ...(body.companyId ? { company: { companyId: body.companyId, workingInterest } } : {}),
        levels,
        analyses: analyses.map((a) => ({ fc: a.entity, version: a.version })),
        needsSimulation,
      });
    },
  };
};

export async function fullCycleAggregate(input: FullCycleAggregationRequest, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  return answer(deps, partition, fullCycleRequest(input, partition));
}

/** The company's working interest: the prospect analysis's entitlement, else its share in the latest version of a linked license. */
async function companyInterest(tracker: Tracker, partition: string, model: ProspectModel, companyId: string): Promise<number> {
  if (model.pa.entitlement?.companyId === companyId) return model.pa.entitlement.workingInterest;
  for (const lid of model.pa.licenseIds ?? []) {
    const license = await tracker.get<Envelope<License>>(entityKey(partition, "licenses", lid));
    const latest = license?.entity.versions.reduce((a, v) => (v.versionNumber > a.versionNumber ? v : a));
    const held = latest?.licensees.find((l) => l.companyId === companyId);
    if (held) return held.interest;
  }
  throw fieldError([
    {
      pointer: "/body/companyId",
      message: `company ${companyId} holds no interest in prospect analysis ${model.pa.prospectAnalysisId} (entitlement or linked licenses)`,
    },
  ]);
}

const scenarioRequest = (input: AggregationRef, partition: string): Aggregation => {
  const id = checkToken(input.id, "/params/id");
  return {
    key: resultKey(partition, "scenarios", id),
    task: { aggregation: "scenarios", id, request: input },
    plan: async (tracker) => {
      const found = await tracker.get<Envelope<MultipleScenarioAnalysis & { multipleScenarioAnalysisId: string; simulation: Simulation }>>(
        entityKey(partition, "multiplescenarioanalyses", id),
      );
      if (!found) throw notFound(`multiple scenario analysis ${id} does not exist`);
      const msa = found.entity;
      const scenarios = await Promise.all(
        msa.scenarios.map(async (scenario, i) => {
          try {
            return {
              scenario,
              model: (await loadModel(tracker, partition, scenario.prospectAnalysisId, `/scenarios/${i}/prospectAnalysisId`)).model,
            };
          } catch (error) {
            if (error instanceof DerrickError && error.status === 404)
              throw conflict(`scenario ${scenario.scenarioId} names prospect analysis ${scenario.prospectAnalysisId}, which was deleted`);
            throw error;
          }
        }),
      );
      for (const { model } of scenarios) requireComparableVolumes(model);
      // Checked on write too; an enrolled prospect analysis may have gained segments since.
      const work = scenarioWorkProblem(
        scenarios.map(({ model }) => model.segments.length),
        msa.simulation.trials,
        "/simulation/trials",
      );
      if (work) throw conflict(`${id} cannot be aggregated: ${work.message}`, { errors: [work] });
      const problems = scenarioProblems(
        scenarios.map(({ scenario, model }) => ({ scenarioId: scenario.scenarioId, units: model.units, basis: model.basis })),
        (i) => `/scenarios/${i}`,
      );
      if (problems.length)
        throw conflict(`the scenarios of ${id} cannot be weighted together: ${problems[0]!.message}`, { errors: problems });
      return planOf(
        aggregationWork.scenarios(
          scenarios.map(({ model }) => model),
          msa.simulation.trials,
        ),
        { kind: "scenarios", msa, scenarios },
      );
    },
  };
};

export async function scenarioAggregate(input: AggregationRef, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  return answer(deps, partition, scenarioRequest(input, partition));
}

/** How a task's stored request is run again, per aggregation. */
const TASK_AGGREGATIONS: Record<TaskAggregation, (request: never, partition: string) => Aggregation> = {
  prospect: prospectRequest,
  fullcycle: fullCycleRequest,
  scenarios: scenarioRequest,
};

// ---- tasks ----------------------------------------------------------------------------------------

export async function getAggregationTask(input: TaskPath, ctx: RequestContext, deps: ReportingDeps): Promise<AggregationTask> {
  const partition = callerPartition(ctx);
  const taskId = checkToken(input.taskId, "/params/taskId");
  if (!deps.tasks) throw notFound(`aggregation task ${taskId} does not exist`);
  return taskView(await deps.tasks.get(partition, taskId));
}

export async function getAggregationTaskResult(input: TaskPath, ctx: RequestContext, deps: ReportingDeps) {
  const partition = callerPartition(ctx);
  const taskId = checkToken(input.taskId, "/params/taskId");
  if (!deps.tasks) throw notFound(`aggregation task ${taskId} does not exist`);
  return deps.tasks.result(partition, taskId);
}
