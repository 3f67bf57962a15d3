/**
 * Outcome trees of one prospect analysis: which combinations of segment successes can happen and with what probability,
 * exact up to EXACT_MAX_SEGMENTS segments (2^16 leaves), seeded Monte Carlo frequencies beyond, zero branches pruned.
 * The shape per model, the invariants (Σ joint = 1, Σ joint × volume = the risked mean) and the `other` fold past
 * `maxLeaves` are in docs/reporting.md#how-the-numbers-are-computed.
 */
import { DependencyModel } from "./chance.ts";
import { drawSuccesses } from "./monte-carlo.ts";
import { createRandom } from "./prng.ts";

export const EXACT_MAX_SEGMENTS = 16;
/** Outcomes of one outcome tree at most, over all its scenarios (one 16-segment tree's 2^16). */
export const MAX_TREE_OUTCOMES = 2 ** 16;

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
  /** The less likely outcomes beyond the tree's allotment, folded into one. */
  other?: FoldedLeaves;
};

/** Outcomes folded together: how many, their summed probabilities and their mean volume. */
export type FoldedLeaves = { outcomes: number; branchProbability: number; probability: number; volumeMean: number };

export type TreeInput = {
  model: DependencyModel;
  pc: number;
  ps: readonly number[];
  means: readonly number[];
  trials: number;
  seed: number;
};

const volumeOf = (states: readonly boolean[], means: readonly number[]) =>
  states.reduce((acc, s, i) => (s ? acc + (means[i] ?? 0) : acc), 0);

/**
 * How many outcomes a tree can have at most (before folding): 2^k for the k segments whose outcome
 * is uncertain (a chance of 0 or 1 leaves one state), n + 1 nested ones under full dependence, and
 * never more than the trials when sampled.
 */
export function outcomeBound({ model, pc, ps, trials }: Pick<TreeInput, "model" | "pc" | "ps" | "trials">): number {
  if (!(pc > 0)) return 0;
  if (model === DependencyModel.fullyDependent) return ps.length + 1;
  const chances = model === DependencyModel.independent ? ps.map((p) => pc * p) : ps;
  const bound = 2 ** chances.filter((p) => p > 0 && p < 1).length;
  return ps.length > EXACT_MAX_SEGMENTS ? Math.min(bound, trials) : bound;
}

/**
 * Shares `total` outcomes among trees of at most `bounds[i]` outcomes each: the smallest get all
 * theirs, the others split what is left evenly (at least 1 each).
 */
export function allotOutcomes(bounds: readonly number[], total: number): number[] {
  const allot = bounds.map(() => 0);
  const order = [...bounds.keys()].sort((a, b) => bounds[a]! - bounds[b]!);
  let left = total;
  order.forEach((i, k) => {
    allot[i] = Math.max(1, Math.min(bounds[i]!, Math.floor(left / (order.length - k))));
    left -= allot[i]!;
  });
  return allot;
}

/** Keeps the `maxLeaves` most likely leaves (one of them the fold, when any is folded), in their order. */
function foldRarest(tree: ProspectTree, maxLeaves: number): ProspectTree {
  const { leaves } = tree;
  if (leaves.length <= maxLeaves) return tree;
  const keep = Math.max(0, maxLeaves - 1);
  const byChance = [...leaves.keys()].sort((a, b) => leaves[b]!.probability - leaves[a]!.probability || a - b);
  const kept = new Uint8Array(leaves.length);
  for (let k = 0; k < keep; k++) kept[byChance[k]!] = 1;
  const other: FoldedLeaves = { outcomes: 0, branchProbability: 0, probability: 0, volumeMean: 0 };
  let weighted = 0;
  const out: TreeLeaf[] = [];
  leaves.forEach((leaf, i) => {
    if (kept[i]) return void out.push(leaf);
    other.outcomes++;
    other.branchProbability += leaf.branchProbability;
    other.probability += leaf.probability;
    weighted += leaf.probability * leaf.volumeMean;
  });
  other.volumeMean = other.probability > 0 ? weighted / other.probability : 0;
  return { ...tree, leaves: out, other };
}

export function outcomeTree(input: TreeInput, maxLeaves = MAX_TREE_OUTCOMES): ProspectTree {
  // Full dependence has n + 1 outcomes whatever n: always exact.
  const sampled = input.ps.length > EXACT_MAX_SEGMENTS && input.model !== DependencyModel.fullyDependent;
  return foldRarest(sampled ? sampledTree(input, maxLeaves) : exactTree(input), maxLeaves);
}

function exactTree(input: TreeInput): ProspectTree {
  const { model, pc, ps, means } = input;
  const n = ps.length;
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

/**
 * Beyond the exact limit (independent, commonFactor): distinct outcomes seen in `trials` draws, with
 * their frequencies; commonFactor's common branch stays exact, so every draw goes to the combinations
 * under it. Outcomes past `maxLeaves` are folded from their keys: a million never become a million objects.
 */
function sampledTree({ model, pc, ps, means, trials, seed }: TreeInput, maxLeaves: number): ProspectTree {
  const common = model !== DependencyModel.independent;
  if (common && !(pc > 0)) return { method: "MonteCarlo", ...commonNodes(pc), leaves: [] };
  const rng = createRandom(seed);
  const n = ps.length;
  const state = new Uint8Array(n);
  const chars = new Uint16Array(n);
  const counts = new Map<string, number>();
  // Given common success (commonFactor): the common factors held, so draw with Pc = 1.
  const parent = common ? pc : 1;
  const commonSuccessTrials = trials;
  for (let t = 0; t < trials; t++) {
    drawSuccesses(rng, model, common ? 1 : pc, ps, state);
    // One string per outcome, a char per segment ("1" success): one call, not n concatenations.
    for (let i = 0; i < n; i++) chars[i] = state[i] ? 49 : 48;
    const key = String.fromCharCode.apply(null, chars as unknown as number[]);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const leaves: TreeLeaf[] = [];
  const sorted = [...counts.entries()].sort((x, y) => y[1] - x[1]);
  counts.clear();
  const keep = sorted.length > maxLeaves ? Math.max(0, maxLeaves - 1) : sorted.length;
  for (const [key, count] of sorted.slice(0, keep)) {
    const states = [...key].map((c) => c === "1");
    leaves.push({
      states,
      branchProbability: count / commonSuccessTrials,
      probability: (parent * count) / trials,
      volumeMean: volumeOf(states, means),
    });
  }
  let other: FoldedLeaves | undefined;
  if (keep < sorted.length) {
    let folded = 0;
    let weighted = 0;
    for (let k = keep; k < sorted.length; k++) {
      const [key, count] = sorted[k]!;
      folded += count;
      for (let i = 0; i < n; i++) if (key.charCodeAt(i) === 49) weighted += count * (means[i] ?? 0);
    }
    other = {
      outcomes: sorted.length - keep,
      branchProbability: folded / commonSuccessTrials,
      probability: (parent * folded) / trials,
      volumeMean: weighted / folded,
    };
  }
  return { method: "MonteCarlo", ...(common ? commonNodes(pc) : {}), leaves, ...(other ? { other } : {}) };
}
