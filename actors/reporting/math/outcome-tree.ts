/**
 * Outcome trees of one prospect analysis: which combinations of segment successes can happen and
 * with what probability. Exact enumeration up to EXACT_MAX_SEGMENTS segments (2^16 leaves), seeded
 * Monte Carlo frequencies beyond; branches with probability 0 are pruned.
 *
 * Shape per model (probabilities are conditional on the parent, `joint` is the product along the path):
 *   commonFactor   — commonFailure (1 − Pc) and commonSuccess (Pc) → 2^n combinations of ps_i;
 *   independent    — 2^n combinations of Pg_i directly (no common node: the common factors are per segment);
 *   fullyDependent — commonFailure / commonSuccess, then the n + 1 nested outcomes ("the k most
 *                    likely segments succeed") of ps_i.
 * A leaf's volume is the sum of the success-case means of its successful segments, so
 * Σ joint × volume = the risked mean exactly (under enumeration).
 */
import { DependencyModel } from "./chance.ts";
import { drawSuccesses } from "./monte-carlo.ts";
import { createRandom } from "./prng.ts";

export const EXACT_MAX_SEGMENTS = 16;

export type TreeLeaf = {
  /** Success (true) per segment, in the order given. */
  states: boolean[];
  /** Probability conditional on the leaf's parent (common success, or the scenario). */
  branchProbability: number;
  /** Probability of the leaf within its prospect analysis (multiply by the scenario's for the tree). */
  probability: number;
  volumeMean: number;
};

export type ProspectTree = {
  method: "exact" | "MonteCarlo";
  /** Present for commonFactor and fullyDependent: P(common failure) = 1 − Pc (pruned when 0). */
  commonFailure?: number;
  commonSuccess?: number;
  leaves: TreeLeaf[];
};

export type TreeInput = { model: DependencyModel; pc: number; ps: readonly number[]; means: readonly number[]; trials: number; seed: number };

const volumeOf = (states: readonly boolean[], means: readonly number[]) => states.reduce((acc, s, i) => (s ? acc + (means[i] ?? 0) : acc), 0);

export function outcomeTree(input: TreeInput): ProspectTree {
  const { model, pc, ps, means } = input;
  const n = ps.length;
  if (n > EXACT_MAX_SEGMENTS) return sampledTree(input);
  const common = model !== DependencyModel.independent;
  const branchOf: number[] = common ? [...ps] : ps.map((p) => pc * p);
  const leaves: TreeLeaf[] = [];
  const parent = common ? pc : 1;
  if (model === DependencyModel.fullyDependent) {
    // Nested: order by chance, descending; "k most likely succeed" has ps_(k) − ps_(k+1).
    const order = [...ps.keys()].sort((a, b) => ps[b]! - ps[a]!);
    for (let k = 0; k <= n; k++) {
      const upper = k === 0 ? 1 : ps[order[k - 1]!]!;
      const lower = k === n ? 0 : ps[order[k]!]!;
      const branch = upper - lower;
      if (!(branch > 0)) continue;
      const states = new Array<boolean>(n).fill(false);
      for (let r = 0; r < k; r++) states[order[r]!] = true;
      leaves.push({ states, branchProbability: branch, probability: parent * branch, volumeMean: volumeOf(states, means) });
    }
  } else {
    const total = 2 ** n;
    for (let mask = total - 1; mask >= 0; mask--) {
      let branch = 1;
      const states = new Array<boolean>(n);
      for (let i = 0; i < n; i++) {
        const success = ((mask >>> (n - 1 - i)) & 1) === 1;
        states[i] = success;
        branch *= success ? branchOf[i]! : 1 - branchOf[i]!;
        if (branch === 0) break;
      }
      if (!(branch > 0)) continue;
      leaves.push({ states, branchProbability: branch, probability: parent * branch, volumeMean: volumeOf(states, means) });
    }
  }
  if (parent === 0) leaves.length = 0;
  return { method: "exact", ...(common ? commonNodes(pc) : {}), leaves };
}

function commonNodes(pc: number): Pick<ProspectTree, "commonFailure" | "commonSuccess"> {
  return { ...(pc < 1 ? { commonFailure: 1 - pc } : {}), ...(pc > 0 ? { commonSuccess: pc } : {}) };
}

/** Beyond the exact limit: distinct outcomes seen in `trials` draws, with their frequencies. */
function sampledTree({ model, pc, ps, means, trials, seed }: TreeInput): ProspectTree {
  const rng = createRandom(seed);
  const n = ps.length;
  const state = new Uint8Array(n);
  const counts = new Map<string, number>();
  const common = model !== DependencyModel.independent;
  let commonSuccessTrials = 0;
  for (let t = 0; t < trials; t++) {
    const commonOk = drawSuccesses(rng, model, pc, ps, state);
    if (common && !commonOk) continue;
    commonSuccessTrials++;
    let key = "";
    for (let i = 0; i < n; i++) key += state[i] ? "1" : "0";
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const leaves: TreeLeaf[] = [];
  for (const [key, count] of [...counts.entries()].sort((x, y) => y[1] - x[1])) {
    const states = [...key].map((c) => c === "1");
    leaves.push({ states, branchProbability: count / commonSuccessTrials, probability: count / trials, volumeMean: volumeOf(states, means) });
  }
  if (!common) return { method: "MonteCarlo", leaves };
  const pcHat = commonSuccessTrials / trials;
  return { method: "MonteCarlo", ...commonNodes(pcHat), leaves };
}
