/**
 * How much computing an aggregation takes, estimated from its inputs alone (segments, products, trials, outcome
 * trees), never from a clock: the same inputs always get the same answer, 200 at once or 202 with a task
 * (docs/reporting.md#large-aggregations-answer-202-with-a-task).
 */
import { DependencyModel } from "./math/chance.ts";
import { EXACT_MAX_SEGMENTS, MAX_TREE_OUTCOMES, outcomeBound } from "./math/outcome-tree.ts";
import type { ProspectModel } from "./aggregate.ts";

/**
 * Work from which an aggregation is answered 202 with a task instead of at once: what this machine computes in about
 * 0.5 s, so that an answer below it (its JSON through NATS and HTTP included) stays within 1 s (bench/reporting-limits.bench.ts).
 */
export const ASYNC_WORK_MIN = 32_000_000;

type Sized = Pick<ProspectModel, "volumes" | "products" | "pc" | "ps"> & {
  pa: { dependency: { model: ProspectModel["pa"]["dependency"]["model"] } };
};

/** What one trial costs beside its draws (the loop, its flags and totals copied for the summaries and a scenario mixture). */
const TRIAL_OVERHEAD = 4;

/**
 * One Monte Carlo run: per trial, each segment's outcome and, for a success, a draw per product it holds, the order
 * statistics of each product, and the trial's own overhead.
 */
function simulationWork(m: Sized, trials: number): number {
  const perTrial = m.volumes.reduce((sum, volumes) => sum + 1 + Object.keys(volumes).length, 0) + m.products.length + TRIAL_OVERHEAD;
  return trials * perTrial;
}

/**
 * The outcome tree of one scenario: trials × segments draws when sampled, and its nodes, each an object of a key per
 * segment turned into JSON: ~8 times a draw each (bench/reporting-limits.bench.ts).
 */
function treeWork(m: Sized, trials: number): number {
  const n = m.ps.length;
  const outcomes = Math.min(MAX_TREE_OUTCOMES, outcomeBound({ model: m.pa.dependency.model, pc: m.pc, ps: m.ps, trials }));
  const sampled = n > EXACT_MAX_SEGMENTS && m.pa.dependency.model !== DependencyModel.fullyDependent;
  return (sampled ? trials * n : 0) + outcomes * n * 8;
}

export const aggregationWork = {
  prospect: (m: Sized & { pa: { simulation: { trials: number } } }) => simulationWork(m, m.pa.simulation.trials),
  /** Only a resource case other than the mean, without a given recoverable volume, runs the simulation. */
  fullcycle: (m: Sized & { pa: { simulation: { trials: number } } }, simulates: boolean) =>
    simulates ? simulationWork(m, m.pa.simulation.trials) : 0,
  scenarios: (models: readonly Sized[], trials: number) =>
    models.reduce((sum, m) => sum + simulationWork(m, trials) + treeWork(m, trials), 0),
};
