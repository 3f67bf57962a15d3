/**
 * The pieces of a one-word relevance query that touch every match, written to allocate per query, not per match: at 1M
 * records a medium word has thousands of matches, and an object or array for each was most of the query's time and the
 * garbage whose collection landed in later requests (docs/search.md#one-word-queries).
 */

/** A word's matching rows in row order, and how often the word occurs in each: `rids[i]` holds it `frequencies[i]` times. */
export type WordRows = { rids: Int32Array; frequencies: Int32Array; count: number };

/**
 * The rows of a comma list of a word's instances, one row id per occurrence in row order (FTS5 keeps a word's
 * instances sorted by row): consecutive repeats are one row that holds the word that many times.
 */
export function wordRows(list: string | null): WordRows {
  if (!list) return { rids: new Int32Array(0), frequencies: new Int32Array(0), count: 0 };
  let commas = 0;
  for (let i = 0; i < list.length; i++) if (list.charCodeAt(i) === 44) commas++;
  const rids = new Int32Array(commas + 1);
  const frequencies = new Int32Array(commas + 1);
  let count = 0;
  let value = 0;
  for (let i = 0; i <= list.length; i++) {
    const c = i < list.length ? list.charCodeAt(i) : 44;
    if (c !== 44) {
      value = value * 10 + (c - 48);
      continue;
    }
    if (count > 0 && rids[count - 1] === value) frequencies[count - 1]!++;
    else {
      rids[count] = value;
      frequencies[count++] = 1;
    }
    value = 0;
  }
  return { rids, frequencies, count };
}

/**
 * The positions of the `k` best of `count` scored rows, best first: lower score first, then lower row id, the order
 * of `ORDER BY rank, rowid`. A bounded max-heap keeps the worst of the best at its root, O(count · log k).
 */
export function bestFirst(scores: Float64Array, rids: Int32Array, count: number, k: number): number[] {
  // Whether position x ranks after position y.
  const after = (x: number, y: number) => scores[x]! > scores[y]! || (scores[x] === scores[y] && rids[x]! > rids[y]!);
  const size = Math.min(k, count);
  const heap = new Int32Array(size);
  let filled = 0;
  for (let p = 0; p < count; p++) {
    if (filled < size) {
      let c = filled++;
      heap[c] = p;
      while (c > 0) {
        const parent = (c - 1) >> 1;
        if (!after(heap[c]!, heap[parent]!)) break;
        const swap = heap[c]!;
        heap[c] = heap[parent]!;
        heap[parent] = swap;
        c = parent;
      }
    } else if (size > 0 && after(heap[0]!, p)) {
      heap[0] = p;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let worst = i;
        if (l < size && after(heap[l]!, heap[worst]!)) worst = l;
        if (r < size && after(heap[r]!, heap[worst]!)) worst = r;
        if (worst === i) break;
        const swap = heap[i]!;
        heap[i] = heap[worst]!;
        heap[worst] = swap;
        i = worst;
      }
    }
  }
  return Array.from(heap).sort((x, y) => (after(x, y) ? 1 : after(y, x) ? -1 : 0));
}
