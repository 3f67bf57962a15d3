/** Parses human durations used in configuration: `250ms`, `5s`, `5m`, `2h`, `1d`, or a bare number of milliseconds. */
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) throw new Error(`"${text}" is not a duration (examples: 0, 250ms, 5s, 5m, 2h, 1d)`);
  const value = Number(match[1]) * UNIT_MS[match[2] ?? "ms"]!;
  return Math.round(value);
}
