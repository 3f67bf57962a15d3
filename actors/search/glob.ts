/**
 * Glob patterns from callers matched without a RegExp, which takes exponential time on patterns such as
 * `*?*?*?…!`: backtracking only to the last `*`, at most pattern × text steps (docs/search.md#patterns-from-callers).
 * The meaning is the anchored RegExp's: `*` any run and `?` any one UTF-16 code unit, neither crossing a line
 * terminator unless `dotAll`; `\x` is x; `ignoreCase` as the RegExp `i` flag without `u`.
 */

export type GlobOptions = {
  /** Case-insensitive, as the RegExp `i` flag (without `u`). */
  ignoreCase?: boolean;
  /** `*` and `?` match line terminators too, as the RegExp `s` flag. */
  dotAll?: boolean;
};

/** Whether a whole text matches the pattern. */
export type GlobMatcher = (text: string) => boolean;

const ANY_ONE = -1;
const ANY_RUN = -2;

const isLineTerminator = (c: number) => c === 0x0a || c === 0x0d || c === 0x2028 || c === 0x2029;

let canonical: Uint16Array | undefined;

/** ECMAScript's Canonicalize for a non-unicode `i` RegExp, one table for every code unit (built once, 128 KiB). */
function canonicalTable(): Uint16Array {
  if (canonical) return canonical;
  const table = new Uint16Array(0x10000);
  for (let c = 0; c < 0x10000; c++) {
    const upper = String.fromCharCode(c).toUpperCase();
    const cu = upper.length === 1 ? upper.charCodeAt(0) : c;
    table[c] = c >= 128 && cu < 128 ? c : cu;
  }
  return (canonical = table);
}

/**
 * Whether text[tFrom, tTo) matches parts[pFrom, pTo): two pointers, and on a mismatch the last `*`
 * takes one more character. Earlier stars never need to take more: whatever the pattern after the
 * last star must match can start anywhere that star reaches.
 */
function matchRun(
  parts: Int32Array,
  pFrom: number,
  pTo: number,
  text: string,
  tFrom: number,
  tTo: number,
  canon: Uint16Array | undefined,
): boolean {
  let p = pFrom;
  let t = tFrom;
  let star = -1;
  let starText = 0;
  while (t < tTo) {
    const part = p < pTo ? parts[p]! : 0;
    if (p < pTo && part === ANY_RUN) {
      star = p++;
      starText = t;
    } else if (p < pTo && (part === ANY_ONE || part === (canon ? canon[text.charCodeAt(t)]! : text.charCodeAt(t)))) {
      p++;
      t++;
    } else if (star >= 0) {
      p = star + 1;
      t = ++starText;
    } else return false;
  }
  while (p < pTo && parts[p] === ANY_RUN) p++;
  return p === pTo;
}

/** Compiles a pattern once; the matcher is then called on each candidate text. */
export function compileGlob(pattern: string, options: GlobOptions = {}): GlobMatcher {
  const canon = options.ignoreCase ? canonicalTable() : undefined;
  const parts: number[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern.charCodeAt(i);
    if (c === 0x5c /* \ */ && i + 1 < pattern.length) {
      const next = pattern.charCodeAt(++i);
      parts.push(canon ? canon[next]! : next);
    } else if (c === 0x2a /* * */) {
      if (parts[parts.length - 1] !== ANY_RUN) parts.push(ANY_RUN); // `**` is `*`
    } else if (c === 0x3f /* ? */) parts.push(ANY_ONE);
    else parts.push(canon ? canon[c]! : c);
  }
  const compiled = Int32Array.from(parts);
  if (options.dotAll) return (text) => matchRun(compiled, 0, compiled.length, text, 0, text.length, canon);

  // Neither `*` nor `?` matches a line terminator: each of the text's line terminators must meet
  // one written in the pattern, in order, and the pieces between them match piece by piece.
  const breaks: number[] = [];
  compiled.forEach((part, i) => {
    if (part >= 0 && isLineTerminator(part)) breaks.push(i);
  });
  breaks.push(compiled.length);
  return (text) => {
    let t = 0;
    let p = 0;
    for (const end of breaks) {
      let lineEnd = t;
      while (lineEnd < text.length && !isLineTerminator(text.charCodeAt(lineEnd))) lineEnd++;
      if (!matchRun(compiled, p, end, text, t, lineEnd, canon)) return false;
      if (end === compiled.length) return lineEnd === text.length;
      // Line terminators canonicalize to themselves, so the pattern's and the text's compare as they are.
      if (lineEnd === text.length || text.charCodeAt(lineEnd) !== compiled[end]) return false;
      t = lineEnd + 1;
      p = end + 1;
    }
    return false; // not reached: the last break is the pattern's end
  };
}
