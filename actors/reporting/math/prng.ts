/**
 * The seeded generator behind every Monte Carlo result: xoshiro128** seeded through splitmix32, small, fast in 32-bit
 * integer arithmetic and fully specified, so the same seed gives the same numbers on every platform and aggregation
 * results are reproducible and cacheable (docs/reporting.md#how-the-numbers-are-computed).
 */

export type Random = {
  /** Uniform in [0, 1), 32 bits of resolution. */
  uniform(): number;
  /** Standard normal (Marsaglia's polar method, both variates used). */
  normal(): number;
};

function splitmix32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

const TWO_POW_32 = 4294967296;

export function createRandom(seed: number): Random {
  return new Xoshiro128(seed);
}

/** State in fields of one monomorphic object: the JIT keeps the hot calls inlined. */
class Xoshiro128 implements Random {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  private spare = 0;
  private hasSpare = false;

  constructor(seed: number) {
    const init = splitmix32(seed);
    this.s0 = init();
    this.s1 = init();
    this.s2 = init();
    this.s3 = init();
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1; // the all-zero state is a fixed point
  }

  uniform(): number {
    const s1 = this.s1;
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    let s0 = this.s0;
    let s2 = this.s2 ^ s0;
    let s3 = this.s3 ^ s1;
    const n1 = s1 ^ s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 11);
    this.s0 = s0;
    this.s1 = n1;
    this.s2 = s2;
    this.s3 = s3;
    return result / TWO_POW_32;
  }

  normal(): number {
    if (this.hasSpare) {
      this.hasSpare = false;
      return this.spare;
    }
    // Marsaglia's polar method: two normals per accepted pair, no trigonometry.
    let u: number;
    let v: number;
    let s: number;
    do {
      u = 2 * this.uniform() - 1;
      v = 2 * this.uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s === 0);
    const factor = Math.sqrt((-2 * Math.log(s)) / s);
    this.spare = v * factor;
    this.hasSpare = true;
    return u * factor;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
