/**
 * ES date math in range bounds (`now`, `now-1d`, `now/d`, `2017-01-01||+1M/d`): an anchor (`now`, or
 * a date followed by `||`), whole-unit additions and subtractions, then an optional rounding to a
 * unit. Units: y, M, w, d, h/H, m, s; UTC. Rounding goes up (to the unit's last millisecond) for `gt`
 * and `lte` bounds and down for `gte` and `lt`, as ES does; the caller says which.
 */
import { parseDate } from "../documents.ts";

type Unit = "y" | "M" | "w" | "d" | "h" | "H" | "m" | "s";
type DateMath = { anchor: string; steps: Array<{ amount: number; unit: Unit }>; round?: Unit };

const MATH = /^(?:(now)|(.+?)\|\|)((?:[+-]\d+[yMwdhHms])*)(?:\/([yMwdhHms]))?$/;
const STEP = /([+-]\d+)([yMwdhHms])/g;
const MS: Partial<Record<Unit, number>> = { w: 604_800_000, d: 86_400_000, h: 3_600_000, H: 3_600_000, m: 60_000, s: 1_000 };

/** Whether a bound is meant as date math (starts with `now` or holds `||`), valid or not. */
export function looksLikeDateMath(text: string): boolean {
  return /^now(?![A-Za-z0-9_])/.test(text) || text.includes("||");
}

function parts(text: string): DateMath | undefined {
  const m = MATH.exec(text);
  if (!m) return undefined;
  const anchor = m[1] ?? m[2]!;
  if (anchor !== "now" && parseDate(anchor) === undefined) return undefined;
  const steps = [...m[3]!.matchAll(STEP)].map((s) => ({ amount: Number(s[1]), unit: s[2] as Unit }));
  return { anchor, steps, ...(m[4] ? { round: m[4] as Unit } : {}) };
}

/** Whether a date-math bound is well formed (the parser answers 400 with its position otherwise). */
export function isValidDateMath(text: string): boolean {
  return parts(text) !== undefined;
}

function add(epoch: number, amount: number, unit: Unit): number {
  if (unit !== "y" && unit !== "M") return epoch + amount * MS[unit]!;
  // Calendar months, the day clamped to the target month's last (Jan 31 + 1M = Feb 28), as java.time does.
  const d = new Date(epoch);
  const months = d.getUTCFullYear() * 12 + d.getUTCMonth() + (unit === "y" ? 12 * amount : amount);
  const year = Math.floor(months / 12);
  const month = months - year * 12;
  const day = Math.min(d.getUTCDate(), new Date(Date.UTC(year, month + 1, 0)).getUTCDate());
  return Date.UTC(year, month, day) + (epoch - Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
}

function roundDown(epoch: number, unit: Unit): number {
  const d = new Date(epoch);
  const [y, mo, day] = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()];
  switch (unit) {
    case "y":
      return Date.UTC(y, 0, 1);
    case "M":
      return Date.UTC(y, mo, 1);
    case "w":
      // ISO weeks start on Monday.
      return Date.UTC(y, mo, day - ((d.getUTCDay() + 6) % 7));
    default:
      return Math.floor(epoch / MS[unit]!) * MS[unit]!;
  }
}

/** The epoch ms of a date-math bound, or undefined when it is not date math. */
export function parseDateMath(text: string, options: { roundUp?: boolean; now?: number } = {}): number | undefined {
  const math = parts(text);
  if (!math) return undefined;
  let epoch = math.anchor === "now" ? (options.now ?? Date.now()) : parseDate(math.anchor)!;
  for (const { amount, unit } of math.steps) epoch = add(epoch, amount, unit);
  if (!Number.isFinite(epoch)) return undefined; // beyond what a Date holds (now+99999999y)
  if (!math.round) return epoch;
  const start = roundDown(epoch, math.round);
  return options.roundUp ? add(start, 1, math.round) - 1 : start;
}

/** A range bound as a date: date math, or an ES `date_optional_time` (a partial date rounded as above). */
export function parseDateBound(text: string, options: { roundUp?: boolean; now?: number } = {}): number | undefined {
  return looksLikeDateMath(text) ? parseDateMath(text, options) : parseDate(text, { roundUp: options.roundUp === true });
}
