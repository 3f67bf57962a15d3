/**
 * The seeded generator behind every Monte Carlo result: xoshiro128** (Blackman & Vigna, 2018),
 * 128 bits of state, seeded from one 32-bit integer through splitmix32 so that nearby seeds give
 * unrelated streams. Chosen because it is small, fast in 32-bit integer JS arithmetic (Math.imul),
 * passes BigCrush, and is fully specified: the same seed gives the same numbers on every platform,
 * which is what makes the aggregation results reproducible and cacheable.
 */

export type Random = {
  /** Uniform in [0, 1), 32 bits of resolution. */
  uniform(): number;
  /** Standard normal (Box–Muller, both variates used). */
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
  const init = splitmix32(seed);
  let s0 = init();
  let s1 = init();
  let s2 = init();
  let s3 = init();
  if ((s0 | s1 | s2 | s3) === 0) s0 = 1; // the all-zero state is a fixed point
  const next = (): number => {
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl(s3, 11);
    return result;
  };
  let spare = 0;
  let hasSpare = false;
  const uniform = () => next() / TWO_POW_32;
  return {
    uniform,
    normal() {
      if (hasSpare) {
        hasSpare = false;
        return spare;
      }
      // 1 − u is in (0, 1]: log never sees 0.
      const radius = Math.sqrt(-2 * Math.log(1 - uniform()));
      const angle = 2 * Math.PI * uniform();
      spare = radius * Math.sin(angle);
      hasSpare = true;
      return radius * Math.cos(angle);
    },
  };
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
