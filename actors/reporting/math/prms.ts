/**
 * PRMS 2018 labels of the low / best / high estimates. Undiscovered (prospect) volumes are
 * Prospective Resources, whose cumulative categories are 1U / 2U / 3U; P90 / P50 / P10 of the
 * success case map onto them in the exceedance convention.
 */
export type PrmsCategory = { class: "ProspectiveResources"; low: "1U"; best: "2U"; high: "3U" };

export const prospectiveResources = (): PrmsCategory => ({ class: "ProspectiveResources", low: "1U", best: "2U", high: "3U" });
