/**
 * Full-cycle cash flows: a production profile (build-up by wells, plateau, exponential decline: the GeoX gFullCycle
 * parameters), then yearly revenue, royalty, opex, capex and government take under royalty/tax or a PSC, at project,
 * contractor and working-interest level (docs/reporting.md#how-the-numbers-are-computed). Units are the caller's:
 * money = volume × price in whatever scale the inputs use.
 */

export type ProductionModel = {
  /** First production year. */
  firstYear: number;
  /** Volume produced over the life (the product's recoverable volume). */
  recoverable: number;
  wellsPerYear: number;
  /** Volume one well produces per year at its initial rate. */
  wellRatePerYear: number;
  /** Plateau rate as a fraction of the recoverable volume per year (GeoX example 0.13). */
  plateauFraction: number;
  /** Decline starts when this fraction of the recoverable volume remains (GeoX example 0.5). */
  declineStartRemaining: number;
  /** Exponential decline per year (GeoX example 0.18). */
  declineRate: number;
  /** Production stops when the yearly rate falls below this. */
  economicLimit: number;
  maxYears: number;
};

/** Yearly production of one product until the recoverable volume is produced or the limit is hit. */
export function productionProfile(m: ProductionModel): Array<{ year: number; volume: number }> {
  const out: Array<{ year: number; volume: number }> = [];
  const plateau = m.plateauFraction * m.recoverable;
  let cumulative = 0;
  let declining = false;
  let previous = 0;
  for (let k = 0; k < m.maxYears && cumulative < m.recoverable - 1e-12; k++) {
    // Decline needs a rate to decline from: it begins after the first producing year at the
    // earliest (declineStartRemaining 1 declined from 0 and produced nothing).
    if (!declining && out.length > 0 && cumulative >= (1 - m.declineStartRemaining) * m.recoverable) declining = true;
    const rate = declining ? previous * (1 - m.declineRate) : Math.min((k + 1) * m.wellsPerYear * m.wellRatePerYear, plateau);
    // The economic limit ends the decline, not the build-up: a first well's
    // rate below it ramps up with the next wells (it ended the field before its first year).
    if (rate <= 0 || (declining && rate < m.economicLimit)) break;
    const volume = Math.min(rate, m.recoverable - cumulative);
    out.push({ year: m.firstYear + k, volume });
    cumulative += volume;
    previous = volume;
  }
  return out;
}

export type Fiscal = {
  type: "royaltyTax" | "psc";
  royaltyRate: number;
  incomeTaxRate: number;
  costRecoveryCeiling?: number;
  contractorProfitShare?: number;
};

export type YearInputs = { year: number; revenue: number; opex: number; capex: number };

export type CashFlowRow = {
  year: number;
  revenue: number;
  royalty: number;
  opex: number;
  capex: number;
  costRecovery?: number;
  profitOilContractor?: number;
  profitOilGovernment?: number;
  tax: number;
  governmentTake: number;
  netCashFlow: number;
};

export type LevelFlows = { project: CashFlowRow[]; contractor: CashFlowRow[]; workingInterest: CashFlowRow[] };

/**
 * Cash flows per level. Royalty/tax: capex is expensed when spent and losses carry forward.
 * PSC: cost oil = min(ceiling × (revenue − royalty), unrecovered costs + opex + capex), the rest
 * is profit oil split by the contractor share; income tax applies to the contractor's profit oil.
 */
export function cashFlows(years: readonly YearInputs[], fiscal: Fiscal, workingInterest: number): LevelFlows {
  const project: CashFlowRow[] = [];
  const contractor: CashFlowRow[] = [];
  let lossCarried = 0;
  let unrecovered = 0;
  for (const { year, revenue, opex, capex } of [...years].sort((a, b) => a.year - b.year)) {
    project.push({ year, revenue, royalty: 0, opex, capex, tax: 0, governmentTake: 0, netCashFlow: revenue - opex - capex });
    const royalty = fiscal.royaltyRate * revenue;
    // The columns both fiscal regimes fill alike.
    const sharedColumns = { year, revenue, royalty, opex, capex };
    if (fiscal.type === "psc") {
      const ceiling = (fiscal.costRecoveryCeiling ?? 1) * (revenue - royalty);
      const recoverable = unrecovered + opex + capex;
      const costRecovery = Math.min(ceiling, recoverable);
      unrecovered = recoverable - costRecovery;
      const profitOil = revenue - royalty - costRecovery;
      const profitOilContractor = (fiscal.contractorProfitShare ?? 0) * profitOil;
      const profitOilGovernment = profitOil - profitOilContractor;
      const tax = fiscal.incomeTaxRate * Math.max(0, profitOilContractor);
      contractor.push({
        ...sharedColumns,
        costRecovery,
        profitOilContractor,
        profitOilGovernment,
        tax,
        governmentTake: royalty + profitOilGovernment + tax,
        netCashFlow: costRecovery + profitOilContractor - opex - capex - tax,
      });
    } else {
      const income = revenue - royalty - opex - capex - lossCarried;
      const tax = fiscal.incomeTaxRate * Math.max(0, income);
      lossCarried = Math.max(0, -income);
      contractor.push({ ...sharedColumns, tax, governmentTake: royalty + tax, netCashFlow: revenue - royalty - opex - capex - tax });
    }
  }
  return { project, contractor, workingInterest: contractor.map((row) => scaleRow(row, workingInterest)) };
}

export function scaleRow(row: CashFlowRow, factor: number): CashFlowRow {
  const out = { ...row };
  for (const key of Object.keys(out) as Array<keyof CashFlowRow>)
    if (key !== "year" && typeof out[key] === "number") (out[key] as number) *= factor;
  return out;
}

/** The price of a year from a series: the value of that year, else of the latest earlier year, else the first. */
export function priceAt(series: ReadonlyArray<{ year: number; value: number }>, year: number): number {
  let chosen: { year: number; value: number } | undefined;
  for (const point of series) if (point.year <= year && (!chosen || point.year > chosen.year)) chosen = point;
  chosen ??= [...series].sort((a, b) => a.year - b.year)[0];
  return chosen?.value ?? 0;
}
