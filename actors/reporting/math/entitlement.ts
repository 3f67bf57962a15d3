/** Net (entitled) volumes: gross × share (working interest, or a segment's entitlement share). */
export type Share = { companyId: string; share: number };

export const netVolume = (gross: number, share: number) => gross * share;

/** Per company: net success-case mean and net risked mean of one segment. */
export function segmentEntitlement(shares: readonly Share[], successMean: number, riskedMean: number) {
  return shares.map(({ companyId, share }) => ({
    companyId,
    share,
    netSuccessMean: netVolume(successMean, share),
    netRiskedMean: netVolume(riskedMean, share),
  }));
}
