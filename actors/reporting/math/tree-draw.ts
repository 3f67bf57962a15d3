/** The outcome draw of the sampled outcome tree: like monte-carlo.ts, but tells whether the common factors held. */
import { DependencyModel } from "./chance.ts";
import type { Random } from "./prng.ts";

export { DependencyModel };

/** Fills `out` with segment successes; returns whether the common factors succeeded (true for `independent`). */
export function drawSuccessesFor(rng: Random, model: DependencyModel, pc: number, ps: readonly number[], out: Uint8Array): boolean {
  const n = ps.length;
  if (model === DependencyModel.independent) {
    for (let i = 0; i < n; i++) out[i] = rng.uniform() < pc * ps[i]! ? 1 : 0;
    return true;
  }
  const u = rng.uniform();
  if (u >= pc) {
    out.fill(0);
    return false;
  }
  if (model === DependencyModel.fullyDependent) {
    // Conditional on common success, u/pc is uniform: nested outcomes of ps_i.
    const v = u / pc;
    for (let i = 0; i < n; i++) out[i] = v < ps[i]! ? 1 : 0;
  } else {
    for (let i = 0; i < n; i++) out[i] = rng.uniform() < ps[i]! ? 1 : 0;
  }
  return true;
}
