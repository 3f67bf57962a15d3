/**
 * Outcome trees of one prospect analysis: which combinations of segment successes can happen and with what probability,
 * exact up to EXACT_MAX_SEGMENTS segments (2^16 leaves), seeded Monte Carlo frequencies beyond, zero branches pruned.
 * The shape per model, the invariants (Σ joint = 1, Σ joint × volume = the risked mean) and the `other` fold past
 * `maxLeaves` are in docs/reporting.md#how-the-numbers-are-computed.
 */
import { DependencyModel } from "./chance.ts";
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
 * under it. Outcomes past `maxLeaves` are folded from their counts: a million never become a million objects.
 */
function sampledTree({ model, pc, ps, means, trials, seed }: TreeInput, maxLeaves: number): ProspectTree {
  const common = model !== DependencyModel.independent;
  if (common && !(pc > 0)) return { method: "MonteCarlo", ...commonNodes(pc), leaves: [] };
  const rng = createRandom(seed);
  const n = ps.length;
  // Given common success (commonFactor): the common factors held, so draw with Pc = 1.
  const parent = common ? pc : 1;
  const commonSuccessTrials = trials;
  const seen = new OutcomeCounts(n, trials);
  // drawSuccesses' draws, in its order, straight into the outcome's bits: commonFactor with Pc = 1 still spends its
  // common uniform (always held), and independent compares with Pc·ps_i.
  const chance = Float64Array.from(ps, (p) => (common ? p : pc * p));
  const low = Math.min(n, 32);
  for (let t = 0; t < trials; t++) {
    if (common) rng.uniform();
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < low; i++) lo |= (rng.uniform() < chance[i]! ? 1 : 0) << i;
    for (let i = low; i < n; i++) hi |= (rng.uniform() < chance[i]! ? 1 : 0) << (i - 32);
    seen.add(lo, hi);
  }
  // Most frequent first, ties in the order first seen (what a stable sort by count gives).
  const order = seen.byCount();
  const keep = order.length > maxLeaves ? Math.max(0, maxLeaves - 1) : order.length;
  const leaves: TreeLeaf[] = [];
  for (let k = 0; k < keep; k++) {
    const id = order[k]!;
    const states = seen.states(id);
    const count = seen.count(id);
    leaves.push({
      states,
      branchProbability: count / commonSuccessTrials,
      probability: (parent * count) / trials,
      volumeMean: volumeOf(states, means),
    });
  }
  let other: FoldedLeaves | undefined;
  if (keep < order.length) {
    let folded = 0;
    let weighted = 0;
    const mean = Float64Array.from({ length: n }, (_, i) => means[i] ?? 0);
    for (let k = keep; k < order.length; k++) {
      const id = order[k]!;
      const count = seen.count(id);
      folded += count;
      // The successful segments by their set bits, lowest first: the sum's terms in segment order, as before.
      for (let w = 0; w < WORDS; w++) {
        for (let bits = seen.word(id, w); bits !== 0; bits &= bits - 1) {
          weighted += count * mean[32 * w + 31 - Math.clz32(bits & -bits)]!;
        }
      }
    }
    other = {
      outcomes: order.length - keep,
      branchProbability: folded / commonSuccessTrials,
      probability: (parent * folded) / trials,
      volumeMean: weighted / folded,
    };
  }
  return { method: "MonteCarlo", ...(common ? commonNodes(pc) : {}), leaves, ...(other ? { other } : {}) };
}

/** Words per outcome: up to 64 segments, a bit each, in two 32-bit words. */
const WORDS = 2;

/**
 * Distinct outcomes (segment success bits, ≤ 64 segments) counted in an open-addressing table of typed arrays, in the
 * order first seen: a string and a Map entry per trial made 64 segments × 1,000,000 trials take seconds.
 */
export class OutcomeCounts {
  private readonly bits: Int32Array;
  private readonly counts: Int32Array;
  private readonly slots: Int32Array;
  private readonly mask: number;
  private distinct = 0;

  constructor(
    private readonly segments: number,
    maxDistinct: number,
  ) {
    if (segments > 32 * WORDS) throw new RangeError(`at most ${32 * WORDS} segments, not ${segments}`);
    const capacity = Math.max(1, maxDistinct);
    this.bits = new Int32Array(capacity * WORDS);
    this.counts = new Int32Array(capacity);
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.slots = new Int32Array(size).fill(-1);
    this.mask = size - 1;
  }

  get size(): number {
    return this.distinct;
  }

  /** Counts one outcome: segment i succeeded when bit i of `lo` (i < 32) or bit i − 32 of `hi` is set. */
  add(lo: number, hi: number): void {
    let slot = (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) ^ (hi >>> 15)) & this.mask;
    for (;;) {
      const id = this.slots[slot]!;
      if (id < 0) break;
      if (this.bits[id * WORDS] === lo && this.bits[id * WORDS + 1] === hi) {
        this.counts[id]!++;
        return;
      }
      slot = (slot + 1) & this.mask;
    }
    const id = this.distinct++;
    this.slots[slot] = id;
    this.bits[id * WORDS] = lo;
    this.bits[id * WORDS + 1] = hi;
    this.counts[id] = 1;
  }

  count(id: number): number {
    return this.counts[id]!;
  }

  /** Word `w` of the outcome's bits (segments 32·w to 32·w + 31). */
  word(id: number, w: number): number {
    return this.bits[id * WORDS + w]!;
  }

  success(id: number, segment: number): boolean {
    return ((this.bits[id * WORDS + (segment >>> 5)]! >>> (segment & 31)) & 1) === 1;
  }

  states(id: number): boolean[] {
    const out = new Array<boolean>(this.segments);
    for (let i = 0; i < this.segments; i++) out[i] = this.success(id, i);
    return out;
  }

  /** Outcome ids, most frequent first, ties in the order first seen (a counting sort: counts are at most the trials). */
  byCount(): Int32Array {
    let top = 0;
    for (let id = 0; id < this.distinct; id++) top = Math.max(top, this.counts[id]!);
    const start = new Int32Array(top + 2);
    for (let id = 0; id < this.distinct; id++) start[top - this.counts[id]! + 1]!++;
    for (let c = 1; c <= top + 1; c++) start[c]! += start[c - 1]!;
    const order = new Int32Array(this.distinct);
    for (let id = 0; id < this.distinct; id++) order[start[top - this.counts[id]!]!++] = id;
    return order;
  }
}
