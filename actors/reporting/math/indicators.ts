/**
 * Economic indicators of a yearly net cash flow series: NPV (end-of-year or mid-year discounting
 * to the NPV year), IRR by a bracketing root finder (null when NPV(r) never changes sign), payout
 * year, profit-to-investment, EMV and break-even chance of success.
 */

export type YearValue = { year: number; value: number };
export type Discounting = "endOfYear" | "midYear";

/** NPV(r) = Σ NCF_t / (1 + r)^(t − t_NPV) (mid-year: exponent − 0.5). */
export function npv(flows: readonly YearValue[], rate: number, npvYear: number, discounting: Discounting = "endOfYear"): number {
  const shift = discounting === "midYear" ? 0.5 : 0;
  let total = 0;
  for (const { year, value } of flows) total += value / Math.pow(1 + rate, year - npvYear - shift);
  return total;
}

/** Rates scanned for a sign change: fine near 0 where IRRs live, coarse up to 10,000%. */
const GRID: number[] = (() => {
  const rates: number[] = [];
  for (let r = -0.99; r < 1; r += 0.01) rates.push(Math.round(r * 100) / 100);
  for (let r = 1; r <= 100; r *= 1.1) rates.push(r);
  return rates;
})();

/**
 * The rate where NPV = 0. Scans the grid upward from −99% for the first sign change, then
 * bisects (robust where Newton diverges) to 1e-12. With several sign changes (non-conventional
 * flows) the lowest rate is returned; with none, null.
 */
export function irr(flows: readonly YearValue[]): number | null {
  if (flows.length === 0) return null;
  const t0 = Math.min(...flows.map((f) => f.year));
  const f = (r: number) => npv(flows, r, t0);
  let lo = GRID[0]!;
  let flo = f(lo);
  if (flo === 0) return lo;
  for (let k = 1; k < GRID.length; k++) {
    const hi = GRID[k]!;
    const fhi = f(hi);
    if (fhi === 0) return hi;
    if (Number.isFinite(flo) && Number.isFinite(fhi) && Math.sign(fhi) !== Math.sign(flo)) return bisect(f, lo, hi, flo);
    lo = hi;
    flo = fhi;
  }
  return null;
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

/** The first year from which cumulative NCF stays ≥ 0 to the end; null when it ends negative. */
export function payoutYear(flows: readonly YearValue[]): number | null {
  const sorted = [...flows].sort((a, b) => a.year - b.year);
  let cumulative = 0;
  let candidate: number | null = null;
  for (const { year, value } of sorted) {
    cumulative += value;
    if (cumulative >= 0) candidate ??= year;
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

/** The Pg at which EMV = 0: C_dry / (NPV + C_dry); null when NPV + C_dry ≤ 0 (no Pg breaks even). */
export function breakevenPg(npvSuccess: number, dryHoleCost: number): number | null {
  const denominator = npvSuccess + dryHoleCost;
  return denominator > 0 ? dryHoleCost / denominator : null;
}
