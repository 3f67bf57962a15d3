/**
 * Economic indicators of a yearly net cash flow series: NPV (end-of-year or mid-year discounting
 * to the NPV year), IRR by a bracketing root finder (null when NPV(r) has no root), payout
 * year, profit-to-investment, EMV and break-even chance of success.
 */

export type YearValue = { year: number; value: number };
export type Discounting = "endOfYear" | "midYear";

/** NPV(r) = Σ NCF_t / (1 + r)^(t − t_NPV) (mid-year: exponent − 0.5). */
export function npv(flows: readonly YearValue[], rate: number, npvYear: number, discounting: Discounting = "endOfYear"): number {
  const shift = discounting === "midYear" ? 0.5 : 0;
  let total = 0;
  for (const { year, value } of flows) total += value / (1 + rate) ** (year - npvYear - shift);
  return total;
}

/** Rates scanned: fine near 0 where IRRs live, then geometric up to 1,000,000%. */
const GRID: number[] = (() => {
  const rates: number[] = [];
  for (let r = -0.99; r < 1; r += 0.01) rates.push(Math.round(r * 100) / 100);
  for (let r = 1; r <= 10_000; r *= 1.1) rates.push(r);
  return rates;
})();

/**
 * The lowest rate in (−99%, 1,000,000%] where NPV = 0, or null: sign changes on a grid are bisected (robust where Newton
 * diverges), and a dip of |NPV| between grid points is searched too, where two close roots leave no sign change
 * (docs/reporting.md#how-the-numbers-are-computed).
 */
export function irr(flows: readonly YearValue[]): number | null {
  // No flows, or none but zeros: NPV is 0 at every rate, so no rate is the IRR (the scan would
  // answer its first rate, −99%).
  if (flows.every((f) => f.value === 0)) return null;
  const t0 = Math.min(...flows.map((f) => f.year));
  const f = (r: number) => npv(flows, r, t0);
  const values = GRID.map(f);
  for (let k = 0; k < GRID.length; k++) {
    const fk = values[k]!;
    if (fk === 0) return GRID[k]!;
    if (k === 0) continue;
    const prev = values[k - 1]!;
    if (!Number.isFinite(prev) || !Number.isFinite(fk)) continue;
    if (Math.sign(fk) !== Math.sign(prev)) return bisect(f, GRID[k - 1]!, GRID[k]!, prev);
    const next = values[k + 1];
    if (next === undefined || !Number.isFinite(next) || Math.sign(next) !== Math.sign(fk)) continue;
    if (Math.abs(fk) < Math.abs(prev) && Math.abs(fk) <= Math.abs(next)) {
      // |NPV| dips between GRID[k−1] and GRID[k+1] without a sign change on the grid.
      const sign = Math.sign(fk);
      const dip = goldenMinimum((r) => sign * f(r), GRID[k - 1]!, GRID[k + 1]!);
      const fdip = f(dip);
      if (fdip === 0) return dip;
      if (Math.sign(fdip) !== sign) return bisect(f, GRID[k - 1]!, dip, prev);
    }
  }
  return null;
}

/** The minimizer of g on [lo, hi] by golden-section search (g unimodal there), to 1e-12. */
function goldenMinimum(g: (r: number) => number, lo: number, hi: number): number {
  const ratio = (Math.sqrt(5) - 1) / 2;
  let a = lo;
  let b = hi;
  let c = b - ratio * (b - a);
  let d = a + ratio * (b - a);
  let gc = g(c);
  let gd = g(d);
  for (let i = 0; i < 200 && b - a > 1e-12; i++) {
    if (gc < gd) {
      b = d;
      d = c;
      gd = gc;
      c = b - ratio * (b - a);
      gc = g(c);
    } else {
      a = c;
      c = d;
      gc = gd;
      d = a + ratio * (b - a);
      gd = g(d);
    }
    if (gc < 0 || gd < 0) return gc < gd ? c : d; // already across zero: enough to bracket the root
  }
  return (a + b) / 2;
}

function bisect(f: (r: number) => number, lo: number, hi: number, flo: number): number {
  for (let i = 0; i < 200 && hi - lo > 1e-12; i++) {
    const mid = (lo + hi) / 2;
    const fmid = f(mid);
    if (fmid === 0) return mid;
    if (Math.sign(fmid) === Math.sign(flo)) {
      lo = mid;
      flo = fmid;
    } else hi = mid;
  }
  return (lo + hi) / 2;
}

/**
 * The first year from which cumulative NCF stays positive to the end ("the time at which
 * cumulative NCF turns positive": a year where it is exactly 0 has not paid out yet); null when
 * it never does.
 */
export function payoutYear(flows: readonly YearValue[]): number | null {
  const sorted = [...flows].sort((a, b) => a.year - b.year);
  let cumulative = 0;
  let candidate: number | null = null;
  for (const { year, value } of sorted) {
    cumulative += value;
    if (cumulative > 0) candidate ??= year;
    else candidate = null;
  }
  return candidate;
}

/** Most negative cumulative NCF (0 when never negative). */
export function maxExposure(flows: readonly YearValue[]): number {
  let cumulative = 0;
  let worst = 0;
  for (const { value } of [...flows].sort((a, b) => a.year - b.year)) {
    cumulative += value;
    worst = Math.min(worst, cumulative);
  }
  return worst;
}

/** Undiscounted cumulative NCF ÷ investment; null without investment. */
export function profitToInvestment(flows: readonly YearValue[], investment: number): number | null {
  if (!(investment > 0)) return null;
  return flows.reduce((acc, f) => acc + f.value, 0) / investment;
}

/** EMV = Pg·NPV − (1 − Pg)·dry-hole cost. */
export const emv = (pg: number, npvSuccess: number, dryHoleCost: number) => pg * npvSuccess - (1 - pg) * dryHoleCost;

/**
 * The Pg at which EMV = 0: C_dry / (NPV + C_dry). Null when no chance of success in [0, 1] breaks
 * even: a success case that is not worth more than nothing (NPV ≤ 0) loses money at any Pg.
 */
export function breakevenPg(npvSuccess: number, dryHoleCost: number): number | null {
  if (!(npvSuccess > 0) || !(dryHoleCost >= 0)) return null;
  return dryHoleCost / (npvSuccess + dryHoleCost);
}

/**
 * The flat price where `npvAt(price)` = 0, by bisection to 1e-9 relative, bracketed by doubling from `scale` at most 60
 * times: NPV rises with the price (royalty and tax take less than all of an increase), so the root is unique. 0 when NPV
 * is not negative at price 0; null when no bracketed price reaches NPV 0.
 */
export function breakevenPrice(npvAt: (price: number) => number, scale: number): number | null {
  if (npvAt(0) >= 0) return 0;
  let lo = 0;
  let hi = scale > 0 ? scale : 1;
  for (let i = 0; npvAt(hi) < 0; i++) {
    if (i >= 60) return null;
    lo = hi;
    hi *= 2;
  }
  for (let i = 0; i < 200 && hi - lo > 1e-9 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (npvAt(mid) < 0) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
